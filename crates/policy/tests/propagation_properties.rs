//! Properties of the object-copy decision and of copies, over generated inputs.

mod propagation_support;

use arbor_policy::propagation::{
    CopyAction, CopyDecision, CopyFacts, FromFact, KeyPattern, LiveFact, PropagateMode, SourceFact,
    build_copy, copy_differs, decide, decide_copy,
};
use propagation_support::{DOMAINS, Domain};
use proptest::prelude::*;
use serde_json::{Value, json};

fn mode() -> impl Strategy<Value = Option<PropagateMode>> {
    prop_oneof![
        Just(None),
        Just(Some(PropagateMode::Create)),
        Just(Some(PropagateMode::Update)),
    ]
}

fn facts() -> impl Strategy<Value = CopyFacts> {
    let source = prop_oneof![
        Just(SourceFact::Absent),
        mode().prop_map(|mode| SourceFact::Present { mode }),
    ];
    let from = prop_oneof![
        Just(FromFact::Missing),
        Just(FromFact::Upstream),
        Just(FromFact::Other),
    ];
    let live = prop_oneof![
        Just(LiveFact::Absent),
        (mode(), from, any::<bool>()).prop_map(|(mode, from, differs)| LiveFact::Present {
            mode,
            from,
            differs
        }),
    ];
    (any::<bool>(), source, live).prop_map(|(has_upstream, source, live)| CopyFacts {
        has_upstream,
        source,
        live,
    })
}

fn source_is_update(facts: &CopyFacts) -> bool {
    facts.has_upstream
        && facts.source
            == SourceFact::Present {
                mode: Some(PropagateMode::Update),
            }
}

fn live_is_update_copy(facts: &CopyFacts) -> bool {
    matches!(facts.live, LiveFact::Present { mode: Some(PropagateMode::Update), from, .. } if from != FromFact::Missing)
}

/// An annotation value as found on live objects: absent, a mode, or anything else.
fn annotation_value() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("create".to_owned())),
        Just(Some("update".to_owned())),
        Just(Some(String::new())),
        "[a-z]{1,6}".prop_map(Some),
    ]
}

fn object(
    d: &Domain,
    namespace: &str,
    mode: Option<String>,
    from: Option<String>,
    data: u8,
) -> Value {
    let mut annotations = serde_json::Map::new();
    if let Some(mode) = mode {
        annotations.insert(d.keys.propagate_annotation.clone(), json!(mode));
    }
    if let Some(from) = from {
        annotations.insert(d.keys.from_annotation.clone(), json!(from));
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": namespace, "uid": format!("u{data}"),
                     "annotations": annotations},
        "data": {"v": data.to_string()}})
}

