//! Properties of projection and comparison that must hold for any resource.

use arbor_policy::observe::{
    Observation, ObserverSchema, ResourceDelta, default_schema, last_applied_manifest,
    last_observed_manifest, observe, without_list_lengths,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON document, nested a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9:./-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let object = prop::collection::btree_map("[a-zA-Z][a-zA-Z0-9.-]{0,8}", inner.clone(), 0..5)
            .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>()));
        prop_oneof![
            prop::collection::vec(inner, 0..5).prop_map(Value::Array),
            object
        ]
    })
}

/// A resource with an identity and arbitrary content.
fn any_resource() -> impl Strategy<Value = Value> {
    (any_json(), any_json()).prop_map(|(spec, labels)| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "labels": labels},
            "spec": spec})
    })
}

proptest! {
    #[test]
    fn projection_through_own_default_schema_compares_equal(resource in any_resource()) {
        let schema = default_schema(&resource).unwrap();
        let projected = schema.project(&resource);
        prop_assert_eq!(without_list_lengths(&projected), resource.clone());

        let application = ObserverSchema { resources: vec![schema] };
        let manifest = [resource.clone()];
        let observed = last_observed_manifest(&application, &manifest);
        prop_assert_eq!(&observed, &[projected]);
        let delta = ResourceDelta::between(&application, &manifest, &observed);
        prop_assert!(delta.is_empty(), "differences: {:?}", delta);
        prop_assert_eq!(observe(&application, &observed, &manifest), Observation::Unchanged);
    }

    #[test]
    fn last_applied_of_a_fully_answered_manifest_is_the_manifest(resource in any_resource(), extra in any_json()) {
        let application = ObserverSchema::for_application(std::slice::from_ref(&resource), &[]).unwrap();
        let mut answered = resource.clone();
        answered["status"] = extra;
        let applied = last_applied_manifest(std::slice::from_ref(&resource), &application, &[answered]);
        prop_assert_eq!(applied, vec![resource]);
    }

    #[test]
    fn any_change_to_an_unobserved_field_is_no_difference(resource in any_resource(), status in any_json()) {
        let application = ObserverSchema::for_application(std::slice::from_ref(&resource), &[]).unwrap();
        let mut live = resource.clone();
        live["status"] = status;
        live["metadata"]["resourceVersion"] = json!("7");
        let observed = last_observed_manifest(&application, &[live]);
        prop_assert!(ResourceDelta::between(&application, &[resource], &observed).is_empty());
    }
}
