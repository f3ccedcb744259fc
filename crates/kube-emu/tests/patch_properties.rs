//! Properties of merge patch and apply over generated objects.

use arbor_kube_emu::patch::{
    self, FieldSet, ListSemantics, PathElement, WriteContext, merge_patch, merge_patch_diff,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Field names that cannot collide with the ones the Pod schema describes.
fn field_name() -> impl Strategy<Value = String> {
    "x[a-z]{0,5}"
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
    ]
}

/// JSON without nulls: a merge patch cannot express a null that should stay.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(field_name(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(field_name(), value(), 0..6)
        .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>()))
}

proptest! {
    #[test]
    fn merge_patch_of_the_diff_turns_a_into_b(a in object(), b in object()) {
        prop_assert_eq!(merge_patch(&a, &merge_patch_diff(&a, &b)), b);
    }

    #[test]
    fn apply_onto_nothing_owns_every_leaf(
        spec in object(),
        names in prop::collection::btree_set("[a-z]{1,6}", 0..4),
        image in "[a-z]{1,8}",
    ) {
        let mut spec = spec;
        let containers: Vec<Value> = names
            .iter()
            .map(|name| json!({"name": name, "image": image, "args": [name]}))
            .collect();
        spec.as_object_mut().unwrap().insert("containers".into(), Value::Array(containers));
        let body = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec
        });
        let ctx = WriteContext {
            field_manager: "prop".into(),
            force: false,
            subresource: None,
            now: "2026-01-01T00:00:00Z".into(),
            api_version: "v1".into(),
        };
        let lists = ListSemantics::for_builtin("", "Pod");
        let out = patch::apply(None, body.to_string().as_bytes(), &ctx, &lists).unwrap();
        prop_assert_eq!(&out["spec"], &body["spec"]);
        // Nothing at all to own (only empty lists) leaves no entry.
        let owned = match out.pointer("/metadata/managedFields/0/fieldsV1") {
            Some(fields) => FieldSet::from_fields_v1(fields).unwrap(),
            None => FieldSet::new(),
        };
        let mut leaves = Vec::new();
        leaf_paths(&body["spec"], &mut vec![PathElement::Field("spec".into())], &mut leaves);
        for leaf in leaves {
            prop_assert!(owned.covers(&leaf), "{:?} not owned in {}", leaf, owned.to_fields_v1());
        }
    }
}

/// Paths to every scalar, list and empty object of `value`; the Pod's containers are walked by
/// key, other lists are atomic leaves.
fn leaf_paths(value: &Value, path: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (name, child) in map {
                path.push(PathElement::Field(name.clone()));
                leaf_paths(child, path, out);
                path.pop();
            }
        }
        Value::Array(list)
            if path.len() == 2 && path[1] == PathElement::Field("containers".into()) =>
        {
            for element in list {
                path.push(PathElement::key(vec![(
                    "name".into(),
                    element["name"].clone(),
                )]));
                leaf_paths(element, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}
