//! Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds.
//!
//! Like a JSON merge patch, objects merge recursively and `null` deletes; lists follow the
//! kind's `patchStrategy`: merged by a key field (containers by `name`), merged as a set of values
//! (finalizers), or replaced. Directives understood:
//! - `$patch: replace` in an object replaces it; as a list element it replaces the list;
//! - `$patch: delete` in an object empties it; in a keyed list element deletes that element;
//! - `$retainKeys: [..]` keeps only the named fields of the live object;
//! - `$deleteFromPrimitiveList/<field>: [..]` removes values from a list of scalars;
//! - `$setElementOrder/<field>: [..]` orders the merged list (elements it does not name keep their
//!   place after their former predecessor).
//!
//! Directives never reach the stored object.

use serde_json::{Map, Value};

use super::PatchError;
use super::schema::{MergeStrategy, Schema};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies `patch` (which must be an object) to `live`.
pub fn strategic_merge(live: &Value, patch: &Value, schema: &Schema) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(format!(
            "strategic merge patch must be a JSON object, found {patch}"
        )));
    };
    let empty = Map::new();
    let live = live.as_object().unwrap_or(&empty);
    merge_object(live, patch, schema).map(Value::Object)
}

fn merge_object(
    live: &Map<String, Value>,
    patch: &Map<String, Value>,
    schema: &Schema,
) -> Result<Map<String, Value>, PatchError> {
    match patch.get(DIRECTIVE).and_then(Value::as_str) {
        Some("replace") => return merge_object(&Map::new(), &without_directive(patch), schema),
        Some("delete") => return Ok(Map::new()),
        Some("merge") | None => {}
        Some(other) => {
            return Err(PatchError::BadRequest(format!(
                "unknown strategic merge patch directive {DIRECTIVE}: {other:?}"
            )));
        }
    }
    let mut out = live.clone();
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let retain = retain.as_array().ok_or_else(|| {
            PatchError::BadRequest(format!("{RETAIN_KEYS} must be a list of field names"))
        })?;
        out.retain(|name, _| retain.iter().any(|kept| kept.as_str() == Some(name)));
    }
    for (name, value) in patch {
        if let Some(field) = name.strip_prefix(DELETE_FROM_LIST) {
            delete_from_list(&mut out, field, value)?;
        }
    }
    for (name, value) in patch {
        if name.starts_with('$') {
            continue;
        }
        if value.is_null() {
            out.shift_remove(name);
            continue;
        }
        let merged = merge_value(out.get(name), value, schema.field(name))?;
        out.insert(name.clone(), merged);
    }
    for (name, order) in patch {
        if let Some(field) = name.strip_prefix(SET_ELEMENT_ORDER) {
            order_list(&mut out, field, order, schema.field(field))?;
        }
    }
    Ok(out)
}

fn without_directive(patch: &Map<String, Value>) -> Map<String, Value> {
    let mut out = patch.clone();
    out.shift_remove(DIRECTIVE);
    out
}

fn merge_value(live: Option<&Value>, patch: &Value, schema: &Schema) -> Result<Value, PatchError> {
    let empty = Map::new();
    match patch {
        Value::Object(patch) => {
            let live = live.and_then(Value::as_object).unwrap_or(&empty);
            merge_object(live, patch, schema).map(Value::Object)
        }
        Value::Array(patch) => {
            let live = live
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            merge_list(live, patch, schema).map(Value::Array)
        }
        scalar => Ok(scalar.clone()),
    }
}

