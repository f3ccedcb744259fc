//! seeds/001 (Accurate) and seeds/003 (Innu), bullet by bullet; every test runs under
//! `arbor.dev`, `accurate.cybozu.com` and `innu.cybozu.com`.

mod propagation_support;

use arbor_policy::propagation::{
    CopyAction, LeaveReason, NamespaceState, NamespaceTree, PlannedCopy, SubNamespace,
    SubNamespaceAction, SubNamespaceDeletion, build_copy, desired_metadata, finalize_sub_namespace,
    generated_propagation, plan_fan_out, plan_namespace_copies, reconcile_sub_namespace,
};
use propagation_support::{Domain, action, config_maps, created, for_each_domain, updated};
use serde_json::{Value, json};

// ## SubNamespace

#[test]
fn subnamespace_new_creates_sub_namespace() {
    for_each_domain(|d| {
        let sub = SubNamespace::new("team", "team-dev");
        let SubNamespaceAction::CreateNamespace(ns) = reconcile_sub_namespace(&d.rules, &sub, None)
        else {
            panic!("a new SubNamespace must create its namespace");
        };
        assert_eq!(ns.name, "team-dev");
        assert_eq!(ns.parent(&d.keys), Some("team"));

        let existing = d.sub("team-dev", "team");
        assert_eq!(
            reconcile_sub_namespace(&d.rules, &sub, Some(&existing)),
            SubNamespaceAction::Exists
        );
        let squatter = d.root("team-dev");
        assert_eq!(
            reconcile_sub_namespace(&d.rules, &sub, Some(&squatter)),
            SubNamespaceAction::Conflict {
                existing_parent: None
            }
        );
    });
}

#[test]
fn subnamespace_deleting_deletes_sub_namespace_only_when_parent_matches() {
    for_each_domain(|d| {
        let sub = SubNamespace::new("team", "team-dev");
        let child = d.sub("team-dev", "team");
        assert_eq!(
            finalize_sub_namespace(&d.keys, &sub, Some(&child)),
            SubNamespaceDeletion::DeleteNamespace
        );
        let adopted_elsewhere = d.sub("team-dev", "other");
        assert_eq!(
            finalize_sub_namespace(&d.keys, &sub, Some(&adopted_elsewhere)),
            SubNamespaceDeletion::NotItsChild
        );
        let unrelated = NamespaceState::new("team-dev");
        assert_eq!(
            finalize_sub_namespace(&d.keys, &sub, Some(&unrelated)),
            SubNamespaceDeletion::NotItsChild
        );
        assert_eq!(
            finalize_sub_namespace(&d.keys, &sub, None),
            SubNamespaceDeletion::NamespaceMissing
        );
    });
}

// ## Namespaces labelled with `<domain>/template`

fn labelled(ns: NamespaceState) -> NamespaceState {
    ns.with_label("team", "shop")
        .with_label("billing.example.com/unit", "42")
        .with_label("unlisted", "x")
        .with_annotation("owner", "alice")
        .with_annotation("docs.example.com/url", "https://docs")
        .with_annotation("unlisted", "y")
}

fn assert_received_listed_keys(d: &Domain, tree: &NamespaceTree, ns: &str) {
    let got = desired_metadata(&d.rules, tree, ns, None)
        .unwrap()
        .expect("a namespace with an upstream receives metadata");
    assert_eq!(got.labels.get("team").map(String::as_str), Some("shop"));
    assert_eq!(
        got.labels
            .get("billing.example.com/unit")
            .map(String::as_str),
        Some("42")
    );
    assert!(!got.labels.contains_key("unlisted"));
    assert_eq!(
        got.annotations.get("owner").map(String::as_str),
        Some("alice")
    );
    assert_eq!(
        got.annotations
            .get("docs.example.com/url")
            .map(String::as_str),
        Some("https://docs")
    );
    assert!(!got.annotations.contains_key("unlisted"));
    assert!(!got.labels.contains_key(&d.keys.type_label));
    assert!(!got.labels.contains_key(&d.keys.template_label));
}

