//! Validation of a value against a compiled schema, worded as kube-apiserver converts
//! kube-openapi's results into `field.Error`s (`kubeOpenAPIResultToFieldErrors`).

use serde_json::Value;

use super::{Additional, Node, child_path, item_path};
use crate::status::Cause;

/// The JSON type of a value as kube-openapi names it (`integer` for whole numbers).
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if is_integer(number) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(number: &serde_json::Number) -> bool {
    number.is_i64()
        || number.is_u64()
        || number
            .as_f64()
            .is_some_and(|float| float.fract() == 0.0 && float.is_finite())
}

/// A bound as Go's `%v` prints a float64: `3`, `2.5`.
fn bound(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 {
        format!("{}", number as i64)
    } else {
        format!("{number}")
    }
}

/// Whether `value` matches the schema's type (nothing to check without one).
fn type_matches(node: &Node, value: &Value) -> bool {
    if node.int_or_string {
        return matches!(value, Value::String(_))
            || matches!(value, Value::Number(number) if is_integer(number));
    }
    match node.json_type.as_deref() {
        None | Some("") => true,
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("number") => value.is_number(),
        Some("integer") => matches!(value, Value::Number(number) if is_integer(number)),
        Some(_) => true,
    }
}

fn declared_type(node: &Node) -> String {
    if node.int_or_string {
        "integer,string".to_owned()
    } else {
        node.json_type.clone().unwrap_or_default()
    }
}

/// Whether a string has the `format` the schema names; unknown formats pass, as in
/// kube-apiserver (which knows only a fixed list).
fn format_holds(format: &str, text: &str) -> bool {
    use base64::Engine;
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok(),
        "uuid" => uuid::Uuid::parse_str(text).is_ok() && text.len() == 36,
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => text.split_once('/').is_some_and(|(address, bits)| {
            let bits = bits.parse::<u8>();
            match address.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => bits.is_ok_and(|bits| bits <= 32),
                Ok(std::net::IpAddr::V6(_)) => bits.is_ok_and(|bits| bits <= 128),
                Err(_) => false,
            }
        }),
        "hostname" => {
            !text.is_empty()
                && text.len() <= 253
                && text.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                })
        }
        "email" => text
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.')),
        "uri" => text.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        }),
        _ => true,
    }
}

/// The key of an item of a `x-kubernetes-list-type: map` list; `None` for other lists.
fn map_key(node: &Node, item: &Value) -> Option<Vec<Value>> {
    (node.list_type.as_deref() == Some("map")).then(|| {
        node.list_map_keys
            .iter()
            .map(|key| item.get(key).cloned().unwrap_or(Value::Null))
            .collect()
    })
}

struct Validation<'a> {
    causes: &'a mut Vec<Cause>,
    /// The second pass: only the CEL rules, once the structure is known to be sound.
    rules_only: bool,
}

