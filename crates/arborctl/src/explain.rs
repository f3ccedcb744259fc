//! `arborctl explain KIND/NAMESPACE/NAME` (or `KIND/NAME`): why Arbor does what it does to one
//! object.
//!
//! arbor-gitsync answers which sources declare the object, the inputs of the action table
//! (seeds/000) and the row that applies. For a namespaced object arbor-hierarchy adds the
//! propagation view: when the object is a copy of an ancestor's or template's object, which
//! namespace it comes from and the rule that keeps it; otherwise where the object itself
//! propagates. arbor-hierarchy is optional: when it cannot be reached the git answer is still
//! printed and a warning says what is missing.

use std::fmt::Write as _;
use std::str::FromStr;

use arbor_proto::v1::hierarchy_service_client::HierarchyServiceClient;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{
    ActionInputs, ExplainPropagationRequest, ExplainPropagationResponse, ExplainRequest,
    ExplainResponse, GetNamespaceRequest, ObjectRef, PropagatedObject,
};
use clap::Args;
use serde_json::{Value, json};

use crate::connect::{ConnectionArgs, Remote, Service};
use crate::output::{
    Format, OutputArgs, decision_json, decision_line, enum_name, object_json, object_name,
    optional_object_name, optional_source_name, print_structured, source_json,
};

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The object: KIND/NAMESPACE/NAME, or KIND/NAME when cluster-scoped. KIND may carry its
    /// group, like Deployment.apps.
    pub object: ObjectArg,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

/// An object named on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectArg(pub ObjectRef);

impl FromStr for ObjectArg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            format!(
                "invalid object {text:?}: expected KIND/NAMESPACE/NAME or KIND/NAME (KIND may be Kind.group)"
            )
        };
        let parts: Vec<&str> = text.split('/').collect();
        if parts.iter().any(|part| part.is_empty()) {
            return Err(invalid());
        }
        let (kind, namespace, name) = match parts.as_slice() {
            [kind, namespace, name] => (*kind, *namespace, *name),
            [kind, name] => (*kind, "", *name),
            _ => return Err(invalid()),
        };
        let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
        Ok(Self(ObjectRef {
            group: group.to_owned(),
            version: String::new(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }))
    }
}

/// How the object relates to propagation.
#[derive(Debug)]
pub struct Propagation {
    /// Set when the object is a copy: the copy as arbor-hierarchy lists it in its namespace.
    pub copy: Option<PropagatedObject>,
    pub explanation: ExplainPropagationResponse,
}

pub async fn run(args: &ExplainArgs) -> anyhow::Result<()> {
    let object = args.object.0.clone();
    let sync = args.connection.connect(Service::Sync).await?;
    let explained = SyncServiceClient::new(sync.channel())
        .explain(ExplainRequest {
            object: Some(object.clone()),
        })
        .await
        .map_err(|status| sync.call_failed("Explain", status))?
        .into_inner();
    let propagation = if object.namespace.is_empty() {
        None
    } else {
        match args.connection.connect(Service::Hierarchy).await {
            Ok(hierarchy) => Some(explain_propagation(&hierarchy, &object).await?),
            Err(error) => {
                eprintln!("warning: propagation not explained: {error}");
                None
            }
        }
    };
    match args.output.format {
        Format::Table => print!("{}", render(&explained, propagation.as_ref())),
        format => print_structured(format, &explain_json(&explained, propagation.as_ref()))?,
    }
    Ok(())
}

/// Asks arbor-hierarchy whether `object` is a propagated copy and, if so, explains the copy
/// from its origin; otherwise explains where the object itself propagates.
async fn explain_propagation(
    hierarchy: &Remote,
    object: &ObjectRef,
) -> anyhow::Result<Propagation> {
    let mut client = HierarchyServiceClient::new(hierarchy.channel());
    let copy = match client
        .get_namespace(GetNamespaceRequest {
            name: object.namespace.clone(),
        })
        .await
    {
        Ok(response) => response
            .into_inner()
            .namespace
            .into_iter()
            .flat_map(|namespace| namespace.objects)
            .find(|copy| {
                copy.object
                    .as_ref()
                    .is_some_and(|copied| same_object(copied, object))
            }),
        // A namespace arbor-hierarchy does not track holds no copies.
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => return Err(hierarchy.call_failed("GetNamespace", status).into()),
    };
    let request = match &copy {
        Some(copy) => ExplainPropagationRequest {
            object: Some(ObjectRef {
                namespace: copy.from.clone(),
                ..object.clone()
            }),
            target_namespace: object.namespace.clone(),
        },
        None => ExplainPropagationRequest {
            object: Some(object.clone()),
            target_namespace: String::new(),
        },
    };
    let explanation = client
        .explain_propagation(request)
        .await
        .map_err(|status| hierarchy.call_failed("ExplainPropagation", status))?
        .into_inner();
    Ok(Propagation { copy, explanation })
}

/// Same kind and name; the group only counts when the command line gave one.
fn same_object(copied: &ObjectRef, wanted: &ObjectRef) -> bool {
    copied.kind == wanted.kind
        && copied.name == wanted.name
        && (wanted.group.is_empty() || copied.group == wanted.group)
}