#[test]
fn template_instance_propagates_labels_and_annotations_from_template() {
    for_each_domain(|d| {
        let tree = d.tree([labelled(d.template("tmpl")), d.instance("app", "tmpl")]);
        assert_received_listed_keys(d, &tree, "app");
    });
}

/// A namespace with an upstream (a template instance or a sub-namespace), and another
/// namespace of the upstream's kind that is not its upstream.
struct Upstreamed {
    tree: NamespaceTree,
    upstream: &'static str,
    namespace: &'static str,
    other: &'static str,
}

impl Upstreamed {
    fn template_instance(d: &Domain) -> Self {
        Self {
            tree: d.tree([
                d.template("tmpl"),
                d.template("old"),
                d.instance("app", "tmpl"),
            ]),
            upstream: "tmpl",
            namespace: "app",
            other: "old",
        }
    }

    fn sub_namespace(d: &Domain) -> Self {
        Self {
            tree: d.tree([d.root("team"), d.root("old"), d.sub("team-dev", "team")]),
            upstream: "team",
            namespace: "team-dev",
            other: "old",
        }
    }

    fn plan(&self, d: &Domain, sources: &[Value], live: &[Value]) -> Vec<PlannedCopy> {
        plan_namespace_copies(&d.rules, &self.tree, self.namespace, sources, live).unwrap()
    }

    fn creates_missing_copies_of_create_resources(&self, d: &Domain) {
        let (up, ns) = (self.upstream, self.namespace);
        let sources = [d.config_map(up, "settings", Some("create"), "v1")];
        let plans = self.plan(d, &sources, &[]);
        let copy = created(action(&plans, ns, "settings"));
        assert_eq!(copy["metadata"]["namespace"], ns);
        assert_eq!(copy["metadata"]["annotations"][&d.keys.from_annotation], up);
        assert_eq!(
            copy["metadata"]["annotations"][&d.keys.propagate_annotation],
            "create"
        );

        // Once it exists, a `create` copy is never touched, even when it differs.
        let live = [d.live_copy(ns, "settings", "create", up, "edited")];
        assert_eq!(
            action(&self.plan(d, &sources, &live), ns, "settings"),
            &CopyAction::Leave(LeaveReason::CreateOnly)
        );
    }

    fn creates_or_updates_copies_of_update_resources(&self, d: &Domain) {
        let (up, ns) = (self.upstream, self.namespace);
        let sources = [
            d.config_map(up, "missing", Some("update"), "v1"),
            d.config_map(up, "stale", Some("update"), "v2"),
            d.config_map(up, "same", Some("update"), "v3"),
        ];
        let same = build_copy(&d.rules, &sources[2], ns).unwrap();
        let live = [d.live_copy(ns, "stale", "update", up, "v1"), same];
        let plans = self.plan(d, &sources, &live);
        created(action(&plans, ns, "missing"));
        let applied = updated(action(&plans, ns, "stale"));
        assert_eq!(applied["data"]["value"], "v2");
        assert_eq!(applied["metadata"]["namespace"], ns);
        assert_eq!(
            action(&plans, ns, "same"),
            &CopyAction::Leave(LeaveReason::UpToDate)
        );
    }

    /// The namespace moved from `other` to its upstream: the copy from `other` goes even though
    /// the upstream has a source of the same name (its copy is created on the next round).
    fn deletes_update_copy_when_from_is_not_upstream(&self, d: &Domain) {
        let ns = self.namespace;
        let sources = [d.config_map(self.upstream, "settings", Some("update"), "v1")];
        let live = [d.live_copy(ns, "settings", "update", self.other, "v1")];
        assert_eq!(
            action(&self.plan(d, &sources, &live), ns, "settings"),
            &CopyAction::Delete
        );
    }