impl Validation<'_> {
    fn invalid(&mut self, path: &str, value: &Value, why: String) {
        self.causes.push(Cause::invalid(path, value, &why));
    }

    /// Checks `value` at `path`; `old` is the stored value at the same place, for CEL.
    fn node(&mut self, node: &Node, value: &Value, old: Option<&Value>, path: &str, root: bool) {
        if value.is_null() && node.nullable {
            return;
        }
        if !type_matches(node, value) {
            if self.rules_only {
                return;
            }
            let actual = type_name(value);
            self.causes.push(Cause::type_invalid(
                path,
                &Value::from(actual),
                &format!(
                    "{} in body must be of type {}: \"{actual}\"",
                    path,
                    declared_type(node)
                ),
            ));
            return;
        }
        if !self.rules_only {
            for schema in &node.all_of {
                self.node(schema, value, old, path, root);
            }
            self.alternatives(node, value, path);
        }
        match value {
            Value::String(text) if !self.rules_only => self.string(node, value, text, path),
            Value::Number(number) if !self.rules_only => self.number(node, value, number, path),
            Value::Array(items) => self.array(node, value, items, old, path),
            Value::Object(map) => self.object(node, value, map, old, path, root),
            _ => {}
        }
        if !self.rules_only {
            self.enumeration(node, value, path);
            return;
        }
        let type_label = declared_type(node);
        for rule in &node.rules {
            if let Some(cause) = rule.check(value, old, path, &type_label) {
                self.causes.push(cause);
            }
        }
    }

    fn enumeration(&mut self, node: &Node, value: &Value, path: &str) {
        if !node.enum_values.is_empty() && !node.enum_values.contains(value) {
            let supported: Vec<String> = node
                .enum_values
                .iter()
                .map(|allowed| match allowed {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect();
            self.causes
                .push(Cause::not_supported(path, value, &supported));
        }
    }

    fn alternatives(&mut self, node: &Node, value: &Value, path: &str) {
        let passes = |schema: &Node| {
            let mut causes = Vec::new();
            Validation {
                causes: &mut causes,
                rules_only: false,
            }
            .node(schema, value, None, path, false);
            causes.is_empty()
        };
        if !node.any_of.is_empty() && !node.any_of.iter().any(passes) {
            self.invalid(
                path,
                value,
                format!("{} in body must validate at least one schema (anyOf)", path),
            );
        }
        if !node.one_of.is_empty()
            && node.one_of.iter().filter(|schema| passes(schema)).count() != 1
        {
            self.invalid(
                path,
                value,
                format!(
                    "{} in body must validate one and only one schema (oneOf)",
                    path
                ),
            );
        }
        if let Some(not) = &node.not
            && passes(not)
        {
            self.invalid(
                path,
                value,
                format!("{} in body must not validate the schema (not)", path),
            );
        }
    }

    fn string(&mut self, node: &Node, value: &Value, text: &str, path: &str) {
        let length = text.chars().count() as u64;
        if let Some(max) = node.max_length
            && length > max
        {
            self.causes.push(Cause::too_long(path, max));
        }
        if let Some(min) = node.min_length
            && length < min
        {
            self.invalid(
                path,
                value,
                format!("{} in body should be at least {min} chars long", path),
            );
        }
        if let Some((pattern, regex)) = &node.pattern
            && !regex.is_match(text)
        {
            self.invalid(
                path,
                value,
                format!("{} in body should match '{pattern}'", path),
            );
        }
        if let Some(format) = &node.format
            && !format_holds(format, text)
        {
            self.invalid(
                path,
                value,
                format!("{} in body must be of type {format}: \"{text}\"", path),
            );
        }
    }

    fn number(&mut self, node: &Node, value: &Value, number: &serde_json::Number, path: &str) {
        let Some(number) = number.as_f64() else {
            return;
        };
        if let Some(minimum) = node.minimum {
            let (fails, relation) = if node.exclusive_minimum {
                (number <= minimum, "greater than")
            } else {
                (number < minimum, "greater than or equal to")
            };
            if fails {
                self.invalid(
                    path,
                    value,
                    format!("{} in body should be {relation} {}", path, bound(minimum)),
                );
            }
        }
        if let Some(maximum) = node.maximum {
            let (fails, relation) = if node.exclusive_maximum {
                (number >= maximum, "less than")
            } else {
                (number > maximum, "less than or equal to")
            };
            if fails {
                self.invalid(
                    path,
                    value,
                    format!("{} in body should be {relation} {}", path, bound(maximum)),
                );
            }
        }
        if let Some(factor) = node.multiple_of
            && factor != 0.0
            && (number / factor).fract() != 0.0
        {
            self.invalid(
                path,
                value,
                format!("{} in body should be a multiple of {}", path, bound(factor)),
            );
        }
    }

    fn array(
        &mut self,
        node: &Node,
        value: &Value,
        items: &[Value],
        old: Option<&Value>,
        path: &str,
    ) {
        if !self.rules_only {
            self.array_bounds(node, value, items, path);
        }
        let Some(schema) = &node.items else {
            return;
        };
        let old_items = old.and_then(Value::as_array);
        for (index, item) in items.iter().enumerate() {
            // Only map lists correlate items with the stored ones (by their keys).
            let old_item = old_items.and_then(|old_items| {
                let key = map_key(node, item)?;
                old_items
                    .iter()
                    .find(|old| map_key(node, old) == Some(key.clone()))
            });
            self.node(schema, item, old_item, &item_path(path, index), false);
        }
    }

    fn array_bounds(&mut self, node: &Node, value: &Value, items: &[Value], path: &str) {
        let count = items.len() as u64;
        if let Some(max) = node.max_items
            && count > max
        {
            self.causes.push(Cause::too_many(path, count, max));
        }
        if let Some(min) = node.min_items
            && count < min
        {
            self.invalid(
                path,
                value,
                format!("{} in body should have at least {min} items", path),
            );
        }
        if node.unique_items || node.list_type.as_deref() == Some("set") {
            for (index, item) in items.iter().enumerate() {
                if items[..index].contains(item) {
                    self.causes
                        .push(Cause::duplicate(item_path(path, index), item));
                }
            }
        }
        if node.list_type.as_deref() == Some("map") {
            for (index, item) in items.iter().enumerate() {
                let key = map_key(node, item);
                if items[..index]
                    .iter()
                    .any(|earlier| map_key(node, earlier) == key)
                {
                    let shown = serde_json::to_value(&key).unwrap_or(Value::Null);
                    self.causes
                        .push(Cause::duplicate(item_path(path, index), &shown));
                }
            }
        }
    }

    fn object(
        &mut self,
        node: &Node,
        value: &Value,
        map: &serde_json::Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        root: bool,
    ) {
        if !self.rules_only {
            self.object_bounds(node, value, map, path);
        }
        for (name, child) in map {
            // The server validates the type meta and metadata of a resource itself.
            if (root || node.embedded)
                && matches!(name.as_str(), "apiVersion" | "kind" | "metadata")
            {
                continue;
            }
            let schema = match node.properties.get(name) {
                Some(schema) => schema,
                None => match &node.additional {
                    Additional::Schema(schema) => schema,
                    _ => continue,
                },
            };
            let old_child = old.and_then(|old| old.get(name));
            self.node(schema, child, old_child, &child_path(path, name), false);
        }
    }

    fn object_bounds(
        &mut self,
        node: &Node,
        value: &Value,
        map: &serde_json::Map<String, Value>,
        path: &str,
    ) {
        let count = map.len() as u64;
        if let Some(max) = node.max_properties
            && count > max
        {
            self.causes.push(Cause::too_many(path, count, max));
        }
        if let Some(min) = node.min_properties
            && count < min
        {
            self.invalid(
                path,
                value,
                format!("{} in body should have at least {min} properties", path),
            );
        }
        for required in &node.required {
            if !map.contains_key(required) {
                self.causes
                    .push(Cause::required(child_path(path, required), ""));
            }
        }
        if node.embedded && !map.is_empty() {
            for field in ["apiVersion", "kind"] {
                if map
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .is_empty()
                {
                    self.causes.push(Cause::required(
                        child_path(path, field),
                        "must not be empty",
                    ));
                }
            }
        }
    }
}

/// Whether any node of the schema has CEL rules.
fn has_rules(node: &Node) -> bool {
    !node.rules.is_empty()
        || node.properties.values().any(has_rules)
        || node.items.as_deref().is_some_and(has_rules)
        || matches!(&node.additional, Additional::Schema(schema) if has_rules(schema))
}

/// Validates a whole custom resource against its schema's root. CEL rules are skipped when
/// the object has type errors, with kube-apiserver's note saying so.
pub fn validate(root: &Node, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    Validation {
        causes: &mut causes,
        rules_only: false,
    }
    .node(root, object, old, "", true);
    if !has_rules(root) {
        // kube-apiserver has no CEL validator for a schema without rules.
    } else if causes.iter().any(|cause| {
        matches!(
            cause.reason,
            "FieldValueTypeInvalid" | "FieldValueNotSupported"
        )
    }) {
        causes.push(Cause::invalid(
            "<nil>",
            &Value::from("null"),
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    } else {
        Validation {
            causes: &mut causes,
            rules_only: true,
        }
        .node(root, object, old, "", true);
    }
    let mut unique: Vec<Cause> = Vec::with_capacity(causes.len());
    for cause in causes {
        if !unique.contains(&cause) {
            unique.push(cause);
        }
    }
    unique
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::StructuralSchema;

    fn messages(schema: serde_json::Value, object: serde_json::Value) -> Vec<String> {
        StructuralSchema::compile(&schema, "openAPIV3Schema")
            .expect("compiles")
            .validate(&object, None)
            .into_iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message))
            .collect()
    }

    fn spec_schema(properties: serde_json::Value) -> serde_json::Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}})
    }

    #[test]
    fn a_string_where_an_object_is_declared_is_a_type_error_worded_as_kube_apiserver() {
        let schema = spec_schema(json!({"reference": {"type": "object"}}));
        assert_eq!(
            messages(schema, json!({"spec": {"reference": "main"}})),
            vec![
                "spec.reference: Invalid value: \"string\": spec.reference in body must be of type object: \"string\""
            ]
        );
    }

    #[test]
    fn missing_required_fields_and_values_outside_the_enum_are_named() {
        let schema = json!({
            "type": "object", "required": ["spec"],
            "properties": {"spec": {"type": "object", "required": ["policy"], "properties": {
                "policy": {"type": "string", "enum": ["Orphan", "Delete"]}}}},
        });
        assert_eq!(
            messages(schema.clone(), json!({})),
            vec!["spec: Required value"]
        );
        assert_eq!(
            messages(schema, json!({"spec": {"policy": "Keep"}})),
            vec![
                "spec.policy: Unsupported value: \"Keep\": supported values: \"Orphan\", \"Delete\""
            ]
        );
    }

    #[test]
    fn strings_numbers_and_lists_are_bounded() {
        let schema = spec_schema(json!({
            "name": {"type": "string", "maxLength": 3, "minLength": 2, "pattern": "^[a-z]+$"},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "items": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            "when": {"type": "string", "format": "date-time"},
            "port": {"x-kubernetes-int-or-string": true},
        }));
        let found = messages(
            schema,
            json!({"spec": {"name": "ABCD", "count": 0, "items": ["a", 1], "when": "yesterday", "port": 1.5}}),
        );
        assert_eq!(
            found,
            vec![
                "spec.name: Too long: may not be more than 3 bytes",
                "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
                "spec.count: Invalid value: 0: spec.count in body should be greater than or equal to 1",
                "spec.items: Too many: 2: must have at most 1 items",
                "spec.items[1]: Invalid value: \"integer\": spec.items[1] in body must be of type string: \"integer\"",
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
                "spec.port: Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"",
            ]
        );
    }

    #[test]
    fn nullable_fields_accept_null_and_others_do_not() {
        let schema = spec_schema(json!({
            "a": {"type": "string", "nullable": true}, "b": {"type": "string"}}));
        assert_eq!(
            messages(schema, json!({"spec": {"a": null, "b": null}})),
            vec![
                "spec.b: Invalid value: \"null\": spec.b in body must be of type string: \"null\""
            ]
        );
    }

    #[test]
    fn cel_rules_run_only_on_a_structurally_valid_object() {
        let schema = spec_schema(json!({
            "reference": {"type": "object",
                "properties": {"branch": {"type": "string"}, "tag": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "has(self.branch) != has(self.tag)",
                                              "message": "exactly one of branch or tag must be set"}]},
            "mode": {"type": "string", "enum": ["a"]},
        }));
        assert_eq!(
            messages(
                schema.clone(),
                json!({"spec": {"reference": {"branch": "x", "tag": "y"}}})
            ),
            vec![
                "spec.reference: Invalid value: \"object\": exactly one of branch or tag must be set"
            ]
        );
        assert_eq!(
            messages(
                schema,
                json!({"spec": {"reference": {"branch": "x", "tag": "y"}, "mode": "b"}})
            ),
            vec![
                "spec.mode: Unsupported value: \"b\": supported values: \"a\"",
                "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ]
        );
    }

    #[test]
    fn embedded_resources_need_their_type_meta() {
        let schema = spec_schema(json!({"template": {
            "type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}}));
        assert_eq!(
            messages(
                schema,
                json!({"spec": {"template": {"metadata": {"name": "x"}}}})
            ),
            vec![
                "spec.template.apiVersion: Required value: must not be empty",
                "spec.template.kind: Required value: must not be empty",
            ]
        );
    }
}
