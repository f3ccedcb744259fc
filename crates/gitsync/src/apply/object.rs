//! The form in which a declared object is applied: what git declares, plus the marks Arbor
//! puts on everything it manages, minus what the server owns.

use std::fmt;

use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::GroupVersionKind;
use arbor_policy::sync::matches::SERVER_OWNED_METADATA;
use kube::core::DynamicObject;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
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

/// A live object read on its own as JSON, with the `apiVersion` and `kind` (the comparison with
/// the declaration reads them), and without its managedFields: the comparison ignores them
/// (server-owned metadata), and they are often as large as the rest of the object. A round's
/// lists are read into the same form by [`Listed`].
pub fn live_value(
    gvk: &GroupVersionKind,
    object: &DynamicObject,
) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(object)?;
    if let Some(Value::Object(metadata)) = value.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    Ok(named(gvk, value))
}

/// `value` with the `apiVersion` and `kind` of `gvk`.
pub fn named(gvk: &GroupVersionKind, mut value: Value) -> Value {
    if let Some(fields) = value.as_object_mut() {
        fields.insert("apiVersion".into(), Value::String(gvk.api_version()));
        fields.insert("kind".into(), Value::String(gvk.kind.to_string()));
    }
    value
}

/// An item of a list response read straight into JSON without its managedFields (see
/// [`live_value`]): a round lists every object of its kinds, and neither the typed metadata of
/// a `DynamicObject` nor the managedFields that would be dropped are made for each.
#[derive(Debug, Clone)]
pub struct Listed(pub Value);

impl<'de> Deserialize<'de> for Listed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ListedVisitor).map(Listed)
    }
}

/// How a map's fields are read into JSON.
struct FieldsWithout {
    /// A field whose value is read past, not kept.
    skip: Option<&'static str>,
    /// Whether the `metadata` field is read without its managedFields.
    metadata: bool,
}

struct ListedVisitor;

impl<'de> Visitor<'de> for ListedVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        FieldsWithout {
            skip: None,
            metadata: true,
        }
        .read(map)
    }
}

impl FieldsWithout {
    fn read<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.skip == Some(key.as_str()) {
                map.next_value::<IgnoredAny>()?;
            } else if self.metadata && key == "metadata" {
                let metadata = map.next_value::<WithoutManagedFields>()?;
                fields.insert(key, metadata.0);
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        Ok(Value::Object(fields))
    }
}

/// An object's metadata without its managedFields.
struct WithoutManagedFields(Value);

impl<'de> Deserialize<'de> for WithoutManagedFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(MetadataVisitor)
            .map(WithoutManagedFields)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        FieldsWithout {
            skip: Some("managedFields"),
            metadata: false,
        }
        .read(map)
    }
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
    fn a_listed_item_is_read_without_its_managed_fields() {
        let item = json!({
            "metadata": {"name": "a", "namespace": "team", "resourceVersion": "7",
                "managedFields": [{"manager": "arbor-gitsync", "operation": "Apply",
                    "fieldsV1": {"f:data": {"f:k": {}}}}],
                "labels": {"managedFields": "a label keeps its name"}},
            "data": {"k": "v", "managedFields": "only metadata's is dropped"},
        });
        let Listed(value) = serde_json::from_value(item).unwrap();
        let gvk = GroupVersionKind::from_api_version("v1", "ConfigMap");
        assert_eq!(
            named(&gvk, value),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "team", "resourceVersion": "7",
                    "labels": {"managedFields": "a label keeps its name"}},
                "data": {"k": "v", "managedFields": "only metadata's is dropped"},
            })
        );
        // As a DynamicObject read and converted would be.
        let object: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": "a", "managedFields": [{"manager": "m"}]},
            "data": {"k": "v"},
        }))
        .unwrap();
        let Listed(listed) = serde_json::from_value(json!({
            "metadata": {"name": "a", "managedFields": [{"manager": "m"}]},
            "data": {"k": "v"},
        }))
        .unwrap();
        assert_eq!(live_value(&gvk, &object).unwrap(), named(&gvk, listed));
        assert!(serde_json::from_value::<Listed>(json!(["not", "an", "object"])).is_err());
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
