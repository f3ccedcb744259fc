//! Where an Application's manifest objects land: only in the Application's own namespace.
//!
//! A namespaced object without `metadata.namespace` gets the Application's, one naming another
//! namespace is refused, and so is a cluster-scoped object (an Application must not reach
//! beyond its namespace). The namespace is filled in before the observer schema is built, so
//! that the identities of manifest, schema and live objects agree.

use serde_json::Value;

/// Why a manifest object cannot be applied; `field` is like
/// `spec.manifest[1].metadata.namespace`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ManifestProblem {
    pub field: String,
    pub message: String,
}

impl ManifestProblem {
    /// A problem with the whole object at `index` of the manifest.
    pub fn object(index: usize, message: impl Into<String>) -> Self {
        Self {
            field: format!("spec.manifest[{index}]"),
            message: message.into(),
        }
    }
}

/// The `apiVersion` and `kind` of the manifest object at `index`, which placing it needs (the
/// caller asks the cluster whether the kind is namespaced).
pub fn manifest_kind(index: usize, object: &Value) -> Result<(&str, &str), ManifestProblem> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    match (text("/apiVersion"), text("/kind")) {
        (Some(api_version), Some(kind)) => Ok((api_version, kind)),
        _ => Err(ManifestProblem::object(
            index,
            "apiVersion and kind are required",
        )),
    }
}

/// The manifest object at `index` as applied for an Application in `namespace`, or why it
/// cannot be; `namespaced` is whether the cluster serves its kind in namespaces.
pub fn place(
    index: usize,
    object: &Value,
    namespaced: bool,
    namespace: &str,
) -> Result<Value, ManifestProblem> {
    if !namespaced {
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("kind");
        return Err(ManifestProblem::object(
            index,
            format!(
                "{kind} is cluster-scoped; an Application only creates objects in its own namespace"
            ),
        ));
    }
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(own) if own != namespace => Err(ManifestProblem {
            field: format!("spec.manifest[{index}].metadata.namespace"),
            message: format!("namespace {own:?} is not the Application's namespace {namespace:?}"),
        }),
        _ => Ok(with_namespace(object, namespace)),
    }
}

/// `object` in `namespace`: what the controller applies for a namespaced manifest object.
pub fn with_namespace(object: &Value, namespace: &str) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("namespace".into(), namespace.into());
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configmap(namespace: Option<&str>) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "settings"}});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        object
    }

    #[test]
    fn objects_land_only_in_the_applications_namespace() {
        // (case, object, namespaced, the namespace it lands in or the refused field)
        let cases: Vec<(&str, Value, bool, Result<&str, &str>)> = vec![
            (
                "no namespace: the Application's",
                configmap(None),
                true,
                Ok("team-a"),
            ),
            (
                "its own namespace",
                configmap(Some("team-a")),
                true,
                Ok("team-a"),
            ),
            (
                "another namespace",
                configmap(Some("team-b")),
                true,
                Err("spec.manifest[2].metadata.namespace"),
            ),
            (
                "a cluster-scoped kind",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": "reader"}}),
                false,
                Err("spec.manifest[2]"),
            ),
        ];
        for (case, object, namespaced, expected) in cases {
            let placed = place(2, &object, namespaced, "team-a");
            match (placed, expected) {
                (Ok(placed), Ok(namespace)) => {
                    assert_eq!(placed["metadata"]["namespace"], json!(namespace), "{case}");
                    assert_eq!(placed["metadata"]["name"], json!("settings"), "{case}");
                }
                (Err(problem), Err(field)) => assert_eq!(problem.field, field, "{case}"),
                (placed, expected) => panic!("{case}: {placed:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn refusals_say_why() {
        let other = place(0, &configmap(Some("team-b")), true, "team-a").unwrap_err();
        assert_eq!(
            other.to_string(),
            "spec.manifest[0].metadata.namespace: namespace \"team-b\" is not the Application's \
             namespace \"team-a\""
        );
        let cluster = place(0, &json!({"kind": "ClusterRole"}), false, "team-a").unwrap_err();
        assert!(
            cluster.message.starts_with("ClusterRole is cluster-scoped"),
            "{cluster}"
        );
    }

    #[test]
    fn apiversion_and_kind_are_required() {
        assert_eq!(manifest_kind(0, &configmap(None)), Ok(("v1", "ConfigMap")));
        let problem = manifest_kind(3, &json!({"kind": "ConfigMap"})).unwrap_err();
        assert_eq!(problem.field, "spec.manifest[3]");
        assert_eq!(problem.message, "apiVersion and kind are required");
    }
}