    fn deletes_update_copy_when_upstream_has_no_source(&self, d: &Domain) {
        let (up, ns) = (self.upstream, self.namespace);
        let unrelated = [d.config_map(up, "other", None, "v1")];
        let live = [
            d.live_copy(ns, "gone", "update", up, "v1"),
            d.live_copy(ns, "kept", "create", up, "v1"),
        ];
        let plans = self.plan(d, &unrelated, &live);
        assert_eq!(action(&plans, ns, "gone"), &CopyAction::Delete);
        assert_eq!(
            action(&plans, ns, "kept"),
            &CopyAction::Leave(LeaveReason::KeptNotUpdateMode)
        );
        assert_eq!(
            action(&plans, ns, "other"),
            &CopyAction::Leave(LeaveReason::NothingToCopy)
        );
    }
}

/// Each copy bullet is stated twice in the seed, once for template instances and once for
/// sub-namespaces; one scenario serves both tests.
macro_rules! for_template_instances_and_sub_namespaces {
    ($($scenario:ident: $template_test:ident, $sub_test:ident;)*) => {$(
        #[test]
        fn $template_test() {
            for_each_domain(|d| Upstreamed::template_instance(d).$scenario(d));
        }

        #[test]
        fn $sub_test() {
            for_each_domain(|d| Upstreamed::sub_namespace(d).$scenario(d));
        }
    )*};
}

for_template_instances_and_sub_namespaces! {
    creates_missing_copies_of_create_resources:
        template_instance_creates_missing_copies_of_create_resources,
        sub_namespace_creates_missing_copies_of_create_resources;
    creates_or_updates_copies_of_update_resources:
        template_instance_creates_or_updates_copies_of_update_resources,
        sub_namespace_creates_or_updates_copies_of_update_resources;
    deletes_update_copy_when_from_is_not_upstream:
        template_instance_deletes_update_copy_when_from_is_not_template,
        sub_namespace_deletes_update_copy_when_from_is_not_parent;
    deletes_update_copy_when_upstream_has_no_source:
        template_instance_deletes_update_copy_when_template_has_no_source,
        sub_namespace_deletes_update_copy_when_parent_has_no_source;
}

// ## Namespaces without `<domain>/type` and `<domain>/template`

#[test]
fn namespace_without_type_or_template_deletes_update_copies() {
    for_each_domain(|d| {
        // `app` used to follow `tmpl`; its template label was removed.
        let tree = d.tree([d.template("tmpl"), NamespaceState::new("app")]);
        let live = [
            d.live_copy("app", "update-copy", "update", "tmpl", "v1"),
            d.live_copy("app", "create-copy", "create", "tmpl", "v1"),
            d.config_map("app", "own", Some("update"), "mine"),
        ];
        let sources = [d.config_map("tmpl", "update-copy", Some("update"), "v1")];
        let plans = plan_namespace_copies(&d.rules, &tree, "app", &sources, &live).unwrap();
        assert_eq!(action(&plans, "app", "update-copy"), &CopyAction::Delete);
        assert_eq!(
            action(&plans, "app", "create-copy"),
            &CopyAction::Leave(LeaveReason::KeptNotUpdateMode)
        );
        assert_eq!(
            action(&plans, "app", "own"),
            &CopyAction::Leave(LeaveReason::Original)
        );
    });
}

// ## Template namespace

#[test]
fn template_propagates_labels_and_annotations_to_instances() {
    for_each_domain(|d| {
        let tree = d.tree([
            labelled(d.template("tmpl")),
            d.instance("app", "tmpl"),
            d.instance("web", "tmpl"),
            d.root("other"),
        ]);
        let mut instances = tree.children("tmpl");
        instances.sort_unstable();
        assert_eq!(instances, ["app", "web"]);
        for instance in instances {
            assert_received_listed_keys(d, &tree, instance);
        }
    });
}

// ## Root namespace

#[test]
fn root_propagates_labels_and_annotations_to_sub_namespaces() {
    for_each_domain(|d| {
        let tree = d.tree([
            labelled(d.root("team")),
            d.sub("team-dev", "team"),
            d.sub("team-prod", "team"),
        ]);
        assert_eq!(tree.children("team"), ["team-dev", "team-prod"]);
        for sub in tree.children("team") {
            assert_received_listed_keys(d, &tree, sub);
        }
        assert_eq!(
            desired_metadata(&d.rules, &tree, "team", None).unwrap(),
            None
        );
    });
}

