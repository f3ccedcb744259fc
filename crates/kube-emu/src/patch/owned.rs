//! The fields managers can own: everything but the object's identity and what the server sets.
//!
//! kube-apiserver never records ownership of `apiVersion`, `kind`, `metadata.name`,
//! `metadata.namespace`, nor of the server-maintained `metadata.uid`, `resourceVersion`,
//! `generation`, `creationTimestamp`, `selfLink` and `managedFields`.

use serde_json::Value;

use super::fieldset::FieldSet;
use super::path::PathElement;
use super::schema::Schema;
use super::typed::{Strictness, field_set};

const SERVER_METADATA: [&str; 7] = [
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "clusterName",
];

/// `object` without the server-maintained metadata.
pub fn without_server_metadata(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(metadata) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        for name in SERVER_METADATA {
            metadata.shift_remove(name);
        }
    }
    out
}

/// The ownable field set of `object` (already stripped of server metadata).
pub fn ownable_field_set(
    object: &Value,
    schema: &Schema,
    strictness: Strictness,
) -> Result<FieldSet, String> {
    let mut identity = FieldSet::new();
    for path in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
    ] {
        let path: Vec<PathElement> = path
            .iter()
            .map(|name| PathElement::Field((*name).to_owned()))
            .collect();
        identity.insert(&path);
    }
    Ok(field_set(object, schema, strictness)?.difference(&identity))
}
