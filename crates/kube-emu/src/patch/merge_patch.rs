//! JSON merge patch (RFC 7386, `application/merge-patch+json`): objects merge recursively,
//! `null` removes a field, anything else replaces.

use serde_json::{Map, Value};

/// Applies `patch` to `live`.
pub fn merge_patch(live: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut out = match live {
        Value::Object(live) => live.clone(),
        _ => Map::new(),
    };
    for (name, value) in patch {
        if value.is_null() {
            out.shift_remove(name);
        } else {
            let merged = merge_patch(out.get(name).unwrap_or(&Value::Null), value);
            out.insert(name.clone(), merged);
        }
    }
    Value::Object(out)
}

/// The merge patch that turns `from` into `to`: what a client would send. Nulls inside `to`
/// cannot be expressed (they would read as deletions), so `to` should have none in its objects.
pub fn diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(from), Value::Object(to)) => {
            let mut patch = Map::new();
            for name in from.keys() {
                if !to.contains_key(name) {
                    patch.insert(name.clone(), Value::Null);
                }
            }
            for (name, value) in to {
                match from.get(name) {
                    Some(previous) if previous == value => {}
                    Some(previous) => {
                        patch.insert(name.clone(), diff(previous, value));
                    }
                    None => {
                        patch.insert(name.clone(), value.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_removes_and_objects_merge() {
        let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}});
        let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "data": null});
        assert_eq!(
            merge_patch(&live, &patch),
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}})
        );
    }

    #[test]
    fn diff_of_equal_objects_is_empty() {
        let value = json!({"a": {"b": [1, 2]}});
        assert_eq!(diff(&value, &value), json!({}));
    }
}
