//! The reconcile of one namespace: labels and annotations it receives, the `propagate`
//! annotation of generated objects, and the copies it holds.
//!
//! Every decision is arbor-policy's: [`desired_metadata`] for labels and annotations,
//! [`generated_propagation`] for `propagate-generated`, [`plan_namespace_copies`] for copies
//! (seeds/001: create, update and delete by mode and `from`, including copies whose source
//! vanished while the controller was stopped), [`CycleReport`] for cycles. The reconcile
//! compares first and writes only what differs, so a tree already in place costs no write.
//!
//! [`CycleReport`]: arbor_policy::propagation::CycleReport

use std::sync::Arc;
use std::time::{Duration, Instant};

use arbor_policy::object;
use arbor_policy::propagation::{
    CopyAction, NAME_OCCUPIED_RULE, PlanError, TreeError, controller_of, desired_metadata,
    generated_propagation, metadata_change, plan_namespace_copies,
};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use crate::context::Context;
use crate::index::NamespaceView;
use crate::writer::{WriteError, describe};

/// How often a namespace is looked at without any event, as a floor.
const RESYNC: Duration = Duration::from_secs(600);

/// Why a namespace reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("namespace {namespace}: {source}")]
    Plan {
        namespace: String,
        #[source]
        source: PlanError,
    },
    #[error("namespace {namespace}: {}", failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Writes {
        namespace: String,
        failures: Vec<WriteError>,
    },
}

impl NamespaceError {
    /// A short reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Plan { .. } => "PlanFailed",
            Self::Writes { failures, .. } => {
                failures.first().map_or("WriteFailed", WriteError::reason)
            }
        }
    }
}

/// The controller's reconcile function for namespaces.
pub async fn reconcile(
    namespace: Arc<Namespace>,
    context: Arc<Context>,
) -> Result<Action, NamespaceError> {
    context.wait_synced().await;
    let started = Instant::now();
    let result = reconcile_namespace(&namespace, &context).await;
    context
        .metrics
        .observe("namespace", started.elapsed().as_secs_f64());
    context.metrics.reconciles.inc();
    result
}