// ## Sub-namespace

#[test]
fn sub_namespace_propagates_labels_and_annotations_from_parent() {
    for_each_domain(|d| {
        let tree = d.tree([
            d.root("team"),
            labelled(d.sub("team-dev", "team")),
            d.sub("team-dev-a", "team-dev").with_label("team", "stale"),
        ]);
        assert_received_listed_keys(d, &tree, "team-dev-a");
        let got = desired_metadata(&d.rules, &tree, "team-dev-a", None)
            .unwrap()
            .unwrap();
        assert_eq!(got.labels[&d.keys.parent_label], "team-dev");

        // The SubNamespace's spec adds the keys subNamespace*Keys select, over the parent's.
        let mut spec = SubNamespace::new("team-dev", "team-dev-a");
        spec.labels.insert("app".into(), "shop".into());
        spec.labels.insert("team".into(), "ignored".into());
        spec.annotations.insert("note".into(), "hello".into());
        let got = desired_metadata(&d.rules, &tree, "team-dev-a", Some(&spec))
            .unwrap()
            .unwrap();
        assert_eq!(got.labels["app"], "shop");
        assert_eq!(got.labels["team"], "shop");
        assert_eq!(got.annotations["note"], "hello");
        let current = tree.get("team-dev-a").unwrap();
        assert!(!got.is_satisfied_by(current));
    });
}

#[test]
fn sub_namespace_propagates_its_labels_and_annotations_to_its_sub_namespaces() {
    for_each_domain(|d| {
        // The root's values reach the grandchild through the sub-namespace between them,
        // even before that sub-namespace was updated.
        let tree = d.tree([
            labelled(d.root("team")),
            d.sub("team-dev", "team").with_label("team", "outdated"),
            d.sub("team-dev-a", "team-dev"),
        ]);
        assert_eq!(tree.children("team-dev"), ["team-dev-a"]);
        assert_received_listed_keys(d, &tree, "team-dev-a");

        // A value set on the sub-namespace itself, absent from the root, flows on down too.
        let tree = d.tree([
            d.root("team"),
            d.sub("team-dev", "team").with_label("team", "dev-only"),
            d.sub("team-dev-a", "team-dev"),
        ]);
        let got = desired_metadata(&d.rules, &tree, "team-dev-a", None)
            .unwrap()
            .unwrap();
        assert_eq!(got.labels["team"], "dev-only");
    });
}

// ## Watched namespace-scoped resources

#[test]
fn any_namespaced_kind_is_propagated() {
    for_each_domain(|d| {
        let tree = d.tree([d.root("team"), d.sub("team-dev", "team")]);
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader", "namespace": "team",
                         "annotations": {d.keys.propagate_annotation.as_str(): "update"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        });
        let custom = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "reader", "namespace": "team",
                         "annotations": {d.keys.propagate_annotation.as_str(): "create"}},
            "spec": {"size": 3}
        });
        let plans =
            plan_namespace_copies(&d.rules, &tree, "team-dev", &[role, custom], &[]).unwrap();
        assert_eq!(plans.len(), 2, "same name, different kinds: {plans:#?}");
        for plan in &plans {
            let copy = created(&plan.action);
            assert_eq!(copy["metadata"]["namespace"], "team-dev");
        }
        assert_eq!(
            created(&plans[0].action)["spec"]["size"],
            3,
            "kinds are paired by group and kind: {plans:#?}"
        );
    });
}

// ### Resources annotated with `<domain>/from`

/// The plans for the ConfigMap `settings` of `source_namespace` in each of its children.
fn fan_out_settings<'a>(
    d: &Domain,
    tree: &NamespaceTree,
    source_namespace: &str,
    source: Option<&Value>,
    live_in: impl Fn(&str) -> Option<&'a Value>,
) -> Vec<PlannedCopy> {
    plan_fan_out(
        &d.rules,
        tree,
        source_namespace,
        &config_maps(),
        "settings",
        source,
        live_in,
    )
    .unwrap()
}

