//! `arborctl review -f OBJECT.yaml`: what arbor-webhook would answer to a change, before it is
//! made.
//!
//! The object (and, for an update, the object before it with `--old`) goes to the webhook's
//! `PolicyService.Review`, which runs the same rules as admission without changing anything.
//! The answer is the decision (allowed or denied), the rule and its reason, every check that was
//! evaluated, and any warning. Like `kubectl diff`, the exit code is the answer: 0 allowed,
//! 1 denied, 2 when the review itself could not be made, so a CI step can gate on it.

use std::path::{Path, PathBuf};

use arbor_proto::v1::policy_service_client::PolicyServiceClient;
use arbor_proto::v1::{Decision, ObjectRef, Operation, ReviewRequest, ReviewResponse, UserInfo};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::connect::{ConnectionArgs, Service};
use crate::output::{Format, OutputArgs, decision_json, print_structured};

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The object after the change (YAML or JSON, one object); for `--operation delete`, the
    /// object being deleted.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,

    /// The kind of change.
    #[arg(long, value_enum, default_value_t = ReviewOperation::Create)]
    pub operation: ReviewOperation,

    /// For an update: the object before the change (YAML or JSON).
    #[arg(long)]
    pub old: Option<PathBuf>,

    /// The user making the change, as the API server would name them.
    #[arg(long = "as")]
    pub user: Option<String>,

    /// A group of that user (repeatable).
    #[arg(long = "as-group")]
    pub groups: Vec<String>,

    /// The subresource changed, like `status`.
    #[arg(long)]
    pub subresource: Option<String>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReviewOperation {
    Create,
    Update,
    Delete,
}

/// The review was made and the change would be refused.
#[derive(Debug, thiserror::Error)]
#[error("denied by {rule}: {reason}")]
pub struct Denied {
    pub rule: String,
    pub reason: String,
}

/// Reads one object from `path`.
fn read_object(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", path.display()))?;
    let object: Value = serde_saphyr::from_str(&text).map_err(|error| {
        anyhow::anyhow!("{} is not one YAML or JSON object: {error}", path.display())
    })?;
    if !object.is_object() {
        anyhow::bail!("{} does not hold an object", path.display());
    }
    Ok(object)
}

/// The identity of `object`, from its apiVersion, kind and metadata.
fn object_ref(object: &Value, path: &Path) -> anyhow::Result<ObjectRef> {
    let field = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let api_version = field("/apiVersion")
        .ok_or_else(|| anyhow::anyhow!("{}: apiVersion is required", path.display()))?;
    let kind =
        field("/kind").ok_or_else(|| anyhow::anyhow!("{}: kind is required", path.display()))?;
    let name = field("/metadata/name")
        .ok_or_else(|| anyhow::anyhow!("{}: metadata.name is required", path.display()))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(ObjectRef {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        namespace: field("/metadata/namespace").unwrap_or_default().to_owned(),
        name: name.to_owned(),
    })
}

/// The request the webhook reviews.
pub fn request(args: &ReviewArgs) -> anyhow::Result<ReviewRequest> {
    let object = read_object(&args.file)?;
    let old = args.old.as_deref().map(read_object).transpose()?;
    let (operation, object_json, old_object_json) = match args.operation {
        ReviewOperation::Create => (Operation::Create, object.to_string(), String::new()),
        ReviewOperation::Update => {
            let old = old.ok_or_else(|| {
                anyhow::anyhow!("--operation update needs --old: the object before the change")
            })?;
            (Operation::Update, object.to_string(), old.to_string())
        }
        ReviewOperation::Delete => (Operation::Delete, String::new(), object.to_string()),
    };
    Ok(ReviewRequest {
        operation: operation.into(),
        object: Some(object_ref(&object, &args.file)?),
        object_json,
        old_object_json,
        user: args.user.as_ref().map(|username| UserInfo {
            username: username.clone(),
            groups: args.groups.clone(),
            ..UserInfo::default()
        }),
        sub_resource: args.subresource.clone().unwrap_or_default(),
    })
}

