//! SubNamespace: the custom resource whose existence in a root or sub-namespace makes a
//! sub-namespace of the same name.
//!
//! - A new SubNamespace creates its namespace, labelled `<domain>/parent=<the SubNamespace's
//!   namespace>`. A namespace of that name with another parent (or none) is a conflict; it is
//!   never taken over.
//! - A deleted SubNamespace deletes its namespace only when that namespace exists and its
//!   `<domain>/parent` is the SubNamespace's namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::keys::Keys;
use crate::object::{self, MissingField};

use super::config::{CREATED_BY_LABEL, PropagationRules};
use super::namespace::NamespaceState;

/// A SubNamespace: where it lives (the parent), its name (the sub-namespace's name) and the
/// labels and annotations its spec asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubNamespace {
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl SubNamespace {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            ..Self::default()
        }
    }

    /// Reads a SubNamespace object (`spec.labels`, `spec.annotations`).
    pub fn from_object(sub_namespace: &Value) -> Result<Self, MissingField> {
        let spec_map = |field: &str| -> BTreeMap<String, String> {
            sub_namespace
                .pointer(&format!("/spec/{field}"))
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Self {
            namespace: object::namespace(sub_namespace)
                .ok_or(MissingField("metadata.namespace"))?
                .to_owned(),
            name: object::name(sub_namespace)
                .ok_or(MissingField("metadata.name"))?
                .to_owned(),
            labels: spec_map("labels"),
            annotations: spec_map("annotations"),
        })
    }
}

/// Why a SubNamespace cannot be read: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SubNamespaceDecodeError {
    /// Like `spec.labels` or `spec.labels["team"]`.
    pub field: String,
    pub reason: String,
}

impl SubNamespace {
    /// Reads a SubNamespace strictly: `spec` is optional (Accurate's documented manifest has
    /// none), but when present it must be an object whose `labels` and `annotations`, when
    /// present, map strings to strings. The error names the first field that is not so.
    pub fn decode(sub_namespace: &Value) -> Result<Self, SubNamespaceDecodeError> {
        let error = |field: String, reason: &str| SubNamespaceDecodeError {
            field,
            reason: reason.to_owned(),
        };
        let mut decoded = Self::from_object(sub_namespace)
            .map_err(|missing| error(missing.0.to_owned(), "missing"))?;
        let spec = match sub_namespace.get("spec") {
            None | Some(Value::Null) => return Ok(decoded),
            Some(Value::Object(spec)) => spec,
            Some(_) => return Err(error("spec".into(), "must be an object")),
        };
        let read = |field: &str| -> Result<BTreeMap<String, String>, SubNamespaceDecodeError> {
            match spec.get(field) {
                None | Some(Value::Null) => Ok(BTreeMap::new()),
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(v) => Ok((k.clone(), v.clone())),
                        _ => Err(error(format!("spec.{field}[{k:?}]"), "must be a string")),
                    })
                    .collect(),
                Some(_) => Err(error(
                    format!("spec.{field}"),
                    "must be a map of strings to strings",
                )),
            }
        };
        decoded.labels = read("labels")?;
        decoded.annotations = read("annotations")?;
        Ok(decoded)
    }
}

/// What to do for a live SubNamespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubNamespaceAction {
    /// Create this namespace; labels and annotations follow on the namespace's own reconcile.
    CreateNamespace(NamespaceState),
    /// The namespace exists and is this SubNamespace's.
    Exists,
    /// A namespace of that name exists with another parent (or none): report a conflict.
    Conflict { existing_parent: Option<String> },
}

/// Decides the fate of the namespace of a live SubNamespace.
pub fn reconcile_sub_namespace(
    rules: &PropagationRules,
    sub_namespace: &SubNamespace,
    existing: Option<&NamespaceState>,
) -> SubNamespaceAction {
    let keys = &rules.keys;
    match existing {
        None => {
            let mut namespace = NamespaceState::new(&sub_namespace.name)
                .with_label(&keys.parent_label, &sub_namespace.namespace);
            if let Some(created_by) = &rules.created_by {
                namespace = namespace.with_label(CREATED_BY_LABEL, created_by);
            }
            SubNamespaceAction::CreateNamespace(namespace)
        }
        Some(ns) if ns.parent(keys) == Some(sub_namespace.namespace.as_str()) => {
            SubNamespaceAction::Exists
        }
        Some(ns) => SubNamespaceAction::Conflict {
            existing_parent: ns.parent(keys).map(str::to_owned),
        },
    }
}

/// What to do when a SubNamespace is being deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubNamespaceDeletion {
    /// Delete the sub-namespace.
    DeleteNamespace,
    /// There is no namespace of that name.
    NamespaceMissing,
    /// The namespace of that name is not a child of the SubNamespace's namespace: keep it.
    NotItsChild,
}

/// Decides whether deleting `sub_namespace` deletes the namespace `existing` of its name.
pub fn finalize_sub_namespace(
    keys: &Keys,
    sub_namespace: &SubNamespace,
    existing: Option<&NamespaceState>,
) -> SubNamespaceDeletion {
    match existing {
        None => SubNamespaceDeletion::NamespaceMissing,
        Some(ns) if ns.parent(keys) == Some(sub_namespace.namespace.as_str()) => {
            SubNamespaceDeletion::DeleteNamespace
        }
        Some(_) => SubNamespaceDeletion::NotItsChild,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sub_namespace_object_is_read_with_its_spec() {
        let sub = SubNamespace::from_object(&json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "SubNamespace",
            "metadata": {"name": "team-a", "namespace": "root"},
            "spec": {"labels": {"app": "shop"}, "annotations": {"note": "x"}}
        }))
        .unwrap();
        assert_eq!(sub.namespace, "root");
        assert_eq!(sub.name, "team-a");
        assert_eq!(sub.labels["app"], "shop");
        assert_eq!(sub.annotations["note"], "x");
        assert_eq!(
            SubNamespace::from_object(&json!({"metadata": {"name": "x"}})),
            Err(MissingField("metadata.namespace"))
        );
    }

    #[test]
    fn created_namespace_carries_created_by_when_configured() {
        let keys = Keys::default();
        let rules = PropagationRules::empty(&keys).with_created_by("arbor");
        let SubNamespaceAction::CreateNamespace(ns) =
            reconcile_sub_namespace(&rules, &SubNamespace::new("root", "a"), None)
        else {
            panic!("expected a namespace to create");
        };
        assert_eq!(ns.labels[CREATED_BY_LABEL], "arbor");
        assert_eq!(ns.parent(&keys), Some("root"));
    }

    #[test]
    fn decode_accepts_a_sub_namespace_without_spec() {
        let sub = SubNamespace::decode(&json!({"apiVersion": "accurate.cybozu.com/v2",
            "kind": "SubNamespace", "metadata": {"namespace": "root", "name": "a"}}))
        .unwrap();
        assert_eq!(sub, SubNamespace::new("root", "a"));
    }

    #[test]
    fn decode_names_the_wrong_typed_field() {
        let decode = |spec: Value| {
            SubNamespace::decode(
                &json!({"metadata": {"namespace": "r", "name": "a"}, "spec": spec}),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(decode(json!("x")), "spec: must be an object");
        assert_eq!(
            decode(json!({"labels": "team"})),
            "spec.labels: must be a map of strings to strings"
        );
        assert_eq!(
            decode(json!({"annotations": {"a": 1}})),
            "spec.annotations[\"a\"]: must be a string"
        );
    }
}
