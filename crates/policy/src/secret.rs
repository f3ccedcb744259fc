//! Secret payloads outside Secret protection (issue #23.4).
//!
//! A Secret's `data` and `stringData` are protected by Secret RBAC and by encryption at rest;
//! a copy anywhere else (a GitTrackObject, a status, an Event, a log line, a gRPC answer) is
//! outside both. So Arbor keeps a Secret's payload only where it must: in the parsed repository
//! content it applies from, in memory. Everything it writes or answers about a Secret is the
//! Secret [`without_payload`]; a tracking object carries a digest of the payload (computed by
//! the controller with its own key) to notice a change.
//!
//! | rule | test |
//! |---|---|
//! | a Secret's `data` and `stringData` are its payload | `the_payload_is_data_and_string_data` |
//! | only a core `v1` Secret has one | `other_kinds_keep_every_field` |
//! | the payload's canonical bytes do not depend on key order | `canonical_bytes_ignore_key_order` |

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The fields of a Secret that hold its payload.
pub const PAYLOAD_FIELDS: [&str; 2] = ["data", "stringData"];

/// Whether `object` is a core Secret.
pub fn is_secret(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// `object` without a Secret's payload; any other object as it is (borrowed: most objects are
/// not Secrets, and a round asks this of every object).
pub fn without_payload(object: &Value) -> Cow<'_, Value> {
    if !is_secret(object) {
        return Cow::Borrowed(object);
    }
    let mut out = object.clone();
    if let Some(fields) = out.as_object_mut() {
        for field in PAYLOAD_FIELDS {
            fields.remove(field);
        }
    }
    Cow::Owned(out)
}

/// The payload of a Secret as canonical bytes to digest (`None` for anything else): each
/// payload field with its keys sorted, as JSON, so the same payload always gives the same bytes.
pub fn canonical_payload(object: &Value) -> Option<Vec<u8>> {
    if !is_secret(object) {
        return None;
    }
    let mut payload = Map::new();
    for field in PAYLOAD_FIELDS {
        if let Some(value) = object.get(field) {
            payload.insert(field.to_owned(), sorted(value));
        }
    }
    serde_json::to_vec(&Value::Object(payload)).ok()
}

fn sorted(value: &Value) -> Value {
    match value.as_object() {
        Some(map) => {
            let ordered: BTreeMap<&String, &Value> = map.iter().collect();
            Value::Object(
                ordered
                    .into_iter()
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect(),
            )
        }
        None => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "shop"},
            "type": "Opaque",
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"user": "admin"},
        })
    }

    #[test]
    fn the_payload_is_data_and_string_data() {
        let declared = secret();
        let redacted = without_payload(&declared);
        assert!(matches!(redacted, Cow::Owned(_)));
        assert_eq!(
            *redacted,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"}, "type": "Opaque"})
        );
        let bytes = canonical_payload(&secret()).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.contains("aHVudGVyMg==") && text.contains("admin"),
            "{text}"
        );
    }

    #[test]
    fn other_kinds_keep_every_field() {
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
        assert!(matches!(without_payload(&configmap), Cow::Borrowed(_)));
        assert_eq!(*without_payload(&configmap), configmap);
        assert_eq!(canonical_payload(&configmap), None);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"k": "v"}});
        assert_eq!(*without_payload(&custom), custom);
    }

    #[test]
    fn canonical_bytes_ignore_key_order() {
        let a = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "MQ==", "b": "Mg=="}});
        let b = json!({"apiVersion": "v1", "kind": "Secret", "data": {"b": "Mg==", "a": "MQ=="}});
        assert_eq!(canonical_payload(&a), canonical_payload(&b));
        let c = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "MQ==", "b": "Mw=="}});
        assert_ne!(canonical_payload(&a), canonical_payload(&c));
    }
}
