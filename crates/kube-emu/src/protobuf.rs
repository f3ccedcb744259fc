//! Request bodies in Kubernetes' protobuf encoding, for the kinds `kubectl create configmap |
//! secret | namespace | serviceaccount | role | clusterrole | rolebinding | clusterrolebinding`
//! and `kubectl auth can-i` send that way (client-go's typed clients prefer
//! protobuf and do not fall back to JSON). The envelope is the magic `k8s\0` followed by a
//! `runtime.Unknown` whose `raw` field holds the object; the object is decoded to the same JSON
//! a JSON client would have sent, using the field numbers of the upstream `.proto` files.
//! Other kinds are refused with 415 and must be sent as JSON (kubectl create -f / apply do).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

/// The prefix of every protobuf-encoded Kubernetes object.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Clone, Copy)]
enum FieldType {
    Text,
    /// `bytes`, rendered base64 like JSON does.
    Binary,
    Integer,
    Boolean,
    Message(&'static [Field]),
    TextMap,
    BinaryMap,
    /// `metav1.Time`: seconds and nanos, rendered RFC 3339.
    Time,
}

#[derive(Debug, Clone, Copy)]
struct Field {
    number: u64,
    name: &'static str,
    field_type: FieldType,
    repeated: bool,
}

const fn field(number: u64, name: &'static str, field_type: FieldType) -> Field {
    Field {
        number,
        name,
        field_type,
        repeated: false,
    }
}

const fn repeated(number: u64, name: &'static str, field_type: FieldType) -> Field {
    Field {
        number,
        name,
        field_type,
        repeated: true,
    }
}

const OWNER_REFERENCE: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "uid", FieldType::Text),
    field(5, "apiVersion", FieldType::Text),
    field(6, "controller", FieldType::Boolean),
    field(7, "blockOwnerDeletion", FieldType::Boolean),
];

const OBJECT_META: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "generateName", FieldType::Text),
    field(3, "namespace", FieldType::Text),
    field(5, "uid", FieldType::Text),
    field(6, "resourceVersion", FieldType::Text),
    field(7, "generation", FieldType::Integer),
    field(8, "creationTimestamp", FieldType::Time),
    field(11, "labels", FieldType::TextMap),
    field(12, "annotations", FieldType::TextMap),
    repeated(13, "ownerReferences", FieldType::Message(OWNER_REFERENCE)),
    repeated(14, "finalizers", FieldType::Text),
];

const OBJECT_REFERENCE: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(2, "namespace", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "uid", FieldType::Text),
    field(5, "apiVersion", FieldType::Text),
    field(6, "resourceVersion", FieldType::Text),
    field(7, "fieldPath", FieldType::Text),
];

const LOCAL_OBJECT_REFERENCE: &[Field] = &[field(1, "name", FieldType::Text)];

const CONFIG_MAP: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "data", FieldType::TextMap),
    field(3, "binaryData", FieldType::BinaryMap),
    field(4, "immutable", FieldType::Boolean),
];

const SECRET: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "data", FieldType::BinaryMap),
    field(3, "type", FieldType::Text),
    field(4, "stringData", FieldType::TextMap),
    field(5, "immutable", FieldType::Boolean),
];

const NAMESPACE_SPEC: &[Field] = &[repeated(1, "finalizers", FieldType::Text)];

const NAMESPACE: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(NAMESPACE_SPEC)),
];

const SERVICE_ACCOUNT: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    repeated(2, "secrets", FieldType::Message(OBJECT_REFERENCE)),
    repeated(
        3,
        "imagePullSecrets",
        FieldType::Message(LOCAL_OBJECT_REFERENCE),
    ),
    field(4, "automountServiceAccountToken", FieldType::Boolean),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    field(1, "namespace", FieldType::Text),
    field(2, "verb", FieldType::Text),
    field(3, "group", FieldType::Text),
    field(4, "version", FieldType::Text),
    field(5, "resource", FieldType::Text),
    field(6, "subresource", FieldType::Text),
    field(7, "name", FieldType::Text),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[
    field(1, "path", FieldType::Text),
    field(2, "verb", FieldType::Text),
];

const SELF_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    field(
        1,
        "resourceAttributes",
        FieldType::Message(RESOURCE_ATTRIBUTES),
    ),
    field(
        2,
        "nonResourceAttributes",
        FieldType::Message(NON_RESOURCE_ATTRIBUTES),
    ),
];

const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(
        2,
        "spec",
        FieldType::Message(SELF_SUBJECT_ACCESS_REVIEW_SPEC),
    ),
];

const SELF_SUBJECT_RULES_REVIEW_SPEC: &[Field] = &[field(1, "namespace", FieldType::Text)];

