//! The observer schema, parsed: which fields of each resource are observed, and how long
//! each observed list may be.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::identity::ResourceId;

/// Key of the list control entry holding the minimum length.
pub const LIST_MIN_LENGTH_KEY: &str = "observer_schema_list_min_length";
/// Key of the list control entry holding the maximum length (0: unlimited).
pub const LIST_MAX_LENGTH_KEY: &str = "observer_schema_list_max_length";
/// Key of the control entry that a projection appends to every observed list: the list's
/// length in the projected object, so that adding or removing unobserved elements shows.
pub const LIST_CURRENT_LENGTH_KEY: &str = "observer_schema_list_current_length";

/// The lengths a list may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListBounds {
    pub min: u64,
    /// `None`: unlimited, written as 0 in the schema.
    pub max: Option<u64>,
}

impl ListBounds {
    /// Bounds as written in a schema, where a maximum of 0 means unlimited.
    pub fn from_schema(min: u64, max: u64) -> Self {
        Self {
            min,
            max: (max != 0).then_some(max),
        }
    }

    /// Exactly `length` elements; a length of 0 gives no upper bound, as in the schema.
    pub fn exactly(length: usize) -> Self {
        let length = length as u64;
        Self::from_schema(length, length)
    }

    pub fn contains(&self, length: u64) -> bool {
        length >= self.min && self.max.is_none_or(|max| length <= max)
    }

    /// The control entry that ends the list in a written schema.
    pub fn control_entry(&self) -> Value {
        json!({
            LIST_MIN_LENGTH_KEY: self.min,
            LIST_MAX_LENGTH_KEY: self.max.unwrap_or(0),
        })
    }
}

/// What the schema observes at one position of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaNode {
    /// The whole value here is observed (`null` in the written schema).
    Leaf,
    /// These keys of a mapping are observed; others are not.
    Map(BTreeMap<String, SchemaNode>),
    /// The first `elements.len()` elements of a list are observed, by index, and the list's
    /// length must stay within `bounds`.
    List {
        elements: Vec<SchemaNode>,
        bounds: ListBounds,
    },
}

impl SchemaNode {
    /// The written form: `null` leaves, lists ending with their control entry.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Leaf => Value::Null,
            Self::Map(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, node)| (key.clone(), node.to_value()))
                    .collect(),
            ),
            Self::List { elements, bounds } => Value::Array(
                elements
                    .iter()
                    .map(Self::to_value)
                    .chain([bounds.control_entry()])
                    .collect(),
            ),
        }
    }

    /// The child observed under `key`, when this is a mapping node.
    pub fn field(&self, key: &str) -> Option<&SchemaNode> {
        match self {
            Self::Map(fields) => fields.get(key),
            _ => None,
        }
    }
}

/// The observed fields of one resource of the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSchema {
    pub id: ResourceId,
    /// The observed fields from the resource's root. Always a [`SchemaNode::Map`] holding the
    /// identity fields as leaves.
    pub root: SchemaNode,
}

impl ResourceSchema {
    /// The written form, with the identity values in place of their leaves.
    pub fn to_value(&self) -> Value {
        let mut value = self.root.to_value();
        if let Value::Object(root) = &mut value {
            root.insert("apiVersion".into(), self.id.api_version.clone().into());
            root.insert("kind".into(), self.id.kind.clone().into());
            let metadata = root
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(metadata) = metadata {
                metadata.insert("name".into(), self.id.name.clone().into());
                if let Some(namespace) = &self.id.namespace {
                    metadata.insert("namespace".into(), namespace.clone().into());
                }
            }
        }
        value
    }

    /// A schema that only checks that the resource exists.
    pub fn identity_only(id: ResourceId) -> Self {
        Self {
            root: SchemaNode::Map(identity_fields(&id)),
            id,
        }
    }
}

/// The identifying fields of `id`, observed as leaves: every projection keeps them so that
/// a projected resource still says which resource it is.
pub(super) fn identity_fields(id: &ResourceId) -> BTreeMap<String, SchemaNode> {
    let mut metadata = BTreeMap::from([("name".to_owned(), SchemaNode::Leaf)]);
    if id.namespace.is_some() {
        metadata.insert("namespace".to_owned(), SchemaNode::Leaf);
    }
    BTreeMap::from([
        ("apiVersion".to_owned(), SchemaNode::Leaf),
        ("kind".to_owned(), SchemaNode::Leaf),
        ("metadata".to_owned(), SchemaNode::Map(metadata)),
    ])
}

/// The observer schema of one application: one entry per observed resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObserverSchema {
    pub resources: Vec<ResourceSchema>,
}

impl ObserverSchema {
    /// The schema entry of the resource with this identity.
    pub fn resource(&self, id: &ResourceId) -> Option<&ResourceSchema> {
        self.resources.iter().find(|schema| &schema.id == id)
    }

    /// Whether `object` is one of the application's observed resources. Objects that were
    /// not created through the application never are, whatever they look like.
    pub fn observes(&self, object: &Value) -> bool {
        ResourceId::of(object).is_ok_and(|id| self.resource(&id).is_some())
    }

    /// The written form, as stored in the application's status.
    pub fn to_value(&self) -> Vec<Value> {
        self.resources
            .iter()
            .map(ResourceSchema::to_value)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_zero_means_unlimited() {
        let bounds = ListBounds::from_schema(1, 0);
        assert!(bounds.contains(1));
        assert!(bounds.contains(10_000));
        assert!(!bounds.contains(0));
    }

    #[test]
    fn bounds_are_inclusive() {
        let bounds = ListBounds::from_schema(1, 4);
        assert!(!bounds.contains(0));
        assert!(bounds.contains(1) && bounds.contains(4));
        assert!(!bounds.contains(5));
    }

    #[test]
    fn written_list_ends_with_control_entry() {
        let node = SchemaNode::List {
            elements: vec![SchemaNode::Leaf],
            bounds: ListBounds::from_schema(1, 3),
        };
        assert_eq!(
            node.to_value(),
            json!([null, {LIST_MIN_LENGTH_KEY: 1, LIST_MAX_LENGTH_KEY: 3}])
        );
    }
}