proptest! {
    #[test]
    fn copy_whose_mode_is_not_update_is_never_updated_or_deleted(facts in facts()) {
        let verdict = decide(facts);
        if !source_is_update(&facts) && !live_is_update_copy(&facts) {
            prop_assert!(!matches!(verdict, CopyDecision::Update | CopyDecision::Delete), "{facts:?} -> {verdict:?}");
        }
    }

    #[test]
    fn only_an_update_source_updates_and_only_an_update_copy_is_deleted(facts in facts()) {
        match decide(facts) {
            CopyDecision::Update => prop_assert!(source_is_update(&facts), "{facts:?}"),
            CopyDecision::Delete => prop_assert!(live_is_update_copy(&facts), "{facts:?}"),
            CopyDecision::Create => prop_assert!(facts.has_upstream && facts.live == LiveFact::Absent),
            CopyDecision::Leave(_) => {}
        }
    }

    #[test]
    fn decisions_on_objects_keep_create_copies_and_originals(
        domain in 0..DOMAINS.len(),
        has_upstream in any::<bool>(),
        source in proptest::option::of((annotation_value(), any::<u8>())),
        live in proptest::option::of((annotation_value(), prop_oneof![
            Just(None), Just(Some("up".to_owned())), Just(Some("elsewhere".to_owned())), Just(Some(String::new()))
        ], any::<u8>())),
    ) {
        let d = Domain::new(DOMAINS[domain]);
        let upstream = has_upstream.then_some("up");
        let source_obj = source.clone().map(|(mode, data)| object(&d, "up", mode, None, data));
        let live_obj = live.clone().map(|(mode, from, data)| object(&d, "here", mode, from, data));
        let action = decide_copy(&d.rules, upstream, "here", source_obj.as_ref(), live_obj.as_ref()).unwrap();
        let live_mode = live.as_ref().and_then(|(mode, _, _)| mode.as_deref());
        let live_from = live.as_ref().and_then(|(_, from, _)| from.as_deref()).filter(|f| !f.is_empty());
        let source_mode = source.as_ref().and_then(|(mode, _)| mode.as_deref());
        match &action {
            CopyAction::Delete => {
                prop_assert_eq!(live_mode, Some("update"));
                prop_assert!(live_from.is_some(), "an original was deleted");
            }
            CopyAction::Update(copy) => {
                prop_assert_eq!(source_mode, Some("update"));
                prop_assert_eq!(live_from, upstream, "only copies from the upstream are updated");
                prop_assert!(copy_differs(copy, live_obj.as_ref().unwrap()));
            }
            CopyAction::Create(copy) => {
                prop_assert!(live_obj.is_none());
                prop_assert_eq!(&copy["metadata"]["annotations"][&d.keys.from_annotation], &json!("up"));
            }
            CopyAction::Leave(_) => {}
        }
    }

    #[test]
    fn copies_never_carry_server_fields_and_always_name_their_source(
        domain in 0..DOMAINS.len(),
        labels in proptest::collection::btree_map("[a-z]{1,5}(\\.kubernetes\\.io/[a-z]{1,3})?", "[a-z]{0,4}", 0..5),
        data in any::<u8>(),
    ) {
        let d = Domain::new(DOMAINS[domain]);
        let mut source = object(&d, "up", Some("update".into()), Some("grand".into()), data);
        source["metadata"]["labels"] = json!(labels);
        source["metadata"]["resourceVersion"] = json!("12");
        source["metadata"]["managedFields"] = json!([{"manager": "m"}]);
        source["status"] = json!({"ok": true});
        let copy = build_copy(&d.rules, &source, "here").unwrap();
        let metadata = copy["metadata"].as_object().unwrap();
        let mut fields: Vec<&str> = metadata.keys().map(String::as_str).collect();
        fields.sort_unstable();
        prop_assert_eq!(fields, ["annotations", "labels", "name", "namespace"]);
        prop_assert!(copy.get("status").is_none());
        prop_assert_eq!(&copy["metadata"]["annotations"][&d.keys.from_annotation], &json!("up"));
        prop_assert!(metadata["labels"].as_object().unwrap().keys().all(|k| !k.contains("kubernetes.io/")));
        prop_assert!(!copy_differs(&copy, &copy));
    }

    #[test]
    fn star_matches_exactly_the_keys_without_a_slash(key in "[a-z./-]{0,12}") {
        let star = KeyPattern::parse("*").unwrap();
        prop_assert_eq!(star.matches(&key), !key.contains('/'));
    }

    #[test]
    fn a_plain_key_as_pattern_matches_only_itself(key in "[a-z0-9./-]{1,12}", other in "[a-z0-9./-]{1,12}") {
        let pattern = KeyPattern::parse(&key).unwrap();
        prop_assert!(pattern.matches(&key));
        prop_assert_eq!(pattern.matches(&other), key == other);
    }
}

/// One namespace of a generated tree: its name and the labels that link it upstream.
fn linked_namespace() -> impl Strategy<Value = arbor_policy::propagation::namespace::NamespaceState>
{
    let name = || prop::sample::select(vec!["a", "b", "c", "d", "e", "f"]);
    (
        name(),
        prop::option::of(prop::sample::select(vec!["root", "template", "bogus"])),
        prop::option::of(name()),
        prop::option::of(name()),
    )
        .prop_map(|(name, kind, parent, template)| {
            let keys = arbor_policy::keys::Keys::default();
            let mut namespace = arbor_policy::propagation::namespace::NamespaceState::new(name);
            if let Some(kind) = kind {
                namespace = namespace.with_label(&keys.type_label, kind);
            }
            if let Some(parent) = parent {
                namespace = namespace.with_label(&keys.parent_label, parent);
            }
            if let Some(template) = template {
                namespace = namespace.with_label(&keys.template_label, template);
            }
            namespace
        })
}

proptest! {
    /// The downstream the tree keeps beside its namespaces is what a scan of every namespace
    /// finds, however the tree came to be: built at once, or edited one namespace at a time
    /// (a namespace replaced by one linked elsewhere, or no longer linked, leaves its old
    /// upstream's children).
    #[test]
    fn children_are_the_namespaces_whose_upstream_names_the_namespace(
        built in prop::collection::vec(linked_namespace(), 0..8),
        edits in prop::collection::vec(linked_namespace(), 0..8),
    ) {
        use arbor_policy::propagation::tree::NamespaceTree;
        let keys = arbor_policy::keys::Keys::default();
        let mut tree = NamespaceTree::new(&keys, built);
        for edit in edits {
            tree = tree.with_namespace(edit);
        }
        let rebuilt = NamespaceTree::new(&keys, tree.namespaces().cloned());
        for name in ["a", "b", "c", "d", "e", "f", "root", "template", "bogus"] {
            let scanned: Vec<&str> = tree
                .namespaces()
                .filter(|ns| {
                    ns.role(&keys)
                        .upstream()
                        .is_some_and(|upstream| upstream.name() == name)
                })
                .map(|ns| ns.name.as_str())
                .collect();
            prop_assert_eq!(tree.children(name), scanned.clone(), "edited tree, {}", name);
            prop_assert_eq!(rebuilt.children(name), scanned, "rebuilt tree, {}", name);
        }
    }
}
