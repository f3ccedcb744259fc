//! Objects seen through their schema: the field set an object sets, finding and removing the
//! value at a path, and comparing two versions of an object field by field.
//!
//! Like structured-merge-diff, the set of an object has a member for every scalar, atomic list,
//! atomic map, null and empty map, and for every element of a set or associative list (the element
//! as a whole, next to its own fields). Every object field is treated as a struct field, so a
//! non-empty map is never a member itself; kube differs only for maps of maps, which built-in
//! kinds do not have.

use serde_json::Value;

use super::fieldset::FieldSet;
use super::path::PathElement;
use super::schema::{ListType, Schema};

/// What to do with a list the schema says is associative but whose elements cannot be told
/// apart (a key field missing, or two elements with the same key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// Reject: this is a request body.
    Reject,
    /// Treat the list as atomic: this is stored data, which must stay manageable.
    Tolerate,
}

/// The key of an associative-list element, with schema defaults for missing key fields.
pub fn element_key(element: &Value, keys: &[String], item: &Schema) -> Option<PathElement> {
    let object = element.as_object()?;
    let mut fields = Vec::with_capacity(keys.len());
    for key in keys {
        let value = object
            .get(key)
            .cloned()
            .or_else(|| item.field(key).default.clone())?;
        fields.push((key.clone(), value));
    }
    Some(PathElement::key(fields))
}