#[test]
fn from_copy_is_updated_when_parent_resource_is_update_and_differs() {
    for_each_domain(|d| {
        let tree = d.tree([d.root("team"), d.sub("team-dev", "team")]);
        let source = d.config_map("team", "settings", Some("update"), "new");
        let live = d.live_copy("team-dev", "settings", "update", "team", "old");
        let plans = fan_out_settings(d, &tree, "team", Some(&source), |_| Some(&live));
        assert_eq!(
            updated(action(&plans, "team-dev", "settings"))["data"]["value"],
            "new"
        );

        let not_update = d.config_map("team", "settings", Some("create"), "new");
        let plans = fan_out_settings(d, &tree, "team", Some(&not_update), |_| Some(&live));
        assert!(matches!(
            action(&plans, "team-dev", "settings"),
            CopyAction::Leave(_)
        ));
    });
}

#[test]
fn from_update_copy_is_deleted_when_parent_resource_is_missing() {
    for_each_domain(|d| {
        let tree = d.tree([d.root("team"), d.sub("team-dev", "team")]);
        let live = d.live_copy("team-dev", "settings", "update", "team", "v1");
        let plans = fan_out_settings(d, &tree, "team", None, |_| Some(&live));
        assert_eq!(action(&plans, "team-dev", "settings"), &CopyAction::Delete);
    });
}

#[test]
fn from_orphan_rule_deletes_copies_whose_source_vanished_while_stopped() {
    for_each_domain(|d| {
        // At start the controller lists everything; the sources of `a` and `b` were deleted
        // while it was stopped, `c` still exists.
        let tree = d.tree([
            d.root("team"),
            d.sub("team-dev", "team"),
            d.sub("team-dev-a", "team-dev"),
        ]);
        let team = [d.config_map("team", "c", Some("update"), "v1")];
        let dev = [
            d.live_copy("team-dev", "a", "update", "team", "v1"),
            d.live_copy("team-dev", "c", "update", "team", "v1"),
        ];
        let dev_a = [d.live_copy("team-dev-a", "b", "update", "team-dev", "v1")];
        let plans = plan_namespace_copies(&d.rules, &tree, "team-dev", &team, &dev).unwrap();
        assert_eq!(action(&plans, "team-dev", "a"), &CopyAction::Delete);
        assert_eq!(
            action(&plans, "team-dev", "c"),
            &CopyAction::Leave(LeaveReason::UpToDate)
        );
        let plans = plan_namespace_copies(&d.rules, &tree, "team-dev-a", &dev, &dev_a).unwrap();
        assert_eq!(action(&plans, "team-dev-a", "b"), &CopyAction::Delete);
    });
}

// ### Resources annotated with `<domain>/propagate`

fn three_level_tree(d: &Domain) -> NamespaceTree {
    d.tree([
        d.root("team"),
        d.sub("team-dev", "team"),
        d.sub("team-prod", "team"),
        d.sub("team-dev-a", "team-dev"),
        NamespaceState::new("unrelated"),
    ])
}

#[test]
fn propagate_create_creates_copy_in_all_sub_namespaces_if_missing() {
    for_each_domain(|d| {
        let tree = three_level_tree(d);
        let source = d.config_map("team", "settings", Some("create"), "v1");
        let existing = d.live_copy("team-prod", "settings", "create", "team", "edited");
        let plans = fan_out_settings(d, &tree, "team", Some(&source), |ns| {
            (ns == "team-prod").then_some(&existing)
        });
        assert_eq!(
            plans.len(),
            2,
            "only the sub-namespaces of team: {plans:#?}"
        );
        created(action(&plans, "team-dev", "settings"));
        assert_eq!(
            action(&plans, "team-prod", "settings"),
            &CopyAction::Leave(LeaveReason::CreateOnly)
        );

        // The copy carries the mode, so it propagates onward to team-dev-a.
        let copy = created(action(&plans, "team-dev", "settings")).clone();
        let plans = fan_out_settings(d, &tree, "team-dev", Some(&copy), |_| None);
        let grandchild = created(action(&plans, "team-dev-a", "settings"));
        assert_eq!(
            grandchild["metadata"]["annotations"][&d.keys.from_annotation],
            "team-dev"
        );
    });
}

