//! The structured merge of server-side apply: the applied configuration laid over the live object.
//!
//! Values from the configuration win; objects merge field by field; associative lists and sets
//! merge element by element (the configuration's order wins for the elements it names, live-only
//! elements stay next to their former neighbours); atomic lists and atomic maps are replaced. A
//! `null` in the configuration removes the field.

use serde_json::{Map, Value};

use super::schema::{ListType, Schema};
use super::typed::element_paths;

/// Merges `config` into `live`. Both must have identifiable list elements where the schema says
/// so; lists whose elements cannot be identified are replaced like atomic ones.
pub fn merge(live: Option<&Value>, config: &Value, schema: &Schema) -> Value {
    match config {
        Value::Object(config_object) if !schema.atomic_map => {
            let mut out = match live {
                Some(Value::Object(live_object)) => live_object.clone(),
                _ => Map::new(),
            };
            for (name, value) in config_object {
                if value.is_null() {
                    out.shift_remove(name);
                } else {
                    let merged = merge(out.get(name), value, schema.field(name));
                    out.insert(name.clone(), merged);
                }
            }
            Value::Object(out)
        }
        Value::Array(config_list) if schema.list != ListType::Atomic => match live {
            Some(Value::Array(live_list)) => merge_lists(live_list, config_list, schema),
            _ => merge_lists(&[], config_list, schema),
        },
        _ => config.clone(),
    }
}

fn merge_lists(live: &[Value], config: &[Value], schema: &Schema) -> Value {
    let (Ok(live_paths), Ok(config_paths)) =
        (element_paths(live, schema), element_paths(config, schema))
    else {
        return Value::Array(config.to_vec());
    };
    let merge_element = |index: usize| -> Value {
        let previous = live_paths
            .iter()
            .position(|path| *path == config_paths[index])
            .map(|live_index| &live[live_index]);
        merge(previous, &config[index], schema.item())
    };
    let mut out = Vec::with_capacity(live.len() + config.len());
    let mut emitted = vec![false; config.len()];
    let mut emit = |index: usize, out: &mut Vec<Value>| {
        if !std::mem::replace(&mut emitted[index], true) {
            out.push(merge_element(index));
        }
    };
    let mut next_config = 0;
    for (live_index, live_path) in live_paths.iter().enumerate() {
        match config_paths.iter().position(|path| path == live_path) {
            Some(config_index) => {
                // Emit the configuration's elements up to this shared one, in its order.
                (next_config..=config_index).for_each(|index| emit(index, &mut out));
                next_config = next_config.max(config_index + 1);
            }
            None => out.push(live[live_index].clone()),
        }
    }
    (0..config.len()).for_each(|index| emit(index, &mut out));
    Value::Array(out)
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
    fn keyed_elements_merge_and_live_only_elements_stay() {
        let live = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "tty": true},
            {"name": "sidecar", "image": "s:1"}
        ]}});
        let config = json!({"spec": {"containers": [{"name": "a", "image": "a:2"}]}});
        let merged = merge(Some(&live), &config, &pod());
        assert_eq!(
            merged,
            json!({"spec": {"containers": [
                {"name": "a", "image": "a:2", "tty": true},
                {"name": "sidecar", "image": "s:1"}
            ]}})
        );
    }

    #[test]
    fn atomic_lists_are_replaced_and_nulls_remove() {
        let live = json!({"spec": {"args": ["1", "2"], "hostname": "h"}});
        let config = json!({"spec": {"args": ["3"], "hostname": null}});
        assert_eq!(
            merge(Some(&live), &config, &pod()),
            json!({"spec": {"args": ["3"]}})
        );
    }

    #[test]
    fn new_elements_follow_the_configuration_order() {
        let live = json!({"metadata": {"finalizers": ["b"]}});
        let config = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        assert_eq!(
            merge(Some(&live), &config, &pod()),
            json!({"metadata": {"finalizers": ["a", "b", "c"]}})
        );
    }
}
