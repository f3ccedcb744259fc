//! What the layout rules receive: the already-parsed files of a source tree, and the identity
//! check every object passes before any layout rule looks at it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::SourceError;
use super::names;
use crate::code::ErrorCode;
use crate::object::{self, GroupVersionKind};

/// One file of the tree, parsed into its documents (empty documents already dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// Relative to the source root (the subPath), `/`-separated, such as
    /// `namespaces/online/quota.yaml`.
    pub path: String,
    pub documents: Vec<Value>,
}

impl SourceFile {
    pub fn new(path: impl Into<String>, documents: Vec<Value>) -> Self {
        Self {
            path: path.into(),
            documents,
        }
    }
}

/// Where a declared object comes from: its file and its 0-based document index in that file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Shared: every object of a file holds the same path.
    pub path: crate::interned::Interned,
    pub document: usize,
}

impl Location {
    /// The directory holding the file (`""` for the root).
    pub fn directory(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(dir, _)| dir)
    }
}

/// An object that has an `apiVersion`, a `kind` and a valid `metadata.name`.
#[derive(Debug, Clone)]
pub(crate) struct Identified<'a> {
    pub location: Location,
    pub gvk: GroupVersionKind,
    pub name: String,
    pub value: &'a Value,
}

impl Identified<'_> {
    /// `Kind.group/name`, the way errors name objects.
    pub fn display(&self) -> String {
        format!("{}/{}", self.gvk.group_kind(), self.name)
    }

    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.gvk.group == group && self.gvk.kind == kind
    }
}

/// Checks the identity of every document; returns the identified objects and the errors of
/// those that have none.
pub(crate) fn identify(files: &[SourceFile]) -> (Vec<Identified<'_>>, Vec<SourceError>) {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        for (document, value) in file.documents.iter().enumerate() {
            let location = Location {
                path: file.path.as_str().into(),
                document,
            };
            match identify_one(location, value) {
                Ok(identified) => objects.push(identified),
                Err(error) => errors.push(error),
            }
        }
    }
    (objects, errors)
}

fn identify_one(location: Location, value: &Value) -> Result<Identified<'_>, SourceError> {
    let missing = |what: &str| {
        SourceError::at_object(
            ErrorCode::MissingIdentity,
            &location,
            format!("document {}", location.document),
            what,
        )
    };
    if !value.is_object() {
        return Err(missing("the document is not a mapping (an object)"));
    }
    let gvk = object::gvk(value).map_err(|missing_field| missing(&missing_field.to_string()))?;
    if gvk.kind.is_empty() || gvk.version.is_empty() {
        return Err(missing("apiVersion and kind must not be empty"));
    }
    let name = object::name(value).ok_or_else(|| missing("object has no metadata.name"))?;
    let valid = names::name_for_kind(&gvk.group, &gvk.kind, name);
    let identified = Identified {
        gvk,
        name: name.to_owned(),
        value,
        location,
    };
    if let Err(reason) = valid {
        return Err(SourceError::at_object(
            ErrorCode::InvalidName,
            &identified.location,
            identified.display(),
            format!("invalid name {name:?}: {reason}"),
        ));
    }
    if let Some(namespace) = object::namespace(value)
        && let Err(reason) = names::namespace_name(namespace)
    {
        return Err(SourceError::at_object(
            ErrorCode::InvalidName,
            &identified.location,
            identified.display(),
            format!("invalid metadata.namespace {namespace:?}: {reason}"),
        ));
    }
    Ok(identified)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(files: &[SourceFile]) -> Vec<ErrorCode> {
        identify(files).1.iter().map(|e| e.code).collect()
    }

    #[test]
    fn object_without_api_version_kind_or_name_has_no_identity() {
        for doc in [
            json!({"kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            json!(["not", "a", "mapping"]),
            json!("scalar"),
        ] {
            let files = [SourceFile::new("a.yaml", vec![doc.clone()])];
            assert_eq!(codes(&files), [ErrorCode::MissingIdentity], "{doc}");
        }
    }

    #[test]
    fn invalid_object_or_namespace_names_are_refused() {
        for doc in [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a/b"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Upper"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "namespace": "bad_ns"}}),
        ] {
            let files = [SourceFile::new("a.yaml", vec![doc.clone()])];
            assert_eq!(codes(&files), [ErrorCode::InvalidName], "{doc}");
        }
    }

    #[test]
    fn identified_objects_keep_file_and_document_index() {
        let files = [SourceFile::new(
            "dir/a.yaml",
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": "system:b"}}),
            ],
        )];
        let (objects, errors) = identify(&files);
        assert!(errors.is_empty());
        assert_eq!(objects[1].location.document, 1);
        assert_eq!(objects[1].location.directory(), "dir");
        assert_eq!(
            objects[1].display(),
            "Role.rbac.authorization.k8s.io/system:b"
        );
    }
}
