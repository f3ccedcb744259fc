//! The last applied manifest: what the controller applied, completed by the API.
//!
//! It is the manifest, plus the observed fields the manifest leaves out, filled from the
//! API's response to the apply (for example a `sessionAffinity` the API server defaulted).
//! What the user wrote always wins: a field the manifest sets is never replaced. Without
//! this, an observed field the user did not set would always be "missing in applied" and
//! the application would be re-applied forever.

use serde_json::{Map, Value};

use super::identity::ResourceId;
use super::schema::{ObserverSchema, SchemaNode};

/// The last applied manifest of an application whose `manifest` was applied and answered
/// with `responses` (the objects the API returned, in any order). A manifest resource with
/// no response, or no schema entry, is kept as written.
pub fn last_applied_manifest(
    manifest: &[Value],
    schema: &ObserverSchema,
    responses: &[Value],
) -> Vec<Value> {
    manifest
        .iter()
        .map(|resource| {
            let mut applied = resource.clone();
            let Ok(id) = ResourceId::of(resource) else {
                return applied;
            };
            let response = responses
                .iter()
                .find(|response| ResourceId::of(response).is_ok_and(|other| other == id));
            if let (Some(resource_schema), Some(response)) = (schema.resource(&id), response) {
                fill_observed(&resource_schema.root, &mut applied, response);
            }
            applied
        })
        .collect()
}

/// Adds to `applied` the fields `node` observes that `applied` lacks and `response` has.
fn fill_observed(node: &SchemaNode, applied: &mut Value, response: &Value) {
    match (node, applied, response) {
        (SchemaNode::Map(fields), Value::Object(applied), Value::Object(response)) => {
            for (key, child) in fields {
                let Some(answered) = response.get(key) else {
                    continue;
                };
                match applied.get_mut(key) {
                    Some(written) => fill_observed(child, written, answered),
                    None => {
                        applied.insert(key.clone(), observed_part(child, answered));
                    }
                }
            }
        }
        (SchemaNode::List { elements, .. }, Value::Array(applied), Value::Array(response)) => {
            for (index, (child, answered)) in elements.iter().zip(response).enumerate() {
                match applied.get_mut(index) {
                    Some(written) => fill_observed(child, written, answered),
                    None => applied.push(observed_part(child, answered)),
                }
            }
        }
        // A leaf the user wrote, or a shape the user chose differently: the user wins.
        _ => {}
    }
}

/// The observed part of a response value the manifest does not have at all.
fn observed_part(node: &SchemaNode, answered: &Value) -> Value {
    let mut part = match (node, answered) {
        (SchemaNode::Map(_), Value::Object(_)) => Value::Object(Map::new()),
        (SchemaNode::List { .. }, Value::Array(_)) => Value::Array(Vec::new()),
        _ => return answered.clone(),
    };
    fill_observed(node, &mut part, answered);
    part
}