/// What `kubectl auth can-i --list` sends.
const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(
        2,
        "spec",
        FieldType::Message(SELF_SUBJECT_RULES_REVIEW_SPEC),
    ),
];

const POLICY_RULE: &[Field] = &[
    repeated(1, "verbs", FieldType::Text),
    repeated(2, "apiGroups", FieldType::Text),
    repeated(3, "resources", FieldType::Text),
    repeated(4, "resourceNames", FieldType::Text),
    repeated(5, "nonResourceURLs", FieldType::Text),
];

const LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    field(1, "key", FieldType::Text),
    field(2, "operator", FieldType::Text),
    repeated(3, "values", FieldType::Text),
];

const LABEL_SELECTOR: &[Field] = &[
    field(1, "matchLabels", FieldType::TextMap),
    repeated(
        2,
        "matchExpressions",
        FieldType::Message(LABEL_SELECTOR_REQUIREMENT),
    ),
];

const AGGREGATION_RULE: &[Field] = &[repeated(
    1,
    "clusterRoleSelectors",
    FieldType::Message(LABEL_SELECTOR),
)];

/// Role, and ClusterRole (which adds its aggregation rule).
const ROLE: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    repeated(2, "rules", FieldType::Message(POLICY_RULE)),
    field(3, "aggregationRule", FieldType::Message(AGGREGATION_RULE)),
];

const SUBJECT: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(2, "apiGroup", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "namespace", FieldType::Text),
];

const ROLE_REF: &[Field] = &[
    field(1, "apiGroup", FieldType::Text),
    field(2, "kind", FieldType::Text),
    field(3, "name", FieldType::Text),
];

/// RoleBinding and ClusterRoleBinding.
const ROLE_BINDING: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    repeated(2, "subjects", FieldType::Message(SUBJECT)),
    field(3, "roleRef", FieldType::Message(ROLE_REF)),
];

const TYPE_META: &[Field] = &[
    field(1, "apiVersion", FieldType::Text),
    field(2, "kind", FieldType::Text),
];

const UNKNOWN: &[Field] = &[
    field(1, "typeMeta", FieldType::Message(TYPE_META)),
    field(2, "raw", FieldType::Binary),
];

fn schema_for(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    match (api_version, kind) {
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "Secret") => Some(SECRET),
        ("v1", "Namespace") => Some(NAMESPACE),
        ("v1", "ServiceAccount") => Some(SERVICE_ACCOUNT),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Some(SELF_SUBJECT_ACCESS_REVIEW),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => Some(SELF_SUBJECT_RULES_REVIEW),
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => Some(ROLE),
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => {
            Some(ROLE_BINDING)
        }
        _ => None,
    }
}

/// Reads the protobuf wire format.
struct Reader<'a> {
    bytes: &'a [u8],
}

/// A field value as it appears on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.bytes.split_first().ok_or("truncated varint")?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], String> {
        if length > self.bytes.len() {
            return Err("truncated field".into());
        }
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(taken)
    }

    /// The next (field number, value), skipping fixed-width fields nobody here needs.
    fn next_field(&mut self) -> Result<Option<(u64, Wire<'a>)>, String> {
        while !self.bytes.is_empty() {
            let key = self.varint()?;
            let number = key >> 3;
            match key & 7 {
                0 => return Ok(Some((number, Wire::Varint(self.varint()?)))),
                2 => {
                    let length = usize::try_from(self.varint()?).map_err(|_| "field too long")?;
                    return Ok(Some((number, Wire::Bytes(self.take(length)?))));
                }
                1 => {
                    self.take(8)?;
                }
                5 => {
                    self.take(4)?;
                }
                other => return Err(format!("unsupported wire type {other}")),
            }
        }
        Ok(None)
    }
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string field is not UTF-8".to_owned())
}