pub async fn run(args: &ReviewArgs) -> anyhow::Result<()> {
    let request = request(args)?;
    let remote = args.connection.connect(Service::Policy).await?;
    let response = PolicyServiceClient::new(remote.channel())
        .review(request)
        .await
        .map_err(|status| remote.call_failed("Review", status))?
        .into_inner();
    match args.output.format {
        Format::Table => print!("{}", render(&response)),
        format => print_structured(format, &review_json(&response))?,
    }
    let decision = response.decision.unwrap_or_default();
    if decision.allowed {
        Ok(())
    } else {
        Err(Denied {
            rule: decision.rule,
            reason: decision.reason,
        }
        .into())
    }
}

fn verdict(decision: &Decision) -> &'static str {
    if decision.allowed {
        "allowed"
    } else {
        "denied"
    }
}

pub fn render(response: &ReviewResponse) -> String {
    let decision = response.decision.clone().unwrap_or_default();
    let mut out = verdict(&decision).to_uppercase();
    if !decision.rule.is_empty() {
        out.push_str(&format!(" by {}", decision.rule));
    }
    if !decision.reason.is_empty() {
        out.push_str(&format!(": {}", decision.reason));
    }
    out.push('\n');
    for warning in &response.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    if !response.checks.is_empty() {
        out.push_str("checks:\n");
        for check in &response.checks {
            out.push_str(&format!(
                "  {:<8} {}: {}\n",
                verdict(check),
                check.rule,
                check.reason
            ));
        }
    }
    out
}

fn review_json(response: &ReviewResponse) -> Value {
    json!({
        "decision": decision_json(response.decision.as_ref()),
        "warnings": response.warnings,
        "checks": response.checks.iter().map(|check| decision_json(Some(check))).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &Path, object: &str, operation: ReviewOperation) -> ReviewArgs {
        let file = dir.join("object.yaml");
        std::fs::write(&file, object).unwrap();
        ReviewArgs {
            file,
            operation,
            old: None,
            user: Some("jane".into()),
            groups: vec!["devs".into()],
            subresource: None,
            output: OutputArgs {
                format: Format::Table,
            },
            connection: ConnectionArgs::default(),
        }
    }

    const CONFIG_MAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: team-a\n";

    #[test]
    fn a_create_sends_the_object_and_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let request = request(&args(dir.path(), CONFIG_MAP, ReviewOperation::Create)).unwrap();
        assert_eq!(request.operation(), Operation::Create);
        let object = request.object.unwrap();
        assert_eq!(
            (
                object.group.as_str(),
                object.version.as_str(),
                object.kind.as_str()
            ),
            ("", "v1", "ConfigMap")
        );
        assert_eq!(
            (object.namespace.as_str(), object.name.as_str()),
            ("team-a", "settings")
        );
        assert!(request.old_object_json.is_empty());
        assert_eq!(request.user.unwrap().groups, ["devs"]);
    }

    #[test]
    fn a_delete_sends_the_file_as_the_old_object() {
        let dir = tempfile::tempdir().unwrap();
        let request = request(&args(dir.path(), CONFIG_MAP, ReviewOperation::Delete)).unwrap();
        assert!(request.object_json.is_empty());
        assert!(request.old_object_json.contains("settings"));
    }

    #[test]
    fn an_update_without_the_old_object_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = request(&args(dir.path(), CONFIG_MAP, ReviewOperation::Update)).unwrap_err();
        assert!(error.to_string().contains("--old"), "{error}");
    }

    #[test]
    fn an_object_without_a_name_is_refused_naming_the_field_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = request(&args(
            dir.path(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
            ReviewOperation::Create,
        ))
        .unwrap_err()
        .to_string();
        assert!(error.contains("metadata.name is required"), "{error}");
        assert!(error.contains("object.yaml"), "{error}");
    }

    #[test]
    fn a_denial_is_rendered_with_its_rule_and_checks() {
        let response = ReviewResponse {
            decision: Some(Decision {
                allowed: false,
                rule: "seeds/001 no cycles".into(),
                reason: "team-a would be its own ancestor".into(),
                ..Decision::default()
            }),
            warnings: vec![],
            checks: vec![Decision {
                allowed: false,
                rule: "seeds/001 no cycles".into(),
                reason: "team-a would be its own ancestor".into(),
                ..Decision::default()
            }],
        };
        let text = render(&response);
        assert!(
            text.starts_with("DENIED by seeds/001 no cycles: team-a would be its own ancestor\n"),
            "{text}"
        );
        assert!(text.contains("  denied   seeds/001 no cycles"), "{text}");
    }
}
