//! The namespace-tree rules of the admission webhook, each allowed and denied.

mod propagation_support;

use arbor_policy::propagation::{
    Admission, NamespaceState, NamespaceTree, NamingPolicySpec, PropagationConfig, SubNamespace,
    TreeRule, review_namespace_create, review_namespace_delete, review_namespace_update,
    review_sub_namespace_create, review_sub_namespace_delete,
};
use propagation_support::{Domain, for_each_domain};

fn forest(d: &Domain) -> NamespaceTree {
    d.tree([
        d.root("root"),
        d.sub("dev", "root"),
        d.sub("dev-a", "dev"),
        d.template("tmpl"),
        d.instance("app", "tmpl"),
        NamespaceState::new("plain"),
        d.root("lonely-root"),
        d.template("unused-template"),
    ])
}

#[track_caller]
fn assert_denied(admission: Admission, rule: TreeRule) {
    match &admission {
        Admission::Denied { rule: got, message } => {
            assert_eq!(*got, rule, "{message}");
            assert!(!message.is_empty());
        }
        Admission::Allowed => panic!("expected {rule} to deny, but it was allowed"),
    }
}

#[test]
fn valid_namespaces_are_allowed() {
    for_each_domain(|d| {
        let tree = forest(d);
        for ns in [
            d.sub("new", "root"),
            d.sub("new", "dev-a"),
            d.instance("new", "tmpl"),
            d.root("new").with_label(&d.keys.template_label, "tmpl"),
            NamespaceState::new("new"),
        ] {
            assert_eq!(
                review_namespace_create(&tree, &ns),
                Admission::Allowed,
                "{ns:?}"
            );
        }
    });
}

#[test]
fn self_reference_as_parent_or_template_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        assert_denied(
            review_namespace_create(&tree, &d.sub("me", "me")),
            TreeRule::SelfReference,
        );
        assert_denied(
            review_namespace_create(&tree, &d.instance("me", "me")),
            TreeRule::SelfReference,
        );
        let old = tree.get("plain").unwrap().clone();
        assert_denied(
            review_namespace_update(&tree, &old, &d.instance("plain", "plain")),
            TreeRule::SelfReference,
        );
    });
}

#[test]
fn sub_namespace_with_type_or_template_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        assert_denied(
            review_namespace_create(
                &tree,
                &d.sub("x", "root").with_label(&d.keys.type_label, "root"),
            ),
            TreeRule::SubNamespaceShape,
        );
        assert_denied(
            review_namespace_create(
                &tree,
                &d.sub("x", "root")
                    .with_label(&d.keys.template_label, "tmpl"),
            ),
            TreeRule::SubNamespaceShape,
        );
    });
}

#[test]
fn cycle_through_parent_links_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        let old = tree.get("dev").unwrap().clone();
        let admission = review_namespace_update(&tree, &old, &d.sub("dev", "dev-a"));
        assert_denied(admission.clone(), TreeRule::Cycle);
        let Admission::Denied { message, .. } = admission else {
            unreachable!()
        };
        assert!(message.contains("dev -> dev-a -> dev"), "{message}");
    });
}

#[test]
fn cycle_through_template_links_is_denied() {
    for_each_domain(|d| {
        let tree = d.tree([
            d.template("t1"),
            d.template("t2").with_label(&d.keys.template_label, "t1"),
        ]);
        let old = tree.get("t1").unwrap().clone();
        let new = old.clone().with_label(&d.keys.template_label, "t2");
        assert_denied(review_namespace_update(&tree, &old, &new), TreeRule::Cycle);
    });
}

#[test]
fn dangling_parent_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        for parent in ["missing", "plain", "tmpl", "app"] {
            assert_denied(
                review_namespace_create(&tree, &d.sub("x", parent)),
                TreeRule::DanglingParent,
            );
        }
    });
}

#[test]
fn dangling_template_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        for template in ["missing", "root", "dev", "plain"] {
            assert_denied(
                review_namespace_create(&tree, &d.instance("x", template)),
                TreeRule::DanglingTemplate,
            );
        }
    });
}

#[test]
fn deleting_namespace_with_sub_namespaces_is_denied_unless_cascading_deletion_is_allowed() {
    for_each_domain(|d| {
        let tree = forest(d);
        for name in ["root", "dev"] {
            let ns = tree.get(name).unwrap();
            assert_denied(
                review_namespace_delete(&tree, ns, false),
                TreeRule::HasChildren,
            );
            assert_eq!(review_namespace_delete(&tree, ns, true), Admission::Allowed);
        }
        for leaf in ["dev-a", "lonely-root", "plain", "app"] {
            let ns = tree.get(leaf).unwrap();
            assert_eq!(
                review_namespace_delete(&tree, ns, false),
                Admission::Allowed,
                "{leaf}"
            );
        }
    });
}

#[test]
fn deleting_template_with_instances_is_denied_even_with_cascading_deletion() {
    for_each_domain(|d| {
        let tree = forest(d);
        let tmpl = tree.get("tmpl").unwrap();
        assert_denied(
            review_namespace_delete(&tree, tmpl, true),
            TreeRule::HasChildren,
        );
        let unused = tree.get("unused-template").unwrap();
        assert_eq!(
            review_namespace_delete(&tree, unused, false),
            Admission::Allowed
        );
    });
}

#[test]
fn removing_root_type_while_it_has_sub_namespaces_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        let old = tree.get("root").unwrap().clone();
        assert_denied(
            review_namespace_update(&tree, &old, &NamespaceState::new("root")),
            TreeRule::RoleRemovedWithChildren,
        );
        let lonely = tree.get("lonely-root").unwrap().clone();
        assert_eq!(
            review_namespace_update(&tree, &lonely, &NamespaceState::new("lonely-root")),
            Admission::Allowed
        );
    });
}

