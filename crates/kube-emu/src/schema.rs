//! Structural schemas of custom resources: what kube-apiserver's apiextensions server does to a
//! custom resource between decoding it and storing it.
//!
//! ## Model
//!
//! A CRD version's `openAPIV3Schema` is compiled once, when the CRD is registered, into a tree
//! of [`Node`]s with its patterns compiled and its CEL rules parsed ([`StructuralSchema`]); a
//! schema that cannot be compiled makes the CRD invalid, as in kube-apiserver. Every write of a
//! custom resource then goes through three steps on that tree, in kube-apiserver's order:
//!
//! 1. **pruning** ([`StructuralSchema::prune`]): fields the schema does not declare are dropped
//!    (unless `x-kubernetes-preserve-unknown-fields`), and so are `null`s of non-nullable
//!    fields without a default; the dropped paths are returned so the request's
//!    `fieldValidation` can warn about them or refuse them;
//! 2. **defaulting**: absent fields whose schema has a `default` get it, inside objects that
//!    exist (defaulting never creates a parent);
//! 3. **validation** ([`StructuralSchema::validate`]): types, `required`, `enum`, `pattern`,
//!    `format`, bounds, lengths, item counts, `nullable`, int-or-string, embedded resources,
//!    `allOf`/`anyOf`/`oneOf`/`not`, then the `x-kubernetes-validations` CEL rules. Failures
//!    are [`Cause`]s worded as kube-apiserver's `field.Error`s converted from kube-openapi's
//!    validation results (`spec.reference: Invalid value: "string": spec.reference in body must
//!    be of type object: "string"`).
//!
//! `apiVersion`, `kind` and `metadata` at the root (and in embedded resources) are the
//! server's business, not the schema's: they are never pruned by the schema, and `metadata`
//! is pruned to the fields of ObjectMeta.

mod cel;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use regex::Regex;
use serde_json::{Map, Value};

/// The fields of ObjectMeta; anything else in `metadata` is pruned.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// A CRD version's schema, compiled at registration and shared by every request.
#[derive(Clone)]
pub struct StructuralSchema {
    root: Arc<Node>,
}

impl fmt::Debug for StructuralSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StructuralSchema")
    }
}

/// Two compiled schemas are the same when they are the same compilation (schemas are
/// compared through their source in [`crate::registry::ServedVersion`]).
impl PartialEq for StructuralSchema {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.root, &other.root)
    }
}

/// What `additionalProperties` allows.
#[derive(Debug, Default)]
enum Additional {
    #[default]
    Unset,
    Any,
    Schema(Box<Node>),
}

/// One node of a compiled schema.
#[derive(Debug, Default)]
pub struct Node {
    json_type: Option<String>,
    int_or_string: bool,
    nullable: bool,
    format: Option<String>,
    enum_values: Vec<Value>,
    pattern: Option<(String, Regex)>,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    required: Vec<String>,
    properties: BTreeMap<String, Node>,
    additional: Additional,
    items: Option<Box<Node>>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    preserve_unknown: bool,
    embedded: bool,
    default: Option<Value>,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    rules: Vec<cel::Rule>,
}

/// Why a schema cannot be compiled: the schema path and the problem, for the CRD's causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    pub path: String,
    pub value: String,
    pub why: String,
}