/// The path elements of a list's elements under the schema, or a message saying why the elements
/// cannot be identified. Atomic lists have none.
pub fn element_paths(list: &[Value], schema: &Schema) -> Result<Vec<PathElement>, String> {
    let paths: Vec<PathElement> = match &schema.list {
        ListType::Atomic => return Ok(Vec::new()),
        ListType::Set => list.iter().cloned().map(PathElement::Value).collect(),
        ListType::Map(keys) => list
            .iter()
            .enumerate()
            .map(|(index, element)| {
                element_key(element, keys, schema.item()).ok_or_else(|| {
                    format!(
                        "element {index}: associative list with keys {keys:?} has an element that \
                         omits a key field"
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    for (index, path) in paths.iter().enumerate() {
        if paths[..index].contains(path) {
            return Err(format!("duplicate entries for key {path}"));
        }
    }
    Ok(paths)
}

/// The field set of `value`; errors carry the path of the offending list.
pub fn field_set(
    value: &Value,
    schema: &Schema,
    strictness: Strictness,
) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    collect(value, schema, strictness, &mut Vec::new(), &mut set)?;
    Ok(set)
}

fn collect(
    value: &Value,
    schema: &Schema,
    strictness: Strictness,
    path: &mut Vec<PathElement>,
    set: &mut FieldSet,
) -> Result<(), String> {
    match value {
        Value::Object(object) if !schema.atomic_map && !object.is_empty() => {
            for (name, child) in object {
                path.push(PathElement::Field(name.clone()));
                collect(child, schema.field(name), strictness, path, set)?;
                path.pop();
            }
        }
        Value::Array(list) if schema.list != ListType::Atomic => {
            let elements = match element_paths(list, schema) {
                Ok(elements) => elements,
                Err(message) if strictness == Strictness::Reject => {
                    return Err(format!("{}: {message}", super::path::display_path(path)));
                }
                Err(_) => {
                    set.insert(path);
                    return Ok(());
                }
            };
            for (element, child) in elements.into_iter().zip(list) {
                path.push(element);
                set.insert(path);
                if schema.list != ListType::Set {
                    collect(child, schema.item(), strictness, path, set)?;
                }
                path.pop();
            }
        }
        _ => set.insert(path),
    }
    Ok(())
}

/// The value at `path`, if present.
pub fn get<'a>(value: &'a Value, schema: &Schema, path: &[PathElement]) -> Option<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(value);
    };
    let (child, child_schema) = step(value, schema, first)?;
    get(child, child_schema, rest)
}

fn step<'a, 's>(
    value: &'a Value,
    schema: &'s Schema,
    element: &PathElement,
) -> Option<(&'a Value, &'s Schema)> {
    match element {
        PathElement::Field(name) => Some((value.as_object()?.get(name)?, schema.field(name))),
        _ => {
            let list = value.as_array()?;
            let index = position(list, schema, element)?;
            Some((&list[index], schema.item()))
        }
    }
}

/// The index of the list element a (non-field) path element designates.
fn position(list: &[Value], schema: &Schema, element: &PathElement) -> Option<usize> {
    match element {
        PathElement::Field(_) => None,
        PathElement::Index(index) => (*index < list.len()).then_some(*index),
        PathElement::Value(wanted) => list.iter().position(|item| item == wanted),
        PathElement::Key(_) => {
            let ListType::Map(keys) = &schema.list else {
                return None;
            };
            list.iter()
                .position(|item| element_key(item, keys, schema.item()).as_ref() == Some(element))
        }
    }
}

/// Removes the value at `path`; returns whether something was removed.
pub fn remove(value: &mut Value, schema: &Schema, path: &[PathElement]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let Some((parent, parent_schema)) = get_mut(value, schema, parent_path) else {
        return false;
    };
    match (last, parent) {
        (PathElement::Field(name), Value::Object(object)) => object.shift_remove(name).is_some(),
        (element, Value::Array(list)) => match position(list, parent_schema, element) {
            Some(index) => {
                list.remove(index);
                true
            }
            None => false,
        },
        _ => false,
    }
}

fn get_mut<'a, 's>(
    value: &'a mut Value,
    schema: &'s Schema,
    path: &[PathElement],
) -> Option<(&'a mut Value, &'s Schema)> {
    let Some((first, rest)) = path.split_first() else {
        return Some((value, schema));
    };
    let (child, child_schema) = match first {
        PathElement::Field(name) => (value.as_object_mut()?.get_mut(name)?, schema.field(name)),
        element => {
            let index = position(value.as_array()?, schema, element)?;
            (&mut value.as_array_mut()?[index], schema.item())
        }
    };
    get_mut(child, child_schema, rest)
}

/// How an object changed, as field sets.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// Members of the new object only.
    pub added: FieldSet,
    /// Members of the old object only.
    pub removed: FieldSet,
    /// Members of both whose value differs.
    pub modified: FieldSet,
}

impl Comparison {
    /// Added or modified members: what a writer changed.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Compares two versions of an object whose field sets are `old_set` and `new_set`.
pub fn compare(
    old: &Value,
    old_set: &FieldSet,
    new: &Value,
    new_set: &FieldSet,
    schema: &Schema,
) -> Comparison {
    let mut modified = FieldSet::new();
    for path in old_set.intersection(new_set).members() {
        // A keyed or set element is the same element on both sides; its fields say what changed.
        if matches!(
            path.last(),
            Some(PathElement::Key(_) | PathElement::Value(_))
        ) {
            continue;
        }
        if get(old, schema, &path) != get(new, schema, &path) {
            modified.insert(&path);
        }
    }
    Comparison {
        added: new_set.difference(old_set),
        removed: old_set.difference(new_set),
        modified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::schema::ListSemantics;
    use serde_json::json;

    fn pod() -> Schema {
        ListSemantics::for_builtin("", "Pod").root
    }

    #[test]
    fn keyed_elements_are_members_next_to_their_fields() {
        let object = json!({"spec": {"containers": [{"name": "a", "image": "x"}], "args": ["1"]}});
        let set = field_set(&object, &pod(), Strictness::Reject).unwrap();
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:spec": {
                "f:args": {},
                "f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}
            }})
        );
    }

    #[test]
    fn ports_without_protocol_use_the_tcp_default_in_their_key() {
        let object =
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}});
        let set = field_set(&object, &pod(), Strictness::Reject).unwrap();
        let encoded = set.to_fields_v1().to_string();
        assert!(
            encoded.contains(r#"k:{\"containerPort\":80,\"protocol\":\"TCP\"}"#),
            "{encoded}"
        );
    }

    #[test]
    fn duplicate_keys_are_rejected_in_requests_and_tolerated_in_storage() {
        let object = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
        let error = field_set(&object, &pod(), Strictness::Reject).unwrap_err();
        assert!(error.contains("duplicate entries"), "{error}");
        let set = field_set(&object, &pod(), Strictness::Tolerate).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"f:spec": {"f:containers": {}}}));
    }

    #[test]
    fn remove_finds_elements_by_key() {
        let schema = pod();
        let mut object = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let path = [
            PathElement::Field("spec".into()),
            PathElement::Field("containers".into()),
            PathElement::key(vec![("name".into(), json!("a"))]),
        ];
        assert!(remove(&mut object, &schema, &path));
        assert_eq!(object, json!({"spec": {"containers": [{"name": "b"}]}}));
        assert!(!remove(&mut object, &schema, &path));
    }
}
