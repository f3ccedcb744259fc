//! Schemas for the few fields whose content Arbor does not constrain.
//!
//! Kubernetes requires CRD schemas to be structural: every node names its type. A field that
//! carries an arbitrary Kubernetes object (the declared object of a GitTrackObject, the
//! manifests of an Application) is typed as an object that keeps unknown fields, instead of the
//! untyped "anything" schema that schemars produces for `serde_json::Value`.

use schemars::{Schema, SchemaGenerator, json_schema};

/// The key that tells the API server to keep fields the schema does not list.
pub const PRESERVE_UNKNOWN_FIELDS: &str = "x-kubernetes-preserve-unknown-fields";

/// One arbitrary Kubernetes object.
pub fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of arbitrary Kubernetes objects.
pub fn list_of_any_objects(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}
