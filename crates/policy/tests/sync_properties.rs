//! seeds/000's takeaways as properties over arbitrary declared and live objects: Arbor "will
//! only delete or update existing Kubernetes resources that have a Sync declared in the git
//! repo, have a corresponding resource in the git repo and the corresponding existing
//! Kubernetes resource has a management label applied", and "will only create new resources
//! when a Sync is declared, a resource exists in the git repo and there is no existing matching
//! resource".

use std::collections::BTreeMap;

use arbor_policy::keys::ManagementLabel;
use arbor_policy::object;
use arbor_policy::sync::{Action, CompareFields, Situation, decide, may_update_or_delete};
use proptest::prelude::*;
use serde_json::{Value, json};

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("enabled".to_owned()),
        Just("disabled".to_owned()),
        "[a-z]{0,4}"
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    let key = prop_oneof![
        Just("arbor.dev/managed".to_owned()),
        Just("nomos.dev/managed".to_owned()),
        "[a-z]{1,5}",
    ];
    proptest::collection::btree_map(key, label_value(), 0..4)
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,3}".prop_map(Value::from),
    ]
}

fn spec() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            proptest::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn object_with(labels: BTreeMap<String, String>, spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "subject", "namespace": "default", "labels": labels},
        "data": spec,
    })
}

fn declared() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of((labels(), spec()).prop_map(|(l, s)| object_with(l, s)))
}

fn live() -> impl Strategy<Value = Option<Value>> {
    declared()
}

fn management_label() -> impl Strategy<Value = ManagementLabel> {
    prop_oneof![
        Just(ManagementLabel::arbor()),
        Just(ManagementLabel::nomos())
    ]
}

fn compare_fields() -> impl Strategy<Value = CompareFields> {
    prop_oneof![
        Just(CompareFields::AllDeclared),
        Just(CompareFields::parse(&["data.a"]).unwrap()),
    ]
}

proptest! {
    #[test]
    fn no_update_or_delete_without_the_management_label(
        sync_declared in any::<bool>(),
        declared in declared(),
        live in live(),
        label in management_label(),
        fields in compare_fields(),
    ) {
        let situation = Situation::assess(
            sync_declared, declared.as_ref(), live.as_ref(), &label, &fields);
        let decision = decide(&situation);
        if matches!(decision.action, Action::Update | Action::Delete) {
            let live = live.as_ref().expect("update or delete of an object that is not there");
            prop_assert!(sync_declared);
            prop_assert!(
                may_update_or_delete(&label, &object::labels(live)),
                "{} chose {} for unlabelled {}", decision.row, decision.action, live
            );
            prop_assert_eq!(decision.action == Action::Update, declared.is_some());
        }
    }

    #[test]
    fn create_only_when_sync_and_resource_are_declared_and_nothing_is_on_the_cluster(
        sync_declared in any::<bool>(),
        declared in declared(),
        live in live(),
        label in management_label(),
    ) {
        let situation = Situation::assess(
            sync_declared, declared.as_ref(), live.as_ref(), &label, &CompareFields::AllDeclared);
        let creates = decide(&situation).action == Action::Create;
        prop_assert_eq!(creates, sync_declared && declared.is_some() && live.is_none());
    }

    #[test]
    fn an_object_always_matches_itself_with_server_fields_added(
        labels in labels(),
        spec in spec(),
        label in management_label(),
    ) {
        let declared = object_with(labels, spec);
        let mut live = declared.clone();
        live["metadata"]["uid"] = json!("u");
        live["metadata"]["resourceVersion"] = json!("1");
        live["metadata"]["labels"][label.key.as_str()] = json!(label.value);
        live["status"] = json!({"observed": true});
        let comparison = arbor_policy::sync::compare(
            &declared, &live, &CompareFields::AllDeclared, &label);
        prop_assert!(comparison.matches(), "{:?}", comparison.differences);
    }
}
