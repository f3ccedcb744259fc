//! Parsing a custom observer schema and checking it against the application's manifest.
//!
//! Validation never stops at the first problem: the whole schema is walked and every error
//! is reported with its resource, its field path and a reason code, so a user fixes a schema
//! in one round.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::default::ResourceLabel;
use super::error::{Origin, SchemaError, SchemaErrorReason, SchemaErrors};
use super::identity::ResourceId;
use super::path::FieldPath;
use super::schema::{
    LIST_MAX_LENGTH_KEY, LIST_MIN_LENGTH_KEY, ListBounds, ResourceSchema, SchemaNode,
    identity_fields,
};

/// Parses `custom`, the user's observer schema, and checks it against `manifest`.
///
/// Each returned schema carries the identity of the manifest resource it observes. An entry
/// without `metadata.namespace` observes every manifest resource with its apiVersion, kind
/// and name; with a namespace string, only the one in that namespace.
pub fn parse_custom_schema(
    custom: &[Value],
    manifest: &[Value],
) -> Result<Vec<ResourceSchema>, SchemaErrors> {
    let manifest_ids: Vec<Option<ResourceId>> =
        manifest.iter().map(|m| ResourceId::of(m).ok()).collect();
    let mut errors = Vec::new();
    let mut claimed_by: BTreeMap<usize, usize> = BTreeMap::new();
    let mut schemas = Vec::new();

    for (index, entry) in custom.iter().enumerate() {
        let mut walk = Walk {
            index,
            resource: ResourceLabel(entry).to_string(),
            errors: &mut errors,
        };
        for (manifest_index, schema) in walk.resource(entry, manifest, &manifest_ids) {
            match claimed_by.get(&manifest_index) {
                Some(&first) => walk.error(
                    FieldPath::root(),
                    SchemaErrorReason::DuplicateResource { first },
                ),
                None => {
                    claimed_by.insert(manifest_index, index);
                    schemas.push((manifest_index, schema));
                }
            }
        }
    }

    if errors.is_empty() {
        schemas.sort_by_key(|(manifest_index, _)| *manifest_index);
        Ok(schemas.into_iter().map(|(_, schema)| schema).collect())
    } else {
        Err(SchemaErrors(errors))
    }
}

/// The identity a schema entry declares; `None` parts were reported as errors.
struct DeclaredIdentity {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

impl DeclaredIdentity {
    fn matches(&self, id: &ResourceId) -> bool {
        self.api_version.as_deref() == Some(id.api_version.as_str())
            && self.kind.as_deref() == Some(id.kind.as_str())
            && self.name.as_deref() == Some(id.name.as_str())
            && self
                .namespace
                .as_ref()
                .is_none_or(|namespace| id.namespace.as_ref() == Some(namespace))
    }

    fn is_complete(&self) -> bool {
        self.api_version.is_some() && self.kind.is_some() && self.name.is_some()
    }
}

struct Walk<'a> {
    index: usize,
    resource: String,
    errors: &'a mut Vec<SchemaError>,
}