/// The controller's error policy: count and retry soon.
pub fn error_policy(
    _namespace: Arc<Namespace>,
    error: &NamespaceError,
    context: Arc<Context>,
) -> Action {
    tracing::warn!(%error, "namespace reconcile failed");
    context.metrics.error(error.reason());
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile_namespace(
    namespace: &Namespace,
    context: &Context,
) -> Result<Action, NamespaceError> {
    let name = namespace.name_any();
    if namespace.metadata.deletion_timestamp.is_some() {
        // Nothing can be created in a terminating namespace, and what is in it goes with it.
        return Ok(Action::await_change());
    }
    let Some(view) = context.index.view(&name) else {
        // Not yet in the index: its watch event will trigger this namespace again.
        return Ok(Action::await_change());
    };
    if let Some(cycle) = view.cycles.cycle_halting(&name, &view.tree) {
        context.report_cycle(cycle, &view.cycles).await;
        return Ok(Action::await_change());
    }
    context.forget_resolved_cycles(&view.cycles);

    let mut failures = Vec::new();
    if let Err(error) = apply_metadata(context, &view).await {
        failures.push(error);
    }
    failures.extend(annotate_generated(context, &view).await);
    let plan = plan_namespace_copies(
        &context.rules,
        &view.tree,
        &name,
        &view.upstream_objects,
        &view.objects,
    )
    .map_err(|source| NamespaceError::Plan {
        namespace: name.clone(),
        source,
    })?;
    for planned in plan {
        let live = || {
            view.objects.iter().find(|o| {
                object::name(o) == Some(planned.name.as_str())
                    && object::gvk(o).is_ok_and(|gvk| gvk.group_kind() == planned.group_kind)
            })
        };
        let written = match &planned.action {
            CopyAction::Create(copy) => write_copy(context, "create", copy, live()).await,
            CopyAction::Update(copy) => write_copy(context, "update", copy, live()).await,
            CopyAction::Delete => match live() {
                Some(live) => delete_copy(context, live).await,
                None => Ok(()),
            },
            CopyAction::Leave(reason) => {
                if reason.is_conflict()
                    && let Some(live) = live()
                {
                    let upstream = view
                        .namespace
                        .role(context.rules.keys())
                        .upstream()
                        .map(|u| u.name().to_owned())
                        .unwrap_or_default();
                    report_blocked_copy(context, live, &upstream).await;
                }
                Ok(())
            }
        };
        if let Err(error) = written {
            failures.push(error);
        }
    }
    // Writes refused because the controller stops are no failure: the next leader makes them.
    let (refused, failures): (Vec<WriteError>, Vec<WriteError>) =
        failures.into_iter().partition(WriteError::is_stopping);
    if !failures.is_empty() {
        return Err(NamespaceError::Writes {
            namespace: name,
            failures,
        });
    }
    match refused.first() {
        Some(reason) => {
            tracing::info!(namespace = %name, refused = refused.len(), %reason, "namespace reconcile ended at the stop; the next leader carries on");
            Ok(Action::await_change())
        }
        None => Ok(Action::requeue(RESYNC)),
    }
}

/// Labels and annotations from the upstream (and the SubNamespace spec) when any is missing,
/// and propagated keys no longer received taken off (see arbor-policy's `metadata`).
async fn apply_metadata(context: &Context, view: &NamespaceView) -> Result<(), WriteError> {
    let name = &view.namespace.name;
    let desired = match desired_metadata(
        &context.rules,
        &view.tree,
        name,
        view.sub_namespace.as_ref(),
    ) {
        Ok(desired) => desired,
        // A dangling parent or template: there is nothing to receive until it exists (admission
        // refuses such links; a namespace deleted under its children leaves them so). What it
        // received stays until then: the link names an upstream, it is only missing.
        Err(TreeError::MissingUpstream { upstream, .. }) => {
            tracing::debug!(namespace = %name, %upstream, "upstream does not exist");
            return Ok(());
        }
        Err(error) => {
            tracing::warn!(namespace = %name, %error, "cannot compute propagated metadata");
            return Ok(());
        }
    };
    let change = metadata_change(desired.as_ref(), &view.namespace);
    let mut remaining = change.remove.clone();
    if let Some(desired) = &change.apply {
        let stored = context
            .writer
            .apply_namespace(
                "propagate metadata to",
                name,
                &desired.labels,
                &desired.annotations,
            )
            .await?;
        // The apply removed the stale keys only Arbor held; a predecessor's stay until removed.
        remaining.labels.retain(|k| stored.labels().contains_key(k));
        remaining
            .annotations
            .retain(|k| stored.annotations().contains_key(k));
    }
    if !remaining.is_empty() {
        context
            .writer
            .remove_namespace_keys(name, &remaining)
            .await?;
        tracing::info!(namespace = %name, labels = ?remaining.labels, annotations = ?remaining.annotations, "removed keys no longer propagated");
    }
    Ok(())
}

/// `propagate` on objects whose controller carries `propagate-generated`. The controller is
/// read from the index when its kind is watched, and through the API otherwise (any kind:
/// see [`crate::owners`]).
async fn annotate_generated(context: &Context, view: &NamespaceView) -> Vec<WriteError> {
    let keys = context.rules.keys();
    let mut failures = Vec::new();
    for object in &view.objects {
        let Some(reference) = controller_of(object) else {
            continue;
        };
        // An object annotated on purpose keeps its mode; no owner needs reading.
        if object::annotation(object, &keys.propagate_annotation).is_some_and(|v| !v.is_empty()) {
            continue;
        }
        let (owner, read_through_api) = match context.index.controller_of(object) {
            Some(owner) => (Some(owner), false),
            None if context.owners.already_checked(object) => continue,
            None => match context.owners.read(object, &reference).await {
                Ok(owner) => (owner, true),
                Err(error) => {
                    tracing::warn!(%error, "cannot decide propagate-generated");
                    context.metrics.error(error.reason());
                    continue;
                }
            },
        };
        let Some(annotation) = generated_propagation(keys, object, owner.as_ref()) else {
            if read_through_api && owner.is_some() {
                context.owners.mark_checked(object);
            }
            continue;
        };
        let partial = json!({
            "apiVersion": object.get("apiVersion"),
            "kind": object.get("kind"),
            "metadata": {
                "name": object::name(object),
                "namespace": object::namespace(object),
                "annotations": {annotation.key: annotation.value},
            },
        });
        match context.writer.apply_object("annotate", &partial).await {
            Ok(stored) => context.observe_written(stored, Some(object)),
            Err(error) => failures.push(error),
        }
    }
    failures
}

/// An object of the same name that is not a copy keeps a copy out (arbor-policy's decision
/// rows 6-7): a Warning Event on it and the `errors{reason="CopyBlocked"}` metric, once per
/// object, and a log line.
async fn report_blocked_copy(context: &Context, live: &Value, upstream: &str) {
    let Some(uid) = object::str_at(live, &["metadata", "uid"]) else {
        return;
    };
    if !context.first_block_report(uid) {
        return;
    }
    let object = copy_name(live);
    let note = format!(
        "{object} is not a copy from {upstream} (no {} naming it), so the copy of the {upstream} object of that name is not placed: {NAME_OCCUPIED_RULE}",
        context.rules.keys().from_annotation
    );
    tracing::warn!(%object, %upstream, "copy blocked by an object that is not a copy");
    context.metrics.error(COPY_BLOCKED);
    let reference = ObjectReference {
        api_version: object::str_at(live, &["apiVersion"]).map(str::to_owned),
        kind: object::str_at(live, &["kind"]).map(str::to_owned),
        name: object::name(live).map(str::to_owned),
        namespace: object::namespace(live).map(str::to_owned),
        uid: Some(uid.to_owned()),
        ..ObjectReference::default()
    };
    context
        .publish(&reference, true, COPY_BLOCKED, "Propagate", note)
        .await;
}

/// The reason (Event, metric) when an object that is not a copy keeps a copy out.
pub const COPY_BLOCKED: &str = "CopyBlocked";

/// Writes `copy` in place of `live` (what the index held of it when the write was planned).
async fn write_copy(
    context: &Context,
    action: &'static str,
    copy: &Value,
    live: Option<&Value>,
) -> Result<(), WriteError> {
    let stored = context.writer.apply_object(action, copy).await?;
    context.observe_written(stored, live);
    context.metrics.copy_written(action);
    tracing::info!(action, object = %copy_name(copy), "propagated");
    Ok(())
}

async fn delete_copy(context: &Context, live: &Value) -> Result<(), WriteError> {
    context.writer.delete_object(live).await?;
    context.observe_deleted(live);
    context.metrics.copy_written("delete");
    tracing::info!(object = %copy_name(live), "deleted stale copy");
    Ok(())
}

fn copy_name(object: &Value) -> String {
    match object::ObjectKey::of(object) {
        Ok(key) => describe(
            &key.group_kind,
            key.namespace.as_deref().unwrap_or_default(),
            &key.name,
        ),
        Err(_) => "object".into(),
    }
}
