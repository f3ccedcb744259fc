//! Behaviour particular to a few built-in kinds on create and update: a Namespace starts
//! Active with the "kubernetes" finalizer; a CustomResourceDefinition is validated, reported
//! established, and (once committed) served.

use serde_json::{Value, json};

use crate::meta;
use crate::registry::crd::{self, established_status};
use crate::registry::{Registry, ResourceId, ResourceKind};
use crate::state::namespaces;
use crate::status::ApiError;

pub fn custom_resource_definitions() -> ResourceId {
    ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions")
}

/// Prepares a new object of a kind with special rules; returns the kind to register when the
/// object is a CRD.
pub fn prepare_create(
    kind: &ResourceKind,
    registry: &Registry,
    object: &mut Value,
    now: &str,
) -> Result<Option<ResourceKind>, ApiError> {
    if kind.id == namespaces() {
        if !object.get("spec").is_some_and(Value::is_object) {
            object["spec"] = json!({});
        }
        object["spec"]["finalizers"] = json!(["kubernetes"]);
        object["status"] = json!({"phase": "Active"});
        label_namespace_name(object);
        return Ok(None);
    }
    if kind.id == custom_resource_definitions() {
        let served = served_kind(kind, object)?;
        if registry
            .get(&served.id)
            .is_some_and(|existing| !existing.custom)
        {
            return Err(ApiError::invalid(
                &kind.id.group,
                &kind.kind,
                meta::name(object),
                vec![crate::status::Cause::invalid(
                    "spec.names.plural",
                    &Value::from(served.id.plural.clone()),
                    "is already served by a built-in kind",
                )],
            ));
        }
        object["status"] = established_status(object, &served, now);
        return Ok(Some(served));
    }
    Ok(None)
}

/// The label kube-apiserver keeps on every namespace, so selectors can pick namespaces by name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn label_namespace_name(namespace: &mut Value) {
    let name = Value::from(meta::name(namespace));
    let metadata = meta::metadata_mut(namespace);
    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[NAMESPACE_NAME_LABEL] = name;
}

/// Prepares an update of a kind with special rules; like [`prepare_create`]. A namespace's
/// `spec.finalizers` change only through `/finalize`.
pub fn prepare_update(
    kind: &ResourceKind,
    subresource: Option<&str>,
    old: &Value,
    new: &mut Value,
    now: &str,
) -> Result<Option<ResourceKind>, ApiError> {
    if kind.id == namespaces() {
        if subresource != Some("finalize") {
            let finalizers = meta::lookup_path(old, "spec.finalizers").cloned();
            match (
                finalizers,
                new.get_mut("spec").and_then(Value::as_object_mut),
            ) {
                (Some(finalizers), Some(spec)) => {
                    spec.insert("finalizers".into(), finalizers);
                }
                (Some(finalizers), None) => new["spec"] = json!({"finalizers": finalizers}),
                (None, Some(spec)) => {
                    spec.remove("finalizers");
                }
                (None, None) => {}
            }
        }
        label_namespace_name(new);
        return Ok(None);
    }
    if kind.id == custom_resource_definitions() {
        let served = served_kind(kind, new)?;
        let old_id = crd::kind_from_crd(old).map(|old_kind| old_kind.id).ok();
        if old_id.as_ref().is_some_and(|id| *id != served.id) {
            return Err(ApiError::invalid(
                &kind.id.group,
                &kind.kind,
                meta::name(new),
                vec![crate::status::Cause::invalid(
                    "spec.group",
                    &Value::from(served.id.group.clone()),
                    "field is immutable",
                )],
            ));
        }
        let mut status = established_status(new, &served, now);
        // Keep the original transition times: the CRD was established when it was created.
        if let Some(conditions) = old.get("status").and_then(|s| s.get("conditions")) {
            status["conditions"] = conditions.clone();
        }
        new["status"] = status;
        return Ok(Some(served));
    }
    Ok(None)
}

fn served_kind(kind: &ResourceKind, crd_object: &Value) -> Result<ResourceKind, ApiError> {
    crd::kind_from_crd(crd_object).map_err(|causes| {
        ApiError::invalid(&kind.id.group, &kind.kind, meta::name(crd_object), causes)
    })
}