impl Walk<'_> {
    fn error(&mut self, path: FieldPath, reason: SchemaErrorReason) {
        self.errors.push(SchemaError {
            origin: Origin::ObserverSchema,
            index: self.index,
            resource: self.resource.clone(),
            path,
            reason,
        });
    }

    /// One schema entry: its identity, its observed fields, and the manifest resources it
    /// observes (by position in the manifest).
    fn resource(
        &mut self,
        entry: &Value,
        manifest: &[Value],
        manifest_ids: &[Option<ResourceId>],
    ) -> Vec<(usize, ResourceSchema)> {
        let root = FieldPath::root();
        let Some(fields) = entry.as_object() else {
            self.error(root, SchemaErrorReason::ResourceNotAMapping);
            return Vec::new();
        };
        let (declared, observed) = self.split_identity(fields);
        let matched: Vec<usize> = manifest_ids
            .iter()
            .enumerate()
            .filter(|(_, id)| id.as_ref().is_some_and(|id| declared.matches(id)))
            .map(|(position, _)| position)
            .collect();
        if declared.is_complete() && matched.is_empty() {
            self.error(root.clone(), SchemaErrorReason::ResourceNotInManifest);
        }
        let counterpart = matched.first().map(|&position| &manifest[position]);
        let tree = self.map(&observed, counterpart, &root);
        matched
            .into_iter()
            .filter_map(|position| {
                let id = manifest_ids[position].clone()?;
                Some((position, with_identity_leaves(id, tree.clone())))
            })
            .collect()
    }

    /// Separates the identifying values from the observed fields, reporting identity errors.
    fn split_identity(
        &mut self,
        fields: &Map<String, Value>,
    ) -> (DeclaredIdentity, Map<String, Value>) {
        let root = FieldPath::root();
        let mut observed = fields.clone();
        let api_version = self.identity(
            observed.remove("apiVersion"),
            "apiVersion",
            root.key("apiVersion"),
        );
        let kind = self.identity(observed.remove("kind"), "kind", root.key("kind"));
        let metadata_path = root.key("metadata");
        let (name, namespace) = match observed.get_mut("metadata") {
            None | Some(Value::Null) => {
                self.error(
                    metadata_path.key("name"),
                    SchemaErrorReason::MissingIdentity {
                        field: "metadata.name",
                    },
                );
                observed.remove("metadata");
                (None, None)
            }
            Some(Value::Object(metadata)) => {
                let name = self.identity(
                    metadata.remove("name"),
                    "metadata.name",
                    metadata_path.key("name"),
                );
                let namespace = match metadata.get("namespace") {
                    Some(Value::String(namespace)) => {
                        let namespace = namespace.clone();
                        metadata.remove("namespace");
                        Some(namespace)
                    }
                    _ => None,
                };
                (name, namespace)
            }
            Some(_) => {
                self.error(metadata_path, SchemaErrorReason::MetadataNotAMapping);
                observed.remove("metadata");
                (None, None)
            }
        };
        let declared = DeclaredIdentity {
            api_version,
            kind,
            name,
            namespace,
        };
        (declared, observed)
    }

    fn identity(
        &mut self,
        value: Option<Value>,
        field: &'static str,
        path: FieldPath,
    ) -> Option<String> {
        match value {
            Some(Value::String(text)) => Some(text),
            None | Some(Value::Null) => {
                self.error(path, SchemaErrorReason::MissingIdentity { field });
                None
            }
            Some(_) => {
                self.error(path, SchemaErrorReason::IdentityNotAString { field });
                None
            }
        }
    }

    fn node(&mut self, schema: &Value, manifest: Option<&Value>, path: &FieldPath) -> SchemaNode {
        match schema {
            Value::Null => SchemaNode::Leaf,
            Value::Object(fields) => {
                let manifest = self.same_shape(manifest, Value::is_object, "mapping", path);
                SchemaNode::Map(self.map(fields, manifest, path))
            }
            Value::Array(items) => {
                let manifest = self.same_shape(manifest, Value::is_array, "list", path);
                self.list(items, manifest, path)
            }
            _ => {
                self.error(path.clone(), SchemaErrorReason::LeafNotNull);
                SchemaNode::Leaf
            }
        }
    }

    /// The manifest counterpart if it has the schema's shape; reports it when it has not.
    fn same_shape<'m>(
        &mut self,
        manifest: Option<&'m Value>,
        has_shape: fn(&Value) -> bool,
        shape: &'static str,
        path: &FieldPath,
    ) -> Option<&'m Value> {
        let manifest = manifest?;
        if has_shape(manifest) {
            return Some(manifest);
        }
        self.error(
            path.clone(),
            SchemaErrorReason::ShapeDiffersFromManifest {
                schema: shape,
                manifest: shape_name(manifest),
            },
        );
        None
    }

    fn map(
        &mut self,
        fields: &Map<String, Value>,
        manifest: Option<&Value>,
        path: &FieldPath,
    ) -> BTreeMap<String, SchemaNode> {
        fields
            .iter()
            .map(|(key, value)| {
                let counterpart = manifest.and_then(|m| m.get(key));
                (key.clone(), self.node(value, counterpart, &path.key(key)))
            })
            .collect()
    }

    fn list(&mut self, items: &[Value], manifest: Option<&Value>, path: &FieldPath) -> SchemaNode {
        let control_path = path.list_control();
        let control = items.last().and_then(Value::as_object).filter(|last| {
            last.contains_key(LIST_MIN_LENGTH_KEY) || last.contains_key(LIST_MAX_LENGTH_KEY)
        });
        let element_values = match control {
            Some(_) => &items[..items.len() - 1],
            None => {
                self.error(control_path.clone(), SchemaErrorReason::MissingListControl);
                items
            }
        };
        let elements: Vec<SchemaNode> = element_values
            .iter()
            .enumerate()
            .map(|(index, value)| {
                let counterpart = manifest.and_then(|m| m.get(index));
                self.node(value, counterpart, &path.index(index))
            })
            .collect();
        let bounds = match control {
            Some(control) => self.bounds(control, elements.len(), &control_path),
            None => ListBounds::from_schema(0, 0),
        };
        SchemaNode::List { elements, bounds }
    }

    fn bounds(
        &mut self,
        control: &Map<String, Value>,
        observed: usize,
        path: &FieldPath,
    ) -> ListBounds {
        if let Some(unknown) = control
            .keys()
            .find(|key| *key != LIST_MIN_LENGTH_KEY && *key != LIST_MAX_LENGTH_KEY)
        {
            self.error(
                path.clone(),
                SchemaErrorReason::MalformedListControl {
                    detail: format!("unknown key {unknown:?}"),
                },
            );
        }
        let min = self.length(control, LIST_MIN_LENGTH_KEY, path);
        let max = self.length(control, LIST_MAX_LENGTH_KEY, path);
        let (Some(min), Some(max)) = (min, max) else {
            return ListBounds::from_schema(0, 0);
        };
        if max != 0 && min > max {
            self.error(path.clone(), SchemaErrorReason::MinAboveMax { min, max });
        }
        if max != 0 && max < observed as u64 {
            self.error(
                path.clone(),
                SchemaErrorReason::MaxBelowObservedElements { max, observed },
            );
        }
        ListBounds::from_schema(min, max)
    }

    fn length(
        &mut self,
        control: &Map<String, Value>,
        key: &'static str,
        path: &FieldPath,
    ) -> Option<u64> {
        let reason = match control.get(key) {
            None => SchemaErrorReason::MalformedListControl {
                detail: format!("{key} is missing"),
            },
            Some(value) => match value.as_u64() {
                Some(length) => return Some(length),
                None if value.as_i64().is_some() => SchemaErrorReason::NegativeListLength { key },
                None => SchemaErrorReason::ListLengthNotInteger { key },
            },
        };
        self.error(path.clone(), reason);
        None
    }
}

/// The observed tree with the identity fields observed as leaves, as every projection
/// must carry the resource's identity.
fn with_identity_leaves(id: ResourceId, observed: BTreeMap<String, SchemaNode>) -> ResourceSchema {
    let mut root = identity_fields(&id);
    for (key, node) in observed {
        match (root.get_mut(&key), node) {
            (Some(SchemaNode::Map(identity)), SchemaNode::Map(fields)) => {
                for (field, node) in fields {
                    identity.entry(field).or_insert(node);
                }
            }
            (_, node) => {
                root.insert(key, node);
            }
        }
    }
    ResourceSchema {
        id,
        root: SchemaNode::Map(root),
    }
}

/// How a JSON value's kind is named in messages.
pub(super) fn shape_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}
