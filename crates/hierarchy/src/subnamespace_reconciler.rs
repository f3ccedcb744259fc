//! The reconcile of one SubNamespace: its namespace exists as its child, and goes with it.
//!
//! A finalizer (`arbor.dev/hierarchy`) holds the SubNamespace until its clean-up ran, so the
//! rule of seeds/001 always holds: deleting a SubNamespace deletes the namespace of its name
//! only when that namespace's parent key names the SubNamespace's namespace. arbor-policy
//! decides ([`reconcile_sub_namespace`], [`finalize_sub_namespace`]); the status reports the
//! outcome with kstatus conditions: `Ready` when the namespace is in place; `Stalled` and
//! `Conflict`, with reason `NamespaceConflict`, when a namespace of that name exists and is not
//! its child.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arbor_api::SubNamespaceStatus;
use arbor_api::condition::{ConditionStatus, ConditionUpdate, reasons, set_condition, types};
use arbor_api::keys::HIERARCHY_FINALIZER;
use arbor_policy::keys::Keys;
use arbor_policy::propagation::{
    NamespaceState, SubNamespace, SubNamespaceAction, SubNamespaceDeletion, finalize_sub_namespace,
    predecessor_field_managers, reconcile_sub_namespace,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::writer::WriteError;

/// The reason (Event and `errors` metric) for a SubNamespace that does not decode.
pub const UNDECODABLE: &str = "UndecodableSubNamespace";

/// What failed inside the finalizer's apply or clean-up.
#[derive(Debug, thiserror::Error)]
pub enum SubNamespaceFailure {
    #[error("SubNamespace {namespace}/{name}: {reason}")]
    Invalid {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("SubNamespace {namespace}/{name}: cannot read namespace {name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Why a SubNamespace reconcile failed.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SubNamespaceError(#[from] Box<finalizer::Error<SubNamespaceFailure>>);

impl SubNamespaceError {
    /// Whether the reconcile ended on a write refused because the controller stops
    /// ([`WriteError::is_stopping`]), in the apply, the clean-up or around the finalizer.
    fn is_stopping(&self) -> bool {
        match self.0.as_ref() {
            finalizer::Error::ApplyFailed(SubNamespaceFailure::Write(error))
            | finalizer::Error::CleanupFailed(SubNamespaceFailure::Write(error)) => {
                error.is_stopping()
            }
            _ => false,
        }
    }
}

/// The controller's reconcile function for SubNamespaces. A reconcile ended because the
/// controller stops is a normal outcome (logged with its reason, not counted, not retried):
/// the next leader carries on.
pub async fn reconcile(
    sub_namespace: Arc<DynamicObject>,
    context: Arc<Context>,
) -> Result<Action, SubNamespaceError> {
    let namespace = sub_namespace.namespace().unwrap_or_default();
    let name = sub_namespace.name_any();
    match reconcile_sub_namespace_object(sub_namespace, context).await {
        Err(error) if error.is_stopping() => {
            tracing::info!(%namespace, %name, reason = %error, "SubNamespace reconcile ended at the stop; the next leader carries on");
            Ok(Action::await_change())
        }
        outcome => outcome,
    }
}

async fn reconcile_sub_namespace_object(
    sub_namespace: Arc<DynamicObject>,
    context: Arc<Context>,
) -> Result<Action, SubNamespaceError> {
    context.wait_synced().await;
    let started = Instant::now();
    let namespace = sub_namespace.namespace().unwrap_or_default();
    if sub_namespace.metadata.deletion_timestamp.is_none()
        && let Err(reason) = policy_view(&sub_namespace)
    {
        // One object that does not decode never stops the others: it is reported and left
        // alone (no namespace is made from a spec that cannot be read) until it changes.
        report_undecodable(&sub_namespace, &reason, &context).await;
        return Ok(Action::await_change());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(
        context.writer.client().clone(),
        &namespace,
        &context.sub_namespaces,
    );
    if let Some(predecessor) = predecessor_finalizer(context.rules.keys())
        && sub_namespace.finalizers().contains(&predecessor)
    {
        let result = take_over(&api, &predecessor, &sub_namespace, &context).await;
        let done = sub_namespace.metadata.deletion_timestamp.is_none()
            || !sub_namespace
                .finalizers()
                .iter()
                .any(|f| f == HIERARCHY_FINALIZER);
        if result.is_err() || done {
            context
                .metrics
                .observe("subnamespace", started.elapsed().as_secs_f64());
            return result.map_err(|e| SubNamespaceError(Box::new(e)));
        }
    }
    // `finalizer()` may add the finalizer first thing: a write.
    if let Err(stopping) = context.writer.refuse_once_stopping("add the finalizer") {
        return Err(SubNamespaceError(Box::new(finalizer::Error::ApplyFailed(
            stopping.into(),
        ))));
    }
    let result = finalizer(&api, HIERARCHY_FINALIZER, sub_namespace, |event| async {
        match event {
            finalizer::Event::Apply(sub) => apply(&sub, &context).await,
            finalizer::Event::Cleanup(sub) => {
                let action = cleanup(&sub, &context).await?;
                // `finalizer()` removes the finalizer once the clean-up succeeded: a write.
                context
                    .writer
                    .refuse_once_stopping("remove the finalizer")?;
                Ok(action)
            }
        }
    })
    .await;
    let result = match result {
        // Two clean-ups raced and the other one already let the object go.
        Err(finalizer::Error::RemoveFinalizer(kube::Error::Api(status)))
            if status.is_not_found() =>
        {
            Ok(Action::await_change())
        }
        other => other.map_err(|e| SubNamespaceError(Box::new(e))),
    };
    context
        .metrics
        .observe("subnamespace", started.elapsed().as_secs_f64());
    result
}

/// The finalizer the system Arbor takes over from puts on SubNamespaces: Accurate's
/// `accurate.cybozu.com/finalizer`, and Innu's under its domain.
fn predecessor_finalizer(keys: &Keys) -> Option<String> {
    (!predecessor_field_managers(keys.domain()).is_empty()).then(|| keys.custom("finalizer"))
}

/// A SubNamespace carrying the predecessor's finalizer. Alive, it is reconciled as is: that
/// finalizer already holds it until Arbor's clean-up ran, so Arbor adds none of its own (a
/// cluster taken over costs no write where nothing differs). Being deleted, Arbor finishes what
/// the predecessor started: the same clean-up rule, then its finalizer removed.
async fn take_over(
    api: &Api<DynamicObject>,
    predecessor: &str,
    sub: &DynamicObject,
    context: &Context,
) -> Result<Action, finalizer::Error<SubNamespaceFailure>> {
    if sub.metadata.deletion_timestamp.is_none() {
        return apply(sub, context)
            .await
            .map_err(finalizer::Error::ApplyFailed);
    }
    cleanup(sub, context)
        .await
        .map_err(finalizer::Error::CleanupFailed)?;
    context
        .writer
        .refuse_once_stopping("remove the predecessor's finalizer")
        .map_err(|stopping| finalizer::Error::CleanupFailed(stopping.into()))?;
    let remaining: Vec<&String> = sub
        .finalizers()
        .iter()
        .filter(|f| *f != predecessor)
        .collect();
    // The resourceVersion makes the server refuse the patch if the list changed meanwhile.
    let patch = json!({"metadata": {
        "finalizers": remaining,
        "resourceVersion": sub.metadata.resource_version,
    }});
    match api
        .patch(
            &sub.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(error) => return Err(finalizer::Error::RemoveFinalizer(error)),
    }
    tracing::info!(namespace = ?sub.namespace(), name = %sub.name_any(), finalizer = predecessor,
        "finished the deletion of a SubNamespace the previous controller left");
    Ok(Action::await_change())
}

/// A SubNamespace that does not decode: a warning naming it and the field, an Event on it,
/// and the `errors{reason="UndecodableSubNamespace"}` metric.
async fn report_undecodable(sub: &DynamicObject, reason: &SubNamespaceFailure, context: &Context) {
    tracing::warn!(%reason, "SubNamespace skipped: it does not decode");
    context.metrics.error(UNDECODABLE);
    context
        .publish(
            &sub.object_ref(&context.sub_namespaces),
            true,
            UNDECODABLE,
            "Decode",
            format!("{reason}; this SubNamespace is skipped until it is fixed"),
        )
        .await;
}

/// The controller's error policy: count and retry soon.
pub fn error_policy(
    _sub_namespace: Arc<DynamicObject>,
    error: &SubNamespaceError,
    context: Arc<Context>,
) -> Action {
    tracing::warn!(%error, "SubNamespace reconcile failed");
    context.metrics.error("SubNamespaceFailed");
    Action::requeue(Duration::from_secs(5))
}

fn policy_view(sub: &DynamicObject) -> Result<SubNamespace, SubNamespaceFailure> {
    let value = serde_json::to_value(sub).map_err(|e| invalid(sub, e.to_string()))?;
    SubNamespace::decode(&value).map_err(|e| invalid(sub, e.to_string()))
}

/// What a clean-up needs: where the SubNamespace lives and its name; its spec plays no part.
fn identity(sub: &DynamicObject) -> SubNamespace {
    SubNamespace::new(sub.namespace().unwrap_or_default(), sub.name_any())
}

fn invalid(sub: &DynamicObject, reason: String) -> SubNamespaceFailure {
    SubNamespaceFailure::Invalid {
        namespace: sub.namespace().unwrap_or_default(),
        name: sub.name_any(),
        reason,
    }
}

/// The namespace named like the SubNamespace, read from the API server: creating it must not
/// depend on a cache that may lag.
async fn existing_namespace(
    context: &Context,
    sub: &SubNamespace,
) -> Result<Option<(NamespaceState, Option<String>)>, SubNamespaceFailure> {
    let found = Api::<Namespace>::all(context.writer.client().clone())
        .get_opt(&sub.name)
        .await
        .map_err(|source| SubNamespaceFailure::Read {
            namespace: sub.namespace.clone(),
            name: sub.name.clone(),
            source,
        })?;
    Ok(found.map(|ns| {
        let state = NamespaceState {
            name: ns.name_any(),
            labels: ns.labels().clone(),
            annotations: ns.annotations().clone(),
            ..NamespaceState::default()
        };
        (state, ns.metadata.uid)
    }))
}

async fn apply(sub: &DynamicObject, context: &Context) -> Result<Action, SubNamespaceFailure> {
    let view = policy_view(sub)?;
    let existing = existing_namespace(context, &view).await?;
    let generation = sub.metadata.generation;
    let conditions = match reconcile_sub_namespace(
        &context.rules,
        &view,
        existing.as_ref().map(|(s, _)| s),
    ) {
        SubNamespaceAction::CreateNamespace(namespace) => {
            context
                .writer
                .apply_namespace(
                    "create sub-namespace",
                    &namespace.name,
                    &namespace.labels,
                    &namespace.annotations,
                )
                .await?;
            tracing::info!(parent = %view.namespace, namespace = %view.name, "created sub-namespace");
            in_place(&view, generation)
        }
        SubNamespaceAction::Exists => in_place(&view, generation),
        SubNamespaceAction::Conflict { existing_parent } => {
            let owner = existing_parent.map_or("no parent".to_owned(), |p| format!("parent {p}"));
            let message = format!(
                "namespace {} exists with {owner}; it is not a child of {}",
                view.name, view.namespace
            );
            context
                .publish(
                    &sub.object_ref(&context.sub_namespaces),
                    true,
                    reasons::NAMESPACE_CONFLICT,
                    "CreateNamespace",
                    message.clone(),
                )
                .await;
            vec![
                ConditionUpdate::new(
                    types::READY,
                    ConditionStatus::False,
                    reasons::NAMESPACE_CONFLICT,
                    message.clone(),
                )
                .observed(generation),
                ConditionUpdate::new(
                    types::STALLED,
                    ConditionStatus::True,
                    reasons::NAMESPACE_CONFLICT,
                    message.clone(),
                )
                .observed(generation),
                ConditionUpdate::new(
                    types::CONFLICT,
                    ConditionStatus::True,
                    reasons::NAMESPACE_CONFLICT,
                    message,
                )
                .observed(generation),
            ]
        }
    };
    write_status(context, sub, conditions).await?;
    Ok(Action::requeue(Duration::from_secs(600)))
}

fn in_place(view: &SubNamespace, generation: Option<i64>) -> Vec<ConditionUpdate> {
    let message = format!("namespace {} is a child of {}", view.name, view.namespace);
    vec![
        ConditionUpdate::new(
            types::READY,
            ConditionStatus::True,
            reasons::NAMESPACE_IN_PLACE,
            message.clone(),
        )
        .observed(generation),
        ConditionUpdate::new(
            types::STALLED,
            ConditionStatus::False,
            reasons::NAMESPACE_IN_PLACE,
            message.clone(),
        )
        .observed(generation),
        ConditionUpdate::new(
            types::CONFLICT,
            ConditionStatus::False,
            reasons::NAMESPACE_IN_PLACE,
            message,
        )
        .observed(generation),
    ]
}

/// Writes the status only when a condition or the observed generation changed.
async fn write_status(
    context: &Context,
    sub: &DynamicObject,
    updates: Vec<ConditionUpdate>,
) -> Result<(), SubNamespaceFailure> {
    // A status another controller wrote in another shape (Accurate v1's was a string) is
    // replaced, not an error.
    let current: SubNamespaceStatus = sub
        .data
        .get("status")
        .and_then(|status| serde_json::from_value(status.clone()).ok())
        .unwrap_or_default();
    let mut conditions = current.conditions.clone();
    let in_place = updates
        .iter()
        .any(|u| u.type_ == types::READY && u.status == ConditionStatus::True);
    if in_place && says_current(&current, sub.metadata.generation) {
        // Already Current in kstatus' terms (a status as Accurate writes it: the generation
        // observed, nothing stalled): there is nothing new to say, so nothing is written.
        return Ok(());
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut changed = current.observed_generation != sub.metadata.generation;
    for update in updates {
        changed |= set_condition(&mut conditions, update, now.clone());
    }
    if !changed {
        return Ok(());
    }
    let status = SubNamespaceStatus {
        observed_generation: sub.metadata.generation,
        conditions,
    };
    let patch = json!({
        "apiVersion": context.sub_namespaces.api_version,
        "kind": context.sub_namespaces.kind,
        "metadata": {"name": sub.name_any(), "namespace": sub.namespace()},
        "status": status,
    });
    context
        .writer
        .apply_status(
            &context.sub_namespaces,
            &sub.namespace().unwrap_or_default(),
            &sub.name_any(),
            &patch,
        )
        .await?;
    Ok(())
}

/// Whether `status` already says, in kstatus' terms, that the SubNamespace is Current at
/// `generation`: observed, and no condition saying otherwise (Ready=False, Stalled or
/// Conflict True).
fn says_current(status: &SubNamespaceStatus, generation: Option<i64>) -> bool {
    status.observed_generation.is_some()
        && status.observed_generation == generation
        && !status.conditions.iter().any(|c| {
            (c.type_ == types::READY && c.status != "True")
                || ((c.type_ == types::STALLED || c.type_ == types::CONFLICT) && c.status == "True")
        })
}

async fn cleanup(sub: &DynamicObject, context: &Context) -> Result<Action, SubNamespaceFailure> {
    let view = identity(sub);
    let existing = existing_namespace(context, &view).await?;
    let state = existing.as_ref().map(|(state, _)| state);
    match finalize_sub_namespace(context.rules.keys(), &view, state) {
        SubNamespaceDeletion::DeleteNamespace => {
            let uid = existing.as_ref().and_then(|(_, uid)| uid.as_deref());
            context.writer.delete_namespace(&view.name, uid).await?;
            tracing::info!(parent = %view.namespace, namespace = %view.name, "deleted sub-namespace");
        }
        SubNamespaceDeletion::NamespaceMissing => {}
        SubNamespaceDeletion::NotItsChild => {
            tracing::info!(parent = %view.namespace, namespace = %view.name, "SubNamespace deleted; namespace kept: it is not a child of this namespace");
        }
    }
    Ok(Action::await_change())
}
