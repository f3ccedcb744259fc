//! The form in which a declared object is applied: what git declares, plus the marks Arbor
//! puts on everything it manages, minus what the server owns.

use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::GroupVersionKind;
use arbor_policy::sync::matches::SERVER_OWNED_METADATA;
use kube::core::DynamicObject;
use serde_json::{Map, Value};

/// What Arbor writes onto every object it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marks<'a> {
    pub label: &'a ManagementLabel,
    /// The source annotation's key and value (`arbor.dev/source: GitTrack/team/apps`).
    pub source: (&'a str, &'a str),
    /// The declared-in annotation's key and value (the repository file).
    pub declared_in: (&'a str, &'a str),
}

/// `declared` as Arbor applies it: in `namespace` when given (a GitTrack's objects without
/// `metadata.namespace` land in its namespace), with the management label and the annotations
/// of `marks`, and without server-owned metadata or `status` (a status is never applied with
/// the object, so comparing it would make the object look drifted forever).
pub fn applied_form(declared: Value, namespace: Option<&str>, marks: &Marks<'_>) -> Value {
    let mut object = declared;
    let Some(fields) = object.as_object_mut() else {
        return object;
    };
    fields.remove("status");
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return object;
    };
    for owned in SERVER_OWNED_METADATA {
        metadata.remove(*owned);
    }
    if let Some(namespace) = namespace {
        metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
    }
    insert_entry(metadata, "labels", &marks.label.key, &marks.label.value);
    insert_entry(metadata, "annotations", marks.source.0, marks.source.1);
    insert_entry(
        metadata,
        "annotations",
        marks.declared_in.0,
        marks.declared_in.1,
    );
    object
}

/// A live object as JSON, with the `apiVersion` and `kind` that list responses may leave out
/// (the comparison with the declaration reads them), and without its managedFields: the
/// comparison ignores them (they are server-owned metadata), while a round keeps every live
/// object of its kinds and managedFields are often as large as the rest of the object.
pub fn live_value(
    gvk: &GroupVersionKind,
    object: &DynamicObject,
) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(object)?;
    if let Some(fields) = value.as_object_mut() {
        fields.insert("apiVersion".into(), Value::String(gvk.api_version()));
        fields.insert("kind".into(), Value::String(gvk.kind.to_string()));
        if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
            metadata.remove("managedFields");
        }
    }
    Ok(value)
}

fn insert_entry(metadata: &mut Map<String, Value>, map: &str, key: &str, value: &str) {
    let entries = metadata
        .entry(map)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entries.is_object() {
        *entries = Value::Object(Map::new());
    }
    if let Some(entries) = entries.as_object_mut() {
        entries.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_value_names_its_kind_and_drops_managed_fields() {
        let object: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "team", "resourceVersion": "7",
                "managedFields": [{"manager": "arbor-gitsync", "operation": "Apply"}]},
            "data": {"k": "v"},
        }))
        .unwrap();
        let gvk = GroupVersionKind::from_api_version("v1", "ConfigMap");
        assert_eq!(
            live_value(&gvk, &object).unwrap(),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "team", "resourceVersion": "7"},
                "data": {"k": "v"},
            })
        );
    }

    #[test]
    fn applied_form_marks_the_object_and_drops_server_fields() {
        let label = ManagementLabel::arbor();
        let marks = Marks {
            label: &label,
            source: ("arbor.dev/source", "GitTrack/team/apps"),
            declared_in: ("arbor.dev/declared-in", "cm.yaml"),
        };
        let declared = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "7", "labels": {"app": "x"}},
            "data": {"k": "v"},
            "status": {"phase": "x"},
        });
        assert_eq!(
            applied_form(declared.clone(), Some("team"), &marks),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": "a", "namespace": "team",
                    "labels": {"app": "x", "arbor.dev/managed": "enabled"},
                    "annotations": {
                        "arbor.dev/source": "GitTrack/team/apps",
                        "arbor.dev/declared-in": "cm.yaml",
                    },
                },
                "data": {"k": "v"},
            })
        );
    }
}
