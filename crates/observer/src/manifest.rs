//! An Application's manifest as the controller applies it.
//!
//! An Application may only create objects in its own namespace: a namespaced object without
//! `metadata.namespace` gets the Application's, one naming another namespace is refused, and
//! so is a cluster-scoped object (an Application must not reach beyond its namespace). The
//! namespace is filled in before the observer schema is built, so that the identities of
//! manifest, schema and live objects agree.

use serde_json::Value;

use crate::resolve::Resolver;

/// Why a manifest object cannot be applied; `field` is like `spec.manifest[1].metadata.namespace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestProblem {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ManifestProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The manifest with namespaces filled in, or every problem found.
pub async fn normalize(
    resolver: &Resolver,
    namespace: &str,
    manifest: &[Value],
) -> Result<Vec<Value>, Vec<ManifestProblem>> {
    let mut problems = Vec::new();
    let mut objects = Vec::with_capacity(manifest.len());
    for (index, object) in manifest.iter().enumerate() {
        let field = |suffix: &str| format!("spec.manifest[{index}]{suffix}");
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let (Some(api_version), Some(kind)) = (text("/apiVersion"), text("/kind")) else {
            problems.push(ManifestProblem {
                field: field(""),
                message: "apiVersion and kind are required".into(),
            });
            continue;
        };
        let served = match resolver.served(api_version, kind).await {
            Ok(served) => served,
            Err(error) => {
                problems.push(ManifestProblem {
                    field: field(""),
                    message: error.to_string(),
                });
                continue;
            }
        };
        if !served.namespaced {
            problems.push(ManifestProblem {
                field: field(""),
                message: format!(
                    "{kind} is cluster-scoped; an Application only creates objects in its own namespace"
                ),
            });
            continue;
        }
        match text("/metadata/namespace") {
            Some(own) if own != namespace => problems.push(ManifestProblem {
                field: field(".metadata.namespace"),
                message: format!(
                    "namespace {own:?} is not the Application's namespace {namespace:?}"
                ),
            }),
            _ => objects.push(with_namespace(object, namespace)),
        }
    }
    if problems.is_empty() {
        Ok(objects)
    } else {
        Err(problems)
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
