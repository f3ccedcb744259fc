//! Accessors for the `metadata` of objects held as `serde_json::Value`.
//!
//! The emulator stores every object, built-in or custom, as plain JSON, the way an unstructured
//! client sees it; these helpers keep the field names in one place.

use serde_json::{Map, Value};

/// The `metadata` map of `object`, created when absent so writers can fill it in.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let root = object.as_object_mut().expect("made an object above");
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata.as_object_mut().expect("made an object above")
}

/// A string field of `metadata`, `None` when absent or not a string.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

pub fn name(object: &Value) -> &str {
    meta_str(object, "name").unwrap_or_default()
}

pub fn namespace(object: &Value) -> &str {
    meta_str(object, "namespace").unwrap_or_default()
}

pub fn uid(object: &Value) -> &str {
    meta_str(object, "uid").unwrap_or_default()
}

pub fn resource_version(object: &Value) -> &str {
    meta_str(object, "resourceVersion").unwrap_or_default()
}

pub fn is_deleting(object: &Value) -> bool {
    meta_str(object, "deletionTimestamp").is_some()
}

/// `metadata.finalizers` as strings (non-strings are ignored).
pub fn finalizers(object: &Value) -> Vec<String> {
    string_list(object.get("metadata").and_then(|m| m.get("finalizers")))
}

pub fn set_finalizers(object: &mut Value, finalizers: &[String]) {
    let metadata = metadata_mut(object);
    if finalizers.is_empty() {
        metadata.remove("finalizers");
    } else {
        metadata.insert("finalizers".into(), Value::from(finalizers.to_vec()));
    }
}

/// The strings of a JSON array, ignoring other values.
pub fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.labels` as pairs; missing labels are an empty map.
pub fn labels(object: &Value) -> Map<String, Value> {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub uid: String,
    pub block_owner_deletion: bool,
}

pub fn owner_refs(object: &Value) -> Vec<OwnerRef> {
    object
        .get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|owner| {
                    Some(OwnerRef {
                        uid: owner.get("uid")?.as_str()?.to_owned(),
                        block_owner_deletion: owner
                            .get("blockOwnerDeletion")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Drops the owner references that point at `owner_uid`; returns whether any was dropped.
pub fn remove_owner_ref(object: &mut Value, owner_uid: &str) -> bool {
    let metadata = metadata_mut(object);
    let Some(refs) = metadata
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = refs.len();
    refs.retain(|owner| owner.get("uid").and_then(Value::as_str) != Some(owner_uid));
    let removed = refs.len() != before;
    if refs.is_empty() {
        metadata.remove("ownerReferences");
    }
    removed
}

/// The current time as kube-apiserver writes timestamps: RFC 3339, whole seconds, UTC.
pub fn now_timestamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Follows a dotted path (`spec.replicas`, `status.phase`) through nested maps.
pub fn lookup_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|segment| !segment.is_empty())
        .try_fold(object, |value, segment| value.get(segment))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removing_an_owner_ref_keeps_the_others_and_drops_an_empty_list() {
        let mut object = json!({"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
        assert!(remove_owner_ref(&mut object, "a"));
        assert_eq!(owner_refs(&object).len(), 1);
        assert!(remove_owner_ref(&mut object, "b"));
        assert!(object["metadata"].get("ownerReferences").is_none());
        assert!(!remove_owner_ref(&mut object, "b"));
    }

    #[test]
    fn lookup_path_follows_nested_fields() {
        let object = json!({"spec": {"replicas": 3}});
        assert_eq!(lookup_path(&object, "spec.replicas"), Some(&json!(3)));
        assert_eq!(lookup_path(&object, "spec.missing"), None);
    }
}