pub fn render(explained: &ExplainResponse, propagation: Option<&Propagation>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Object:      {}",
        optional_object_name(explained.object.as_ref())
    );
    let _ = writeln!(
        out,
        "State:       {}",
        enum_name(explained.state().as_str_name(), "MANAGED_STATE_")
    );
    if explained.declarations.is_empty() {
        out.push_str("Declared by: no source\n");
    } else {
        out.push_str("Declared by:\n");
        for declaration in &explained.declarations {
            let _ = write!(
                out,
                "  {} file {} at commit {}",
                optional_source_name(declaration.source.as_ref()),
                declaration.file,
                declaration.commit
            );
            if !declaration.inherited_from.is_empty() {
                let _ = write!(out, " (inherited from {})", declaration.inherited_from);
            }
            out.push('\n');
        }
    }
    if let Some(inputs) = &explained.inputs {
        let _ = writeln!(out, "Inputs:      {}", inputs_line(inputs));
    }
    match &explained.decision {
        Some(decision) => {
            let _ = writeln!(out, "Decision:    {}", decision_line(decision));
        }
        None => out.push_str("Decision:    none\n"),
    }
    if let Some(propagation) = propagation {
        out.push_str(&render_propagation(propagation));
    }
    out
}

fn render_propagation(propagation: &Propagation) -> String {
    let explanation = &propagation.explanation;
    let mode = enum_name(explanation.mode().as_str_name(), "PROPAGATE_MODE_");
    let mut out = String::from("Propagation:\n");
    match &propagation.copy {
        Some(copy) => {
            let _ = writeln!(
                out,
                "  copy of {} (mode {mode}, {})",
                optional_object_name(explanation.object.as_ref()),
                if copy.in_sync {
                    "in sync"
                } else {
                    "update due"
                }
            );
        }
        None => {
            let _ = writeln!(out, "  mode {mode}");
        }
    }
    if let Some(owner) = &explanation.generated_from {
        let _ = writeln!(
            out,
            "  mode set by propagate-generated on {}",
            object_name(owner)
        );
    }
    if explanation.targets.is_empty() {
        out.push_str("  no target namespaces\n");
    }
    for target in &explanation.targets {
        let decision = target
            .decision
            .as_ref()
            .map_or_else(|| "no decision".to_owned(), decision_line);
        let _ = writeln!(out, "  {}: {decision}", target.namespace);
    }
    out
}

/// The action table's columns; unset optionals are the table's N/A.
fn inputs_line(inputs: &ActionInputs) -> String {
    let yes_no = |value: bool| if value { "yes" } else { "no" };
    let optional = |value: Option<bool>| value.map_or("N/A", yes_no);
    format!(
        "sync declared={} resource declared={} on cluster={} has label={} matches={}",
        yes_no(inputs.sync_declared),
        yes_no(inputs.resource_declared),
        yes_no(inputs.on_cluster),
        optional(inputs.has_label),
        optional(inputs.matches),
    )
}

pub fn explain_json(explained: &ExplainResponse, propagation: Option<&Propagation>) -> Value {
    json!({
        "object": object_json(explained.object.as_ref()),
        "state": enum_name(explained.state().as_str_name(), "MANAGED_STATE_"),
        "declarations": explained.declarations.iter().map(|declaration| json!({
            "source": source_json(declaration.source.as_ref()),
            "file": declaration.file,
            "commit": declaration.commit,
            "inheritedFrom": declaration.inherited_from,
        })).collect::<Vec<_>>(),
        "inputs": explained.inputs.as_ref().map(|inputs| json!({
            "syncDeclared": inputs.sync_declared,
            "resourceDeclared": inputs.resource_declared,
            "onCluster": inputs.on_cluster,
            "hasLabel": inputs.has_label,
            "matches": inputs.matches,
        })),
        "decision": decision_json(explained.decision.as_ref()),
        "propagation": propagation.map(propagation_json),
    })
}

fn propagation_json(propagation: &Propagation) -> Value {
    let explanation = &propagation.explanation;
    json!({
        "copy": propagation.copy.as_ref().map(|copy| json!({
            "from": copy.from,
            "mode": enum_name(copy.mode().as_str_name(), "PROPAGATE_MODE_"),
            "inSync": copy.in_sync,
        })),
        "object": object_json(explanation.object.as_ref()),
        "mode": enum_name(explanation.mode().as_str_name(), "PROPAGATE_MODE_"),
        "generatedFrom": object_json(explanation.generated_from.as_ref()),
        "targets": explanation.targets.iter().map(|target| json!({
            "namespace": target.namespace,
            "decision": decision_json(target.decision.as_ref()),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_parse_with_and_without_namespace_and_group() {
        let ObjectArg(deployment) = "Deployment.apps/team-a/web".parse().unwrap();
        assert_eq!(
            (deployment.group.as_str(), deployment.kind.as_str()),
            ("apps", "Deployment")
        );
        assert_eq!(
            (deployment.namespace.as_str(), deployment.name.as_str()),
            ("team-a", "web")
        );
        let ObjectArg(role) = "ClusterRole.rbac.authorization.k8s.io/view"
            .parse()
            .unwrap();
        assert_eq!(role.group, "rbac.authorization.k8s.io");
        assert!(role.namespace.is_empty());
    }

    #[test]
    fn malformed_objects_are_refused_with_the_expected_shape() {
        for text in ["Deployment", "a/b/c/d", "ConfigMap//x"] {
            let error = text.parse::<ObjectArg>().unwrap_err();
            assert!(error.contains("KIND/NAMESPACE/NAME"), "{error}");
        }
    }
}