fn number(schema: &Map<String, Value>, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn count(schema: &Map<String, Value>, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

fn flag(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn text(schema: &Map<String, Value>, key: &str) -> Option<String> {
    schema.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn compile_all(
    schema: &Map<String, Value>,
    key: &str,
    path: &str,
    problems: &mut Vec<SchemaProblem>,
) -> Vec<Node> {
    schema
        .get(key)
        .and_then(Value::as_array)
        .map(|schemas| {
            schemas
                .iter()
                .enumerate()
                .map(|(index, schema)| compile(schema, &format!("{path}.{key}[{index}]"), problems))
                .collect()
        })
        .unwrap_or_default()
}

/// Compiles one schema node; `path` names it in problems (`openAPIV3Schema.properties[spec]`).
fn compile(schema: &Value, path: &str, problems: &mut Vec<SchemaProblem>) -> Node {
    let Some(schema) = schema.as_object() else {
        return Node::default();
    };
    let pattern = text(schema, "pattern").and_then(|pattern| match Regex::new(&pattern) {
        Ok(regex) => Some((pattern, regex)),
        Err(error) => {
            problems.push(SchemaProblem {
                path: format!("{path}.pattern"),
                value: pattern,
                why: format!("must be a valid regular expression, but isn't: {error}"),
            });
            None
        }
    });
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    let child = compile(property, &format!("{path}.properties[{name}]"), problems);
                    (name.clone(), child)
                })
                .collect()
        })
        .unwrap_or_default();
    let additional = match schema.get("additionalProperties") {
        Some(Value::Bool(true)) => Additional::Any,
        Some(additional @ Value::Object(_)) => Additional::Schema(Box::new(compile(
            additional,
            &format!("{path}.additionalProperties"),
            problems,
        ))),
        _ => Additional::Unset,
    };
    let items = schema
        .get("items")
        .filter(|items| items.is_object())
        .map(|items| Box::new(compile(items, &format!("{path}.items"), problems)));
    let rules = cel::compile_rules(schema.get("x-kubernetes-validations"), path, problems);
    Node {
        json_type: text(schema, "type"),
        int_or_string: flag(schema, "x-kubernetes-int-or-string"),
        nullable: flag(schema, "nullable"),
        format: text(schema, "format"),
        enum_values: schema
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        pattern,
        minimum: number(schema, "minimum"),
        exclusive_minimum: flag(schema, "exclusiveMinimum"),
        maximum: number(schema, "maximum"),
        exclusive_maximum: flag(schema, "exclusiveMaximum"),
        multiple_of: number(schema, "multipleOf"),
        min_length: count(schema, "minLength"),
        max_length: count(schema, "maxLength"),
        min_items: count(schema, "minItems"),
        max_items: count(schema, "maxItems"),
        unique_items: flag(schema, "uniqueItems"),
        min_properties: count(schema, "minProperties"),
        max_properties: count(schema, "maxProperties"),
        required: crate::meta::string_list(schema.get("required")),
        properties,
        additional,
        items,
        all_of: compile_all(schema, "allOf", path, problems),
        any_of: compile_all(schema, "anyOf", path, problems),
        one_of: compile_all(schema, "oneOf", path, problems),
        not: schema
            .get("not")
            .map(|not| Box::new(compile(not, &format!("{path}.not"), problems))),
        preserve_unknown: flag(schema, "x-kubernetes-preserve-unknown-fields"),
        embedded: flag(schema, "x-kubernetes-embedded-resource"),
        default: schema.get("default").cloned(),
        list_type: text(schema, "x-kubernetes-list-type"),
        list_map_keys: crate::meta::string_list(schema.get("x-kubernetes-list-map-keys")),
        rules,
    }
}

/// `spec` under the root, `spec.x` deeper.
fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn item_path(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// Prunes `metadata` to ObjectMeta's fields, reporting what it drops.
fn prune_metadata(metadata: &mut Value, path: &str, pruned: &mut Vec<String>) {
    if let Some(metadata) = metadata.as_object_mut() {
        metadata.retain(|field, _| {
            let known = OBJECT_META_FIELDS.contains(&field.as_str());
            if !known {
                pruned.push(child_path(path, field));
            }
            known
        });
    }
}

impl Node {
    /// The schema of the property `name` of an object this node describes.
    fn property(&self, name: &str) -> Option<&Node> {
        self.properties.get(name).or(match &self.additional {
            Additional::Schema(schema) => Some(schema),
            _ => None,
        })
    }

    /// Whether fields no schema declares stay.
    fn keeps_unknown(&self) -> bool {
        self.preserve_unknown || matches!(self.additional, Additional::Any)
    }

    /// Drops undeclared fields and nulls of non-nullable, non-defaulted fields; `root` keeps
    /// the type meta and metadata as the server handles them.
    fn prune(&self, value: &mut Value, path: &str, root: bool, pruned: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                let resource = root || self.embedded;
                map.retain(|field, child| {
                    if resource && matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
                        return true;
                    }
                    match self.property(field) {
                        Some(schema) => {
                            // kube-apiserver drops nulls the schema does not allow and cannot
                            // default, so `required` speaks about them instead of `type`.
                            !(child.is_null() && !schema.nullable && schema.default.is_none())
                        }
                        None if self.keeps_unknown() => true,
                        None => {
                            pruned.push(child_path(path, field));
                            false
                        }
                    }
                });
                for (field, child) in map.iter_mut() {
                    let child_path = child_path(path, field);
                    if resource && field == "metadata" {
                        prune_metadata(child, &child_path, pruned);
                        continue;
                    }
                    if resource && matches!(field.as_str(), "apiVersion" | "kind") {
                        continue;
                    }
                    if let Some(schema) = self.property(field) {
                        schema.prune(child, &child_path, false, pruned);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(schema) = &self.items {
                    for (index, item) in items.iter_mut().enumerate() {
                        schema.prune(item, &item_path(path, index), false, pruned);
                    }
                }
            }
            _ => {}
        }
    }

    /// Fills in defaults of absent (or null, non-nullable) properties, then descends.
    fn apply_defaults(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (name, schema) in &self.properties {
                    let Some(default) = &schema.default else {
                        continue;
                    };
                    match map.get(name) {
                        None => {
                            map.insert(name.clone(), default.clone());
                        }
                        Some(Value::Null) if !schema.nullable => {
                            map.insert(name.clone(), default.clone());
                        }
                        Some(_) => {}
                    }
                }
                for (name, child) in map.iter_mut() {
                    if let Some(schema) = self.property(name) {
                        schema.apply_defaults(child);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(schema) = &self.items {
                    for item in items {
                        schema.apply_defaults(item);
                    }
                }
            }
            _ => {}
        }
    }
}

