//! Projecting live objects through the schema: what the observer records as the last
//! observed manifest.
//!
//! Only observed fields survive. Fields the live object lacks are absent from the
//! projection. Observed lists keep their observed elements by index, and end with a control
//! entry holding the live list's length, so that elements added or removed beyond the
//! observed ones still change the projection.

use serde_json::{Map, Value, json};

use super::identity::ResourceId;
use super::schema::{LIST_CURRENT_LENGTH_KEY, ObserverSchema, ResourceSchema, SchemaNode};

impl ResourceSchema {
    /// The observed part of `live`, one of this resource's live objects.
    pub fn project(&self, live: &Value) -> Value {
        project_node(&self.root, live).unwrap_or_else(|| Value::Object(Map::new()))
    }
}

/// The last observed manifest: the projection of every live object that the schema
/// observes, in schema order. Live objects the application does not declare are left out.
pub fn last_observed_manifest(schema: &ObserverSchema, live: &[Value]) -> Vec<Value> {
    schema
        .resources
        .iter()
        .filter_map(|resource| {
            live.iter()
                .find(|object| ResourceId::of(object).is_ok_and(|id| id == resource.id))
                .map(|object| resource.project(object))
        })
        .collect()
}

/// The projection of `value` through `node`; `None` when `value` does not have the shape the
/// schema observes (a mapping or list), which makes the field count as missing.
fn project_node(node: &SchemaNode, value: &Value) -> Option<Value> {
    match node {
        SchemaNode::Leaf => Some(value.clone()),
        SchemaNode::Map(fields) => {
            let object = value.as_object()?;
            Some(Value::Object(
                fields
                    .iter()
                    .filter_map(|(key, child)| {
                        let projected = project_node(child, object.get(key)?)?;
                        Some((key.clone(), projected))
                    })
                    .collect(),
            ))
        }
        SchemaNode::List { elements, .. } => {
            let items = value.as_array()?;
            // A mis-shaped element becomes null rather than disappearing, so the elements
            // after it keep their index.
            let observed = elements
                .iter()
                .zip(items)
                .map(|(child, item)| project_node(child, item).unwrap_or(Value::Null));
            let length = json!({ LIST_CURRENT_LENGTH_KEY: items.len() });
            Some(Value::Array(observed.chain([length]).collect()))
        }
    }
}

/// A list's elements and its length, whether the list is a projection (ending with its
/// length entry) or a plain list.
pub(super) fn list_elements(list: &[Value]) -> (&[Value], u64) {
    match list.split_last() {
        Some((last, elements)) => match length_entry(last) {
            Some(length) => (elements, length),
            None => (list, list.len() as u64),
        },
        None => (list, 0),
    }
}

fn length_entry(value: &Value) -> Option<u64> {
    let entry = value.as_object()?;
    if entry.len() != 1 {
        return None;
    }
    entry.get(LIST_CURRENT_LENGTH_KEY)?.as_u64()
}

/// `value` without the length entries a projection appends to its lists.
pub fn without_list_lengths(value: &Value) -> Value {
    let mut value = value.clone();
    strip_list_lengths(&mut value);
    value
}

fn strip_list_lengths(value: &mut Value) {
    match value {
        Value::Object(fields) => fields.values_mut().for_each(strip_list_lengths),
        Value::Array(items) => {
            if items.last().and_then(length_entry).is_some() {
                items.pop();
            }
            items.iter_mut().for_each(strip_list_lengths);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::default_schema;

    fn pod_schema() -> ResourceSchema {
        default_schema(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "args": ["x"]}, {"name": "b"}], "hostNetwork": false}}))
        .unwrap()
    }

    #[test]
    fn fields_missing_in_the_live_object_are_absent() {
        let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            pod_schema().project(&live),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "a"}, {LIST_CURRENT_LENGTH_KEY: 1}]}})
        );
    }

    #[test]
    fn projection_records_the_live_length_beyond_observed_elements() {
        let live = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
        let projected = pod_schema().project(&live);
        let containers = projected["spec"]["containers"].as_array().unwrap();
        assert_eq!(
            containers.len(),
            3,
            "two observed elements and the length entry"
        );
        assert_eq!(list_elements(containers), (&containers[..2], 3));
    }

    #[test]
    fn misshaped_element_keeps_the_index_of_the_next_one() {
        let live = json!({"spec": {"containers": ["a", {"name": "b"}], "hostNetwork": {"x": 1}}});
        let projected = pod_schema().project(&live);
        assert_eq!(projected["spec"]["containers"][0], Value::Null);
        assert_eq!(projected["spec"]["containers"][1], json!({"name": "b"}));
        // A leaf observes whatever value is there, whole.
        assert_eq!(projected["spec"]["hostNetwork"], json!({"x": 1}));
    }

    #[test]
    fn length_entries_are_removed_only_at_the_end_of_lists() {
        let projected =
            json!({"a": [{LIST_CURRENT_LENGTH_KEY: 2}, 1, {LIST_CURRENT_LENGTH_KEY: 2}]});
        assert_eq!(
            without_list_lengths(&projected),
            json!({"a": [{LIST_CURRENT_LENGTH_KEY: 2}, 1]})
        );
    }
}
