//! The default observer schema, and the schema an application is actually observed with.
//!
//! By default every field the manifest sets is observed, and every list must keep exactly
//! the length the manifest gives it (a length of 0 leaves the list unbounded, since 0 is how
//! a schema writes "unlimited"). A custom schema replaces the default for the resources it
//! names; the others keep their default.

use serde_json::Value;

use super::error::{Origin, SchemaError, SchemaErrorReason, SchemaErrors};
use super::identity::ResourceId;
use super::parse::parse_custom_schema;
use super::path::FieldPath;
use super::schema::{ListBounds, ObserverSchema, ResourceSchema, SchemaNode};
use crate::object::MissingField;

/// The default schema of one manifest resource: every field it sets, leaves observed
/// whole, each list bounded to its current length.
pub fn default_schema(resource: &Value) -> Result<ResourceSchema, MissingField> {
    Ok(ResourceSchema {
        id: ResourceId::of(resource)?,
        root: node_of(resource),
    })
}

fn node_of(value: &Value) -> SchemaNode {
    match value {
        Value::Object(fields) => SchemaNode::Map(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), node_of(value)))
                .collect(),
        ),
        Value::Array(items) => SchemaNode::List {
            elements: items.iter().map(node_of).collect(),
            bounds: ListBounds::exactly(items.len()),
        },
        _ => SchemaNode::Leaf,
    }
}

impl ObserverSchema {
    /// The schema `manifest` is observed with: `custom` (validated against the manifest)
    /// for the resources it names, the default schema for every other manifest resource.
    /// Resources are in manifest order.
    pub fn for_application(manifest: &[Value], custom: &[Value]) -> Result<Self, SchemaErrors> {
        let mut errors = Vec::new();
        let mut defaults = Vec::new();
        for (index, resource) in manifest.iter().enumerate() {
            match default_schema(resource) {
                Ok(schema) => defaults.push(schema),
                Err(MissingField(field)) => errors.push(SchemaError {
                    origin: Origin::Manifest,
                    index,
                    resource: ResourceLabel(resource).to_string(),
                    path: FieldPath::root(),
                    reason: SchemaErrorReason::MissingIdentity { field },
                }),
            }
        }
        let custom = match parse_custom_schema(custom, manifest) {
            Ok(custom) => custom,
            Err(SchemaErrors(custom_errors)) => {
                errors.extend(custom_errors);
                Vec::new()
            }
        };
        if !errors.is_empty() {
            return Err(SchemaErrors(errors));
        }
        let resources = defaults
            .into_iter()
            .map(|default| {
                custom
                    .iter()
                    .find(|schema| schema.id == default.id)
                    .cloned()
                    .unwrap_or(default)
            })
            .collect();
        Ok(Self { resources })
    }
}

/// `apiVersion kind name` of a resource that may lack some of them.
pub(super) struct ResourceLabel<'a>(pub &'a Value);

impl std::fmt::Display for ResourceLabel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = |path: &[&str]| crate::object::str_at(self.0, path).unwrap_or("?");
        write!(
            f,
            "{} {} {}",
            part(&["apiVersion"]),
            part(&["kind"]),
            part(&["metadata", "name"])
        )
    }
}