/// A map entry: key (1) and value (2).
fn map_entry(bytes: &[u8], binary_values: bool) -> Result<(String, Value), String> {
    let mut reader = Reader { bytes };
    let (mut key, mut value) = (String::new(), Value::from(""));
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire) {
            (1, Wire::Bytes(bytes)) => key = text(bytes)?,
            (2, Wire::Bytes(bytes)) if binary_values => value = Value::from(STANDARD.encode(bytes)),
            (2, Wire::Bytes(bytes)) => value = Value::from(text(bytes)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn time(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader { bytes };
    let mut seconds = 0i64;
    while let Some((number, wire)) = reader.next_field()? {
        if let (1, Wire::Varint(value)) = (number, wire) {
            seconds = value as i64;
        }
    }
    if seconds == 0 {
        return Ok(Value::Null);
    }
    Ok(chrono::DateTime::from_timestamp(seconds, 0)
        .map(|time| Value::from(time.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .unwrap_or(Value::Null))
}

fn message(bytes: &[u8], fields: &[Field]) -> Result<Map<String, Value>, String> {
    let mut reader = Reader { bytes };
    let mut object = Map::new();
    while let Some((number, wire)) = reader.next_field()? {
        let Some(field) = fields.iter().find(|field| field.number == number) else {
            continue;
        };
        let value = match (field.field_type, wire) {
            (FieldType::Text, Wire::Bytes(bytes)) => Value::from(text(bytes)?),
            (FieldType::Binary, Wire::Bytes(bytes)) => Value::from(STANDARD.encode(bytes)),
            (FieldType::Integer, Wire::Varint(value)) => Value::from(value as i64),
            (FieldType::Boolean, Wire::Varint(value)) => Value::from(value != 0),
            (FieldType::Message(inner), Wire::Bytes(bytes)) => {
                Value::Object(message(bytes, inner)?)
            }
            (FieldType::Time, Wire::Bytes(bytes)) => time(bytes)?,
            (map_type @ (FieldType::TextMap | FieldType::BinaryMap), Wire::Bytes(bytes)) => {
                let (key, value) = map_entry(bytes, matches!(map_type, FieldType::BinaryMap))?;
                let entries = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(entries) = entries.as_object_mut() {
                    entries.insert(key, value);
                }
                continue;
            }
            _ => return Err(format!("field {} has an unexpected wire type", field.name)),
        };
        // gogo-protobuf writes every non-pointer field; Go's JSON leaves zero values out.
        let zero = value.is_null() || value == "" || value == 0;
        if zero && !field.repeated {
            continue;
        }
        if field.repeated {
            let items = object
                .entry(field.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(items) = items.as_array_mut() {
                items.push(value);
            }
        } else {
            object.insert(field.name.to_owned(), value);
        }
    }
    Ok(object)
}

/// Decodes a protobuf-encoded object into its JSON form; the error says why it cannot be.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the Kubernetes protobuf prefix")?;
    let unknown = message(envelope, UNKNOWN)?;
    let type_meta = unknown.get("typeMeta").cloned().unwrap_or_default();
    let api_version = type_meta
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = type_meta
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let schema = schema_for(api_version, kind)
        .ok_or_else(|| format!("protobuf bodies are understood for v1 ConfigMap, Secret, Namespace, ServiceAccount, RBAC roles and bindings, SelfSubjectAccessReview and SelfSubjectRulesReview only, not {api_version} {kind}; send JSON"))?;
    let raw = unknown
        .get("raw")
        .and_then(Value::as_str)
        .map(|raw| STANDARD.decode(raw))
        .transpose()
        .map_err(|_| "the raw object is not valid")?
        .unwrap_or_default();
    let mut object = message(&raw, schema)?;
    object.insert("apiVersion".into(), Value::from(api_version));
    object.insert("kind".into(), Value::from(kind));
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn length_delimited(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![((number << 3) | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    fn map_entry_bytes(key: &str, value: &[u8]) -> Vec<u8> {
        [
            length_delimited(1, key.as_bytes()),
            length_delimited(2, value),
        ]
        .concat()
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            length_delimited(1, api_version.as_bytes()),
            length_delimited(2, kind.as_bytes()),
        ]
        .concat();
        let unknown = [length_delimited(1, &type_meta), length_delimited(2, raw)].concat();
        [MAGIC, &unknown].concat()
    }

    #[test]
    fn a_config_map_decodes_to_its_json_form() {
        let metadata = [
            length_delimited(1, b"demo"),
            length_delimited(2, b""),
            length_delimited(11, &map_entry_bytes("app", b"web")),
        ]
        .concat();
        let raw = [
            length_delimited(1, &metadata),
            length_delimited(2, &map_entry_bytes("a", b"1")),
            length_delimited(2, &map_entry_bytes("b", b"2")),
        ]
        .concat();
        let decoded = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
        assert_eq!(
            decoded,
            json!({"metadata": {"name": "demo", "labels": {"app": "web"}}, "data": {"a": "1", "b": "2"}, "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn secret_data_is_base64_like_json() {
        let raw = [
            length_delimited(1, &length_delimited(1, b"s")),
            length_delimited(2, &map_entry_bytes("k", b"\x00\x01")),
            length_delimited(3, b"Opaque"),
        ]
        .concat();
        let decoded = decode(&envelope("v1", "Secret", &raw)).expect("decodes");
        assert_eq!(decoded["data"]["k"], "AAE=");
        assert_eq!(decoded["type"], "Opaque");
    }

    #[test]
    fn other_kinds_and_garbage_are_refused() {
        assert!(
            decode(&envelope("apps/v1", "Deployment", &[]))
                .unwrap_err()
                .contains("send JSON")
        );
        assert!(decode(b"{}").is_err());
    }
}
