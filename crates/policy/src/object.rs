//! Reading the identity and metadata of Kubernetes objects held as JSON.
//!
//! The policy engine works on `serde_json::Value` objects so that it can judge any kind,
//! including custom resources it has never seen, without a typed client. These helpers are the
//! one place that knows where `apiVersion`, `kind` and `metadata` live.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::interned::Interned;

/// An API group and kind, the unit that Syncs declare and that ownership rules talk about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKind {
    /// Empty for the core group.
    pub group: Interned,
    pub kind: Interned,
}

impl GroupKind {
    pub fn new(group: impl Into<Interned>, kind: impl Into<Interned>) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
        }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// A group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupVersionKind {
    pub group: Interned,
    pub version: Interned,
    pub kind: Interned,
}

impl GroupVersionKind {
    /// Splits an `apiVersion` such as `apps/v1` or `v1` (the core group).
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn group_kind(&self) -> GroupKind {
        GroupKind {
            group: self.group.clone(),
            kind: self.kind.clone(),
        }
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, Kind={}", self.api_version(), self.kind)
    }
}

/// Identifies one object: group, kind, namespace (none when cluster-scoped) and name. Its
/// parts are [`Interned`]: a key is held many times over, and a copy costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub group_kind: GroupKind,
    pub namespace: Option<Interned>,
    pub name: Interned,
}

impl ObjectKey {
    /// Reads the key of `object`, or says which identifying field is missing.
    pub fn of(object: &Value) -> Result<Self, MissingField> {
        let gvk = gvk(object)?;
        Ok(Self {
            group_kind: gvk.group_kind(),
            namespace: namespace(object).map(Interned::new),
            name: Interned::new(name(object).ok_or(MissingField("metadata.name"))?),
        })
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.group_kind, ns, self.name),
            None => write!(f, "{}/{}", self.group_kind, self.name),
        }
    }
}

/// An identifying field that an object lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("object has no {0}")]
pub struct MissingField(pub &'static str);

/// The object's group, version and kind.
pub fn gvk(object: &Value) -> Result<GroupVersionKind, MissingField> {
    let api_version = str_at(object, &["apiVersion"]).ok_or(MissingField("apiVersion"))?;
    let kind = str_at(object, &["kind"]).ok_or(MissingField("kind"))?;
    Ok(GroupVersionKind::from_api_version(api_version, kind))
}

pub fn name(object: &Value) -> Option<&str> {
    str_at(object, &["metadata", "name"])
}

pub fn namespace(object: &Value) -> Option<&str> {
    str_at(object, &["metadata", "namespace"]).filter(|ns| !ns.is_empty())
}

/// The object's labels (empty when it has none).
pub fn labels(object: &Value) -> BTreeMap<String, String> {
    string_map(object, "labels")
}

/// The object's annotations (empty when it has none).
pub fn annotations(object: &Value) -> BTreeMap<String, String> {
    string_map(object, "annotations")
}

/// One label's value.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    str_at(object, &["metadata", "labels", key])
}

/// One annotation's value.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    str_at(object, &["metadata", "annotations", key])
}

/// The string at a path of object keys.
pub fn str_at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(object, |value, key| value.get(key))
        .and_then(Value::as_str)
}

fn string_map(object: &Value, field: &str) -> BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn core_group_api_version_has_no_group() {
        let gvk = GroupVersionKind::from_api_version("v1", "ConfigMap");
        assert_eq!(gvk.group, "");
        assert_eq!(gvk.api_version(), "v1");
        assert_eq!(gvk.group_kind().to_string(), "ConfigMap");
    }

    #[test]
    fn object_key_reads_identity() {
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "job-creator", "namespace": "shipping-dev"}});
        let key = ObjectKey::of(&role).unwrap();
        assert_eq!(
            key.to_string(),
            "Role.rbac.authorization.k8s.io/shipping-dev/job-creator"
        );
    }

    #[test]
    fn object_key_names_the_missing_field() {
        let nameless = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        assert_eq!(ObjectKey::of(&nameless), Err(MissingField("metadata.name")));
        assert_eq!(
            ObjectKey::of(&json!({"kind": "X"})),
            Err(MissingField("apiVersion"))
        );
    }

    #[test]
    fn labels_skip_non_string_values() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": 2}}});
        assert_eq!(labels(&obj).len(), 1);
        assert_eq!(label(&obj, "a"), Some("1"));
    }
}