impl StructuralSchema {
    /// Compiles a CRD version's `openAPIV3Schema`; `path` names it in problems.
    pub fn compile(schema: &Value, path: &str) -> Result<StructuralSchema, Vec<SchemaProblem>> {
        let mut problems = Vec::new();
        let root = compile(schema, path, &mut problems);
        if problems.is_empty() {
            Ok(StructuralSchema {
                root: Arc::new(root),
            })
        } else {
            Err(problems)
        }
    }

    /// Prunes unknown fields and applies defaults; returns the paths of the pruned fields.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        self.root.prune(object, "", true, &mut pruned);
        self.root.apply_defaults(object);
        pruned
    }

    /// Validates a pruned and defaulted object; `old` is the stored object for updates (CEL
    /// transition rules see it as `oldSelf`).
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<crate::status::Cause> {
        validate::validate(&self.root, object, old)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(schema: Value) -> StructuralSchema {
        StructuralSchema::compile(&schema, "spec.versions[0].schema.openAPIV3Schema")
            .expect("compiles")
    }

    #[test]
    fn unknown_fields_are_pruned_and_reported_but_type_meta_and_metadata_stay() {
        let schema = schema(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
        }));
        let mut object = json!({
            "apiVersion": "x.dev/v1", "kind": "X",
            "metadata": {"name": "n", "bogus": 1},
            "spec": {"a": "x", "b": 2, "list": []}, "extra": true,
        });
        let mut pruned = schema.prune(&mut object);
        pruned.sort();
        assert_eq!(
            pruned,
            vec!["extra", "metadata.bogus", "spec.b", "spec.list"]
        );
        assert_eq!(
            object,
            json!({"apiVersion": "x.dev/v1", "kind": "X", "metadata": {"name": "n"}, "spec": {"a": "x"}})
        );
    }

    #[test]
    fn preserve_unknown_fields_keeps_undeclared_fields_and_still_prunes_declared_ones_below() {
        let schema = schema(json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"known": {"type": "object", "properties": {}}},
            }},
        }));
        let mut object = json!({"spec": {"free": {"x": 1}, "known": {"y": 2}}});
        assert_eq!(schema.prune(&mut object), vec!["spec.known.y"]);
        assert_eq!(object, json!({"spec": {"free": {"x": 1}, "known": {}}}));
    }

    #[test]
    fn defaults_fill_absent_fields_inside_existing_objects_only() {
        let schema = schema(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "policy": {"type": "string", "default": "Orphan"},
                    "inner": {"type": "object", "properties": {"n": {"type": "integer", "default": 3}}},
                    "items": {"type": "array", "items": {"type": "object", "properties": {
                        "weight": {"type": "integer", "default": 1}}}},
                }},
                "status": {"type": "object", "properties": {"x": {"type": "string", "default": "d"}}},
            },
        }));
        let mut object = json!({"spec": {"items": [{}, {"weight": 5}], "policy": null}});
        schema.prune(&mut object);
        assert_eq!(
            object,
            json!({"spec": {"items": [{"weight": 1}, {"weight": 5}], "policy": "Orphan"}})
        );
    }

    #[test]
    fn nulls_of_non_nullable_fields_without_defaults_are_dropped() {
        let schema = schema(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}},
        }));
        let mut object = json!({"spec": {"a": null, "b": null}});
        assert!(schema.prune(&mut object).is_empty());
        assert_eq!(object, json!({"spec": {"b": null}}));
    }

    #[test]
    fn an_invalid_pattern_is_a_problem_of_the_schema() {
        let problems = StructuralSchema::compile(
            &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}),
            "openAPIV3Schema",
        )
        .expect_err("invalid regex");
        assert_eq!(problems[0].path, "openAPIV3Schema.properties[a].pattern");
    }
}