#[test]
fn propagate_update_creates_or_updates_copy_in_all_sub_namespaces() {
    for_each_domain(|d| {
        let tree = three_level_tree(d);
        let source = d.config_map("team", "settings", Some("update"), "v2");
        let stale = d.live_copy("team-prod", "settings", "update", "team", "v1");
        let plans = fan_out_settings(d, &tree, "team", Some(&source), |ns| {
            (ns == "team-prod").then_some(&stale)
        });
        assert_eq!(
            created(action(&plans, "team-dev", "settings"))["data"]["value"],
            "v2"
        );
        assert_eq!(
            updated(action(&plans, "team-prod", "settings"))["data"]["value"],
            "v2"
        );
    });
}

#[test]
fn propagate_deleting_source_deletes_update_copies_in_sub_namespaces() {
    for_each_domain(|d| {
        let tree = three_level_tree(d);
        let update_copy = d.live_copy("team-dev", "settings", "update", "team", "v1");
        let create_copy = d.live_copy("team-prod", "settings", "create", "team", "v1");
        let plans = fan_out_settings(d, &tree, "team", None, |ns| match ns {
            "team-dev" => Some(&update_copy),
            "team-prod" => Some(&create_copy),
            _ => None,
        });
        assert_eq!(action(&plans, "team-dev", "settings"), &CopyAction::Delete);
        assert_eq!(
            action(&plans, "team-prod", "settings"),
            &CopyAction::Leave(LeaveReason::KeptNotUpdateMode)
        );
    });
}

// ### Resources owned by an owner annotated with `<domain>/propagate-generated`

fn owned_secret(owner_uid: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-credentials", "namespace": "team",
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Database",
                                 "name": "db", "uid": owner_uid, "controller": true}]}
    })
}

fn owner(d: &Domain, mode: Option<&str>) -> Value {
    let mut owner = json!({"apiVersion": "example.com/v1", "kind": "Database",
        "metadata": {"name": "db", "namespace": "team", "uid": "u-db", "annotations": {}}});
    if let Some(mode) = mode {
        owner["metadata"]["annotations"][&d.keys.propagate_generated_annotation] = json!(mode);
    }
    owner
}

#[test]
fn propagate_generated_annotates_owned_resource_with_owner_mode() {
    for_each_domain(|d| {
        for mode in ["create", "update"] {
            let added =
                generated_propagation(&d.keys, &owned_secret("u-db"), Some(&owner(d, Some(mode))))
                    .expect("the owned object gets the owner's mode");
            assert_eq!(added.key, d.keys.propagate_annotation);
            assert_eq!(added.value, mode);
        }
        // Not when the object already has the annotation, the owner has none, or the owner
        // passed in is not the object's controller.
        let mut annotated = owned_secret("u-db");
        annotated["metadata"]["annotations"] =
            json!({d.keys.propagate_annotation.as_str(): "create"});
        assert_eq!(
            generated_propagation(&d.keys, &annotated, Some(&owner(d, Some("update")))),
            None
        );
        assert_eq!(
            generated_propagation(&d.keys, &owned_secret("u-db"), Some(&owner(d, None))),
            None
        );
        assert_eq!(
            generated_propagation(
                &d.keys,
                &owned_secret("u-other"),
                Some(&owner(d, Some("update")))
            ),
            None
        );
        assert_eq!(
            generated_propagation(&d.keys, &owned_secret("u-db"), None),
            None
        );
    });
}

#[test]
fn propagate_generated_ignores_non_controller_owners() {
    for_each_domain(|d| {
        let mut secret = owned_secret("u-db");
        secret["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert_eq!(
            generated_propagation(&d.keys, &secret, Some(&owner(d, Some("update")))),
            None
        );
    });
}
