//! Checking a rendered object against its Kubernetes type, unknown fields included.
//!
//! k8s-openapi's types ignore fields they do not know, so a misspelt or misplaced field would
//! deserialise silently. The check therefore deserialises the object into its type,
//! serialises it back and compares that with the original: a field that vanished is one the
//! type does not have. Nulls, empty maps and empty lists are removed from both sides first,
//! because the types leave those out.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::manifest::Manifest;

/// Kinds of other projects' APIs the chart renders; k8s-openapi has no type for them, so
/// they are checked as generic objects (apiVersion, kind, metadata.name, spec).
pub const GENERIC_KINDS: [(&str, &str); 3] = [
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
];

/// Checks one object: Ok, or the problem with the object and the JSON path named.
pub fn check(manifest: &Manifest) -> Result<(), String> {
    let result = match (manifest.api_version(), manifest.kind()) {
        ("apps/v1", "Deployment") => round_trip::<Deployment>(&manifest.object),
        ("v1", "Service") => round_trip::<Service>(&manifest.object),
        ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(&manifest.object),
        ("v1", "ConfigMap") => round_trip::<ConfigMap>(&manifest.object),
        ("v1", "Secret") => round_trip::<Secret>(&manifest.object),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            round_trip::<ClusterRole>(&manifest.object)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<ClusterRoleBinding>(&manifest.object)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<Role>(&manifest.object),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            round_trip::<RoleBinding>(&manifest.object)
        }
        ("policy/v1", "PodDisruptionBudget") => round_trip::<PodDisruptionBudget>(&manifest.object),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            round_trip::<ValidatingWebhookConfiguration>(&manifest.object)
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => round_trip::<NetworkPolicy>(&manifest.object),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            round_trip::<CustomResourceDefinition>(&manifest.object)
        }
        (api_version, kind) if GENERIC_KINDS.contains(&(api_version, kind)) => {
            check_generic(&manifest.object)
        }
        (api_version, kind) => Err(format!(
            "no known type for apiVersion {api_version:?} kind {kind:?}"
        )),
    };
    result.map_err(|problem| format!("{}: {problem}", manifest.describe()))
}

fn round_trip<T: DeserializeOwned + Serialize>(object: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(object.clone())
        .map_err(|error| format!("does not deserialise: {error}"))?;
    let back =
        serde_json::to_value(&typed).map_err(|error| format!("does not serialise: {error}"))?;
    match first_difference(&prune(object), &prune(&back), "") {
        None => Ok(()),
        Some(difference) => Err(difference),
    }
}

fn check_generic(object: &Value) -> Result<(), String> {
    for pointer in ["/apiVersion", "/kind", "/metadata/name"] {
        if object
            .pointer(pointer)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(format!("{pointer} is missing"));
        }
    }
    if !object.get("spec").is_some_and(Value::is_object) {
        return Err("spec is missing or not a map".to_owned());
    }
    Ok(())
}

/// The object without nulls, empty maps and empty lists (recursively; list items keep their
/// positions, an emptied item becomes null).
pub fn prune(value: &Value) -> Value {
    prune_inner(value).unwrap_or(Value::Null)
}

fn prune_inner(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Object(map) => {
            let pruned: serde_json::Map<String, Value> = map
                .iter()
                .filter_map(|(key, child)| prune_inner(child).map(|child| (key.clone(), child)))
                .collect();
            (!pruned.is_empty()).then_some(Value::Object(pruned))
        }
        Value::Array(items) if items.is_empty() => None,
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .map(|item| prune_inner(item).unwrap_or(Value::Null))
                .collect(),
        )),
        scalar => Some(scalar.clone()),
    }
}

/// The first place where `original` and its round trip differ, as a message naming the path.
pub fn first_difference(original: &Value, round_trip: &Value, path: &str) -> Option<String> {
    match (original, round_trip) {
        (Value::Object(original), Value::Object(back)) => {
            original.iter().find_map(|(key, child)| {
                let child_path = format!("{path}.{key}");
                match back.get(key) {
                    None => Some(format!("unknown field {child_path}")),
                    Some(back_child) => first_difference(child, back_child, &child_path),
                }
            })
        }
        (Value::Array(original), Value::Array(back)) if original.len() == back.len() => original
            .iter()
            .zip(back)
            .enumerate()
            .find_map(|(index, (child, back_child))| {
                first_difference(child, back_child, &format!("{path}[{index}]"))
            }),
        (Value::Number(original), Value::Number(back)) if original.as_f64() == back.as_f64() => {
            None
        }
        (original, back) if original == back => None,
        (original, back) => Some(format!(
            "{} changes in a round trip through its type: {original} became {back}",
            if path.is_empty() { "." } else { path }
        )),
    }
}