#[test]
fn removing_template_type_while_it_has_instances_is_denied() {
    for_each_domain(|d| {
        let tree = forest(d);
        let old = tree.get("tmpl").unwrap().clone();
        assert_denied(
            review_namespace_update(&tree, &old, &d.root("tmpl")),
            TreeRule::RoleRemovedWithChildren,
        );
        let unused = tree.get("unused-template").unwrap().clone();
        assert_eq!(
            review_namespace_update(&tree, &unused, &NamespaceState::new("unused-template")),
            Admission::Allowed
        );
    });
}

#[test]
fn sub_namespace_losing_its_parent_while_it_has_sub_namespaces_is_denied_unless_it_becomes_root() {
    for_each_domain(|d| {
        let tree = forest(d);
        let old = tree.get("dev").unwrap().clone();
        assert_denied(
            review_namespace_update(&tree, &old, &NamespaceState::new("dev")),
            TreeRule::RoleRemovedWithChildren,
        );
        assert_eq!(
            review_namespace_update(&tree, &old, &d.root("dev")),
            Admission::Allowed
        );
    });
}

#[test]
fn update_that_keeps_the_hierarchy_labels_is_allowed_even_in_a_broken_tree() {
    for_each_domain(|d| {
        let tree = d.tree([d.sub("orphan", "gone")]);
        let old = tree.get("orphan").unwrap().clone();
        let new = old.clone().with_label("team", "x");
        assert_eq!(
            review_namespace_update(&tree, &old, &new),
            Admission::Allowed
        );
        let moved = d.sub("orphan", "still-gone");
        assert_denied(
            review_namespace_update(&tree, &old, &moved),
            TreeRule::DanglingParent,
        );
    });
}

#[test]
fn subnamespace_parent_must_be_root_or_sub() {
    for_each_domain(|d| {
        let tree = forest(d);
        for parent in ["root", "dev", "dev-a"] {
            assert_eq!(
                review_sub_namespace_create(&d.rules, &tree, &SubNamespace::new(parent, "new")),
                Admission::Allowed,
                "{parent}"
            );
        }
        for parent in ["plain", "tmpl", "app", "missing"] {
            assert_denied(
                review_sub_namespace_create(&d.rules, &tree, &SubNamespace::new(parent, "new")),
                TreeRule::ParentNotRootOrSub,
            );
        }
    });
}

#[test]
fn subnamespace_named_like_its_namespace_is_denied() {
    for_each_domain(|d| {
        assert_denied(
            review_sub_namespace_create(&d.rules, &forest(d), &SubNamespace::new("dev", "dev")),
            TreeRule::SelfReference,
        );
    });
}

#[test]
fn subnamespace_below_a_cycle_or_a_broken_chain_is_denied() {
    for_each_domain(|d| {
        let tree = d.tree([d.sub("a", "b"), d.sub("b", "a"), d.sub("orphan", "gone")]);
        assert_denied(
            review_sub_namespace_create(&d.rules, &tree, &SubNamespace::new("a", "new")),
            TreeRule::Cycle,
        );
        assert_denied(
            review_sub_namespace_create(&d.rules, &tree, &SubNamespace::new("orphan", "new")),
            TreeRule::DanglingParent,
        );
    });
}

#[test]
fn naming_policy_applies_below_a_matching_root_with_capture_substitution() {
    for_each_domain(|d| {
        let rules = PropagationConfig {
            naming_policies: vec![
                NamingPolicySpec {
                    root: "^app-(?P<team>[a-z0-9]+)$".into(),
                    match_pattern: "^app-${team}-[a-z]+$".into(),
                },
                NamingPolicySpec {
                    root: "^(svc)$".into(),
                    match_pattern: "^${1}-".into(),
                },
            ],
            ..Default::default()
        }
        .compile(&d.keys)
        .unwrap();
        let tree = d.tree([
            d.root("app-shop"),
            d.sub("app-shop-dev", "app-shop"),
            d.root("svc"),
            d.root("other"),
        ]);
        let review = |parent: &str, name: &str| {
            review_sub_namespace_create(&rules, &tree, &SubNamespace::new(parent, name))
        };
        assert_eq!(review("app-shop", "app-shop-prod"), Admission::Allowed);
        assert_eq!(review("app-shop-dev", "app-shop-qa"), Admission::Allowed);
        assert_denied(
            review("app-shop-dev", "app-cart-qa"),
            TreeRule::NamingPolicy,
        );
        assert_denied(review("app-shop", "shop-prod"), TreeRule::NamingPolicy);
        assert_eq!(review("svc", "svc-api"), Admission::Allowed);
        assert_denied(review("svc", "api"), TreeRule::NamingPolicy);
        assert_eq!(review("other", "anything"), Admission::Allowed);
    });
}

#[test]
fn deleting_subnamespace_whose_namespace_has_sub_namespaces_is_denied_unless_cascading() {
    for_each_domain(|d| {
        let tree = forest(d);
        let sub = SubNamespace::new("root", "dev");
        assert_denied(
            review_sub_namespace_delete(&tree, &sub, false),
            TreeRule::HasChildren,
        );
        assert_eq!(
            review_sub_namespace_delete(&tree, &sub, true),
            Admission::Allowed
        );
        let leaf = SubNamespace::new("dev", "dev-a");
        assert_eq!(
            review_sub_namespace_delete(&tree, &leaf, false),
            Admission::Allowed
        );
        // A SubNamespace whose name is taken by a namespace of another parent deletes nothing.
        let stranger = SubNamespace::new("lonely-root", "dev");
        assert_eq!(
            review_sub_namespace_delete(&tree, &stranger, false),
            Admission::Allowed
        );
    });
}
