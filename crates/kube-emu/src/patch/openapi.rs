//! Reading list semantics out of a CRD's structural OpenAPI v3 schema.
//!
//! The vendor extensions kube-apiserver honours are `x-kubernetes-list-type`
//! (`atomic`, `set`, `map`), `x-kubernetes-list-map-keys` and `x-kubernetes-map-type`
//! (`atomic`, `granular`). A list without them is atomic. Custom resources have no strategic merge
//! patch, so the strategy is left at "replace".

use serde_json::Value;

use super::schema::{ListType, Schema};

/// Converts one schema node (recursively). Accepts the root `openAPIV3Schema`, or a CRD version
/// object that carries it under `schema.openAPIV3Schema`.
pub fn read_schema(schema: &Value) -> Schema {
    if let Some(inner) = schema.pointer("/schema/openAPIV3Schema") {
        return read_schema(inner);
    }
    if let Some(inner) = schema.get("openAPIV3Schema") {
        return read_schema(inner);
    }
    read_node(schema)
}

fn read_node(node: &Value) -> Schema {
    let mut out = Schema {
        default: node.get("default").cloned(),
        atomic_map: node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
        ..Schema::default()
    };
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        out.fields = properties
            .iter()
            .map(|(name, property)| (name.clone(), read_node(property)))
            .collect();
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        out.values = Some(Box::new(read_node(values)));
    }
    if let Some(items) = node.get("items").filter(|v| v.is_object()) {
        out.items = Some(Box::new(read_node(items)));
    }
    out.list = match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map(
            node.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| {
                    keys.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => ListType::Atomic,
    };
    // A map list without keys cannot identify elements; kube rejects such CRDs, treat it atomic.
    if out.list == ListType::Map(Vec::new()) {
        out.list = ListType::Atomic;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_types_and_map_keys_are_read_recursively() {
        let schema = read_schema(&json!({
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "rules": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["host", "port"],
                                "items": {"type": "object", "properties": {
                                    "port": {"type": "integer", "default": 443},
                                    "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                             "items": {"type": "string"}}
                                }}
                            },
                            "args": {"type": "array", "items": {"type": "string"}},
                            "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
                            "extra": {"type": "object",
                                      "additionalProperties": {"type": "array",
                                          "x-kubernetes-list-type": "set"}}
                        }
                    }
                }
            }
        }));
        let spec = schema.field("spec");
        let rules = spec.field("rules");
        assert_eq!(
            rules.list,
            ListType::Map(vec!["host".into(), "port".into()])
        );
        assert_eq!(rules.item().field("port").default, Some(json!(443)));
        assert_eq!(rules.item().field("tags").list, ListType::Set);
        assert_eq!(spec.field("args").list, ListType::Atomic);
        assert!(spec.field("selector").atomic_map);
        assert_eq!(spec.field("extra").field("anything").list, ListType::Set);
    }
}
