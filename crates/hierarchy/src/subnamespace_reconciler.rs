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

use arbor_api::condition::{ConditionStatus, ConditionUpdate, reasons, set_condition, types};
use arbor_api::keys::{HIERARCHY_FIELD_MANAGER, HIERARCHY_FINALIZER};
use arbor_api::{SubNamespace as SubNamespaceResource, SubNamespaceStatus};
use arbor_policy::propagation::{
    NamespaceState, SubNamespace, SubNamespaceAction, SubNamespaceDeletion, finalize_sub_namespace,
    reconcile_sub_namespace,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::writer::WriteError;

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
    #[error("SubNamespace {namespace}/{name}: cannot write status: {source}")]
    Status {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Why a SubNamespace reconcile failed.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SubNamespaceError(#[from] Box<finalizer::Error<SubNamespaceFailure>>);

/// The controller's reconcile function for SubNamespaces.
pub async fn reconcile(
    sub_namespace: Arc<SubNamespaceResource>,
    context: Arc<Context>,
) -> Result<Action, SubNamespaceError> {
    context.wait_synced().await;
    let started = Instant::now();
    let namespace = sub_namespace.namespace().unwrap_or_default();
    let api: Api<SubNamespaceResource> =
        Api::namespaced(context.writer.client().clone(), &namespace);
    let result = finalizer(&api, HIERARCHY_FINALIZER, sub_namespace, |event| async {
        match event {
            finalizer::Event::Apply(sub) => apply(&sub, &context).await,
            finalizer::Event::Cleanup(sub) => cleanup(&sub, &context).await,
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

/// The controller's error policy: count and retry soon.
pub fn error_policy(
    _sub_namespace: Arc<SubNamespaceResource>,
    error: &SubNamespaceError,
    context: Arc<Context>,
) -> Action {
    tracing::warn!(%error, "SubNamespace reconcile failed");
    context.metrics.error("SubNamespaceFailed");
    Action::requeue(Duration::from_secs(5))
}

fn policy_view(sub: &SubNamespaceResource) -> Result<SubNamespace, SubNamespaceFailure> {
    let value = serde_json::to_value(sub).map_err(|e| invalid(sub, e.to_string()))?;
    SubNamespace::from_object(&value).map_err(|e| invalid(sub, e.to_string()))
}

fn invalid(sub: &SubNamespaceResource, reason: String) -> SubNamespaceFailure {
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

async fn apply(
    sub: &SubNamespaceResource,
    context: &Context,
) -> Result<Action, SubNamespaceFailure> {
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
                    &sub.object_ref(&()),
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
    sub: &SubNamespaceResource,
    updates: Vec<ConditionUpdate>,
) -> Result<(), SubNamespaceFailure> {
    let current = sub.status.clone().unwrap_or_default();
    let mut conditions = current.conditions.clone();
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
        "apiVersion": SubNamespaceResource::api_version(&()),
        "kind": SubNamespaceResource::kind(&()),
        "metadata": {"name": sub.name_any(), "namespace": sub.namespace()},
        "status": status,
    });
    let namespace = sub.namespace().unwrap_or_default();
    Api::<SubNamespaceResource>::namespaced(context.writer.client().clone(), &namespace)
        .patch_status(
            &sub.name_any(),
            &PatchParams::apply(HIERARCHY_FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|source| SubNamespaceFailure::Status {
            namespace,
            name: sub.name_any(),
            source,
        })?;
    Ok(())
}

async fn cleanup(
    sub: &SubNamespaceResource,
    context: &Context,
) -> Result<Action, SubNamespaceFailure> {
    let view = policy_view(sub)?;
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