fn merge_list(live: &[Value], patch: &[Value], schema: &Schema) -> Result<Vec<Value>, PatchError> {
    let is_replace_marker =
        |item: &Value| item.get(DIRECTIVE).and_then(Value::as_str) == Some("replace");
    if patch.iter().any(is_replace_marker) {
        let rest: Vec<Value> = patch
            .iter()
            .filter(|item| !is_replace_marker(item))
            .cloned()
            .collect();
        return merge_list(&[], &rest, schema);
    }
    match &schema.strategy {
        MergeStrategy::Replace => patch
            .iter()
            .map(|item| merge_value(None, item, schema.item()))
            .collect(),
        MergeStrategy::MergeValues => {
            let mut out = live.to_vec();
            for item in patch {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Ok(out)
        }
        MergeStrategy::MergeByKey(key) => {
            let mut out = live.to_vec();
            for item in patch {
                let object = item.as_object().ok_or_else(|| {
                    PatchError::BadRequest(format!(
                        "strategic merge patch: element {item} of a list merged by {key:?} is not an object"
                    ))
                })?;
                let id = object.get(key).ok_or_else(|| {
                    PatchError::Invalid(format!(
                        "map: {item} does not contain declared merge key: {key}"
                    ))
                })?;
                let found = out
                    .iter()
                    .position(|existing| existing.get(key) == Some(id));
                match (object.get(DIRECTIVE).and_then(Value::as_str), found) {
                    (Some("delete"), _) => out.retain(|existing| existing.get(key) != Some(id)),
                    (_, Some(index)) => {
                        out[index] = merge_value(Some(&out[index]), item, schema.item())?
                    }
                    (_, None) => out.push(merge_value(None, item, schema.item())?),
                }
            }
            Ok(out)
        }
    }
}

fn delete_from_list(
    out: &mut Map<String, Value>,
    field: &str,
    values: &Value,
) -> Result<(), PatchError> {
    let values = directive_list(values, DELETE_FROM_LIST, field)?;
    if let Some(Value::Array(list)) = out.get_mut(field) {
        list.retain(|item| !values.contains(item));
    }
    Ok(())
}

/// The list a `<directive><field>` entry carries.
fn directive_list<'a>(
    value: &'a Value,
    directive: &str,
    field: &str,
) -> Result<&'a Vec<Value>, PatchError> {
    value
        .as_array()
        .ok_or_else(|| PatchError::BadRequest(format!("{directive}{field} must be a list")))
}

/// Reorders `out[field]` to follow `order`.
fn order_list(
    out: &mut Map<String, Value>,
    field: &str,
    order: &Value,
    schema: &Schema,
) -> Result<(), PatchError> {
    let order = directive_list(order, SET_ELEMENT_ORDER, field)?;
    let Some(Value::Array(list)) = out.get_mut(field) else {
        return Ok(());
    };
    let identity = |item: &Value| -> Value {
        match &schema.strategy {
            MergeStrategy::MergeByKey(key) => item.get(key).cloned().unwrap_or(Value::Null),
            _ => item.clone(),
        }
    };
    let mut placed = vec![false; list.len()];
    let mut ordered = Vec::with_capacity(list.len());
    for wanted in order.iter().map(&identity) {
        if let Some(index) = (0..list.len()).find(|&i| !placed[i] && identity(&list[i]) == wanted) {
            placed[index] = true;
            ordered.push(list[index].clone());
        }
    }
    for index in 0..list.len() {
        if placed[index] {
            continue;
        }
        // Keep an unnamed element right after the element that preceded it before.
        let predecessor = (0..index)
            .rev()
            .find(|&i| placed[i])
            .map(|i| identity(&list[i]));
        let at = predecessor
            .and_then(|id| ordered.iter().position(|item| identity(item) == id))
            .map_or(0, |position| position + 1);
        ordered.insert(at, list[index].clone());
        placed[index] = true;
    }
    *list = ordered;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::schema::ListSemantics;
    use serde_json::json;

    fn deployment() -> Schema {
        ListSemantics::for_builtin("apps", "Deployment").root
    }

    fn containers(value: &Value) -> &Value {
        &value["spec"]["template"]["spec"]["containers"]
    }

    #[test]
    fn set_element_order_reorders_keyed_elements() {
        let live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a"}, {"name": "b"}, {"name": "c"}
        ]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
            "containers": [{"name": "c", "image": "c:2"}]
        }}}});
        let out = strategic_merge(&live, &patch, &deployment()).unwrap();
        assert_eq!(
            containers(&out),
            &json!([{"name": "c", "image": "c:2"}, {"name": "a"}, {"name": "b"}])
        );
    }

    #[test]
    fn retain_keys_drops_unlisted_fields() {
        let live = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let out = strategic_merge(&live, &patch, &deployment()).unwrap();
        assert_eq!(out, json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn delete_from_primitive_list_and_merge_values() {
        let live = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["a"],
            "finalizers": ["c"]
        }});
        let out = strategic_merge(&live, &patch, &deployment()).unwrap();
        assert_eq!(out, json!({"metadata": {"finalizers": ["b", "c"]}}));
    }

    #[test]
    fn elements_without_the_merge_key_are_invalid() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        assert!(matches!(
            strategic_merge(&json!({}), &patch, &deployment()),
            Err(PatchError::Invalid(_))
        ));
    }

    #[test]
    fn unknown_directives_are_bad_requests() {
        let patch = json!({"spec": {"$patch": "explode"}});
        assert!(matches!(
            strategic_merge(&json!({}), &patch, &deployment()),
            Err(PatchError::BadRequest(_))
        ));
    }
}
