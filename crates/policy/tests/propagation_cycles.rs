//! Cycle detection over parent and template links, and the namespaces that must halt.

mod propagation_support;

use arbor_policy::propagation::{NamespaceState, TreeError, desired_metadata, find_cycles};
use propagation_support::for_each_domain;

#[test]
fn healthy_tree_has_no_cycle_and_halts_nothing() {
    for_each_domain(|d| {
        let tree = d.tree([
            d.root("r"),
            d.sub("a", "r"),
            d.sub("b", "a"),
            d.template("t"),
            d.instance("i", "t"),
            d.sub("lost", "missing"),
        ]);
        let report = find_cycles(&tree);
        assert!(report.cycles.is_empty(), "{report:?}");
        assert!(report.halted.is_empty());
    });
}

#[test]
fn parent_cycle_is_reported_in_link_order_and_halts_everything_below_it() {
    for_each_domain(|d| {
        let tree = d.tree([
            d.sub("x", "z"),
            d.sub("y", "x"),
            d.sub("z", "y"),
            d.sub("below", "y"),
            d.sub("further-below", "below"),
            d.root("r"),
            d.sub("fine", "r"),
        ]);
        let report = find_cycles(&tree);
        // x's parent is z, z's parent is y, y's parent is x.
        assert_eq!(report.cycles, [["x", "z", "y"]]);
        let halted: Vec<&str> = report.halted.iter().map(String::as_str).collect();
        assert_eq!(halted, ["below", "further-below", "x", "y", "z"]);
        assert!(!report.is_halted("fine"));
        assert_eq!(
            report.cycle_halting("further-below", &tree),
            Some(&["x".to_owned(), "z".to_owned(), "y".to_owned()][..])
        );
        assert_eq!(report.cycle_halting("fine", &tree), None);
    });
}

#[test]
fn cycle_through_template_and_parent_links_is_found() {
    for_each_domain(|d| {
        // r is a root following template t; t follows s as its template; s is a sub of r.
        let tree = d.tree([
            d.root("r").with_label(&d.keys.template_label, "t"),
            d.template("t").with_label(&d.keys.template_label, "s"),
            d.sub("s", "r"),
        ]);
        let report = find_cycles(&tree);
        assert_eq!(report.cycles, [["r", "t", "s"]]);
    });
}

#[test]
fn self_link_is_a_cycle_of_one() {
    for_each_domain(|d| {
        let tree = d.tree([d.sub("me", "me"), d.instance("follower", "me")]);
        let report = find_cycles(&tree);
        assert_eq!(report.cycles, [["me"]]);
        assert!(report.is_halted("follower"));
    });
}

#[test]
fn separate_cycles_are_each_reported_once() {
    for_each_domain(|d| {
        let tree = d.tree([
            d.sub("a", "b"),
            d.sub("b", "a"),
            d.template("t1").with_label(&d.keys.template_label, "t2"),
            d.template("t2").with_label(&d.keys.template_label, "t1"),
        ]);
        assert_eq!(find_cycles(&tree).cycles, [["a", "b"], ["t1", "t2"]]);
    });
}

#[test]
fn template_label_of_a_sub_namespace_is_not_a_link() {
    for_each_domain(|d| {
        // Propagation ignores a sub-namespace's template, so it cannot close a cycle.
        let tree = d.tree([
            d.root("r"),
            d.sub("s", "r").with_label(&d.keys.template_label, "t"),
            d.template("t").with_label(&d.keys.template_label, "s"),
        ]);
        assert!(find_cycles(&tree).cycles.is_empty());
    });
}

#[test]
fn metadata_of_a_namespace_below_a_cycle_is_refused() {
    for_each_domain(|d| {
        let tree = d.tree([d.sub("a", "b"), d.sub("b", "a"), d.sub("c", "a")]);
        let err = desired_metadata(&d.rules, &tree, "c", None).unwrap_err();
        assert_eq!(
            err,
            TreeError::Cycle {
                namespace: "c".into(),
                members: vec!["a".into(), "b".into()]
            }
        );
        let dangling = d.tree([NamespaceState::new("x"), d.sub("y", "gone")]);
        assert!(matches!(
            desired_metadata(&d.rules, &dangling, "y", None),
            Err(TreeError::MissingUpstream { .. })
        ));
    });
}
