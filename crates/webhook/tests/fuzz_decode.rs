//! Property tests over arbitrary input: decoding an AdmissionReview and deciding on it never
//! panics, whatever the bytes or JSON, and reading objects only as far as the policy's view of
//! their kind decides as reading them whole would. Bounded case counts so it runs in
//! `make test`.

mod support;

use arbor_policy::ownership::ClusterGitTrackMode;
use arbor_webhook::review::{ObjectView, decode_admission_review};
use arbor_webhook::rules::drift::UnreachableAnswer;
use proptest::prelude::*;
use serde_json::{Value, json};
use support::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn any_policy() -> arbor_webhook::Policy {
    let mut settings = settings(ClusterGitTrackMode::IncludeNamespaced);
    settings.drift = Some(drift_settings(UnreachableAnswer::Deny));
    let declared = json!({"metadata": {"name": "x"}, "spec": {"a": [1, {"b": "c"}]}});
    policy(
        settings,
        cycle_tree(),
        Some(ScriptedDeclared::declaring("x", declared)),
    )
}

/// The policy without drift prevention, whose view reads most kinds' metadata only.
fn rules_policy() -> arbor_webhook::Policy {
    policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        cycle_tree(),
        None,
    )
}

/// Arbitrary JSON, a few levels deep, using the keys the rules read so that they are reached.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("metadata".to_owned()),
        Just("name".to_owned()),
        Just("namespace".to_owned()),
        Just("labels".to_owned()),
        Just("annotations".to_owned()),
        Just("ownerReferences".to_owned()),
        Just("apiVersion".to_owned()),
        Just("kind".to_owned()),
        Just("spec".to_owned()),
        Just("arbor.dev/managed".to_owned()),
        Just("arbor.dev/parent".to_owned()),
        Just("arbor.dev/source".to_owned()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("enabled".to_owned()),
            Just("r".to_owned()),
            Just("a".to_owned()),
            Just("GitTrack/a/x".to_owned()),
            Just("arbor.dev/v1alpha1".to_owned()),
            ".{0,8}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn any_kind() -> impl Strategy<Value = (&'static str, &'static str, &'static str)> {
    prop_oneof![
        Just(("", "v1", "Namespace")),
        Just(("arbor.dev", "v1alpha1", "SubNamespace")),
        Just(("arbor.dev", "v1alpha1", "GitTrack")),
        Just(("arbor.dev", "v1alpha1", "ClusterGitTrack")),
        Just(("arbor.dev", "v1alpha1", "GitTrackObject")),
        Just(("arbor.dev", "v1alpha1", "ClusterGitTrackObject")),
        Just(("apps", "v1", "Deployment")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for view in [ObjectView::Metadata, ObjectView::Whole] {
            let _ = decode_admission_review(&bytes, |_| view);
        }
    }

    #[test]
    fn arbitrary_json_bodies_never_panic(body in any_json()) {
        let policy = any_policy();
        if let Ok(decoded) =
            decode_admission_review(body.to_string().as_bytes(), |kind| policy.object_view(kind))
        {
            let verdict = runtime().block_on(policy.review(&decoded.input));
            let _ = verdict.decision();
        }
    }

    #[test]
    fn arbitrary_objects_in_valid_envelopes_never_panic(
        kind in any_kind(),
        operation in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE"), Just("CONNECT")],
        name in prop_oneof![Just("x"), Just("a"), Just(""), Just("r")],
        object in prop::option::of(any_json()),
        old_object in prop::option::of(any_json()),
    ) {
        let policy = any_policy();
        let request = request(operation, kind, Some("a"), name, "alice", object, old_object);
        let body = serde_json::to_vec(&review_body(request)).unwrap();
        match decode_admission_review(&body, |kind| policy.object_view(kind)) {
            Ok(decoded) => {
                let verdict = runtime().block_on(policy.review(&decoded.input));
                let decision = verdict.decision();
                prop_assert!(!decision.rule.is_empty());
            }
            // Only non-object objects are refused at decoding.
            Err(error) => prop_assert!(error.to_string().contains("is not a JSON object"), "{error}"),
        }
    }

    #[test]
    fn the_policy_view_decides_as_the_whole_objects_do(
        kind in any_kind(),
        operation in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE")],
        name in prop_oneof![Just("x"), Just("a"), Just("r")],
        object in prop::option::of(any_json()),
        old_object in prop::option::of(any_json()),
    ) {
        let policy = rules_policy();
        let request = request(operation, kind, Some("a"), name, "alice", object, old_object);
        let body = serde_json::to_vec(&review_body(request)).unwrap();
        let viewed = decode_admission_review(&body, |kind| policy.object_view(kind));
        let whole = decode_admission_review(&body, |_| ObjectView::Whole);
        match (viewed, whole) {
            (Ok(viewed), Ok(whole)) => {
                let viewed = runtime().block_on(policy.review(&viewed.input));
                let whole = runtime().block_on(policy.review(&whole.input));
                prop_assert_eq!(viewed, whole);
            }
            (Err(viewed), Err(whole)) => prop_assert_eq!(viewed.to_string(), whole.to_string()),
            (viewed, whole) => prop_assert!(false, "one view decoded and the other did not: {viewed:?} / {whole:?}"),
        }
    }
}
