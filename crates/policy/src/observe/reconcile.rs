//! The observer's side of the reconciliation loop.
//!
//! The observer keeps the last observed manifest (the application's status). At each check
//! it projects the live resources through the schema and compares with that status: equal,
//! nothing happens; different, it writes the new status, and the controller, seeing status
//! and spec disagree, reconciles. Only applications with both a spec (the desired state)
//! and a status (the observed state) can be reconciled.

use serde_json::Value;

use super::identity::ResourceId;
use super::project::last_observed_manifest;
use super::schema::ObserverSchema;

/// What the observer does after one look at the live resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The live resources match the stored status: nothing happens.
    Unchanged,
    /// They do not: the status is to be replaced by this last observed manifest.
    Changed(Vec<Value>),
}

/// Projects `live` through `schema` and compares it with `stored`, the status the observer
/// last wrote. The order of resources does not matter.
pub fn observe(schema: &ObserverSchema, stored: &[Value], live: &[Value]) -> Observation {
    let observed = last_observed_manifest(schema, live);
    if by_identity(stored) == by_identity(&observed) {
        Observation::Unchanged
    } else {
        Observation::Changed(observed)
    }
}

fn by_identity(resources: &[Value]) -> Vec<(Option<ResourceId>, &Value)> {
    let mut keyed: Vec<_> = resources
        .iter()
        .map(|resource| (ResourceId::of(resource).ok(), resource))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed
}

/// Why a resource cannot be reconciled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotReconcilable {
    #[error("the resource has no spec: there is no desired state to reconcile to")]
    MissingSpec,
    #[error("the resource has no status: there is no observed state to reconcile from")]
    MissingStatus,
}

/// Checks that `resource` has both a `spec` and a `status` mapping.
pub fn check_reconcilable(resource: &Value) -> Result<(), NotReconcilable> {
    if !resource.get("spec").is_some_and(Value::is_object) {
        return Err(NotReconcilable::MissingSpec);
    }
    if !resource.get("status").is_some_and(Value::is_object) {
        return Err(NotReconcilable::MissingStatus);
    }
    Ok(())
}
