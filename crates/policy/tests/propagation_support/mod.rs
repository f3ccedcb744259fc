//! Fixtures shared by the propagation tests: one configuration per key domain, namespaces of
//! each role, and source objects.

#![allow(dead_code)]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use arbor_policy::keys::{ACCURATE_DOMAIN, DEFAULT_DOMAIN, INNU_DOMAIN, Keys};
use arbor_policy::object::GroupKind;
use arbor_policy::propagation::{
    CopyAction, NamespaceState, NamespaceTree, PlannedCopy, PropagationConfig, PropagationRules,
};
use serde_json::{Value, json};

/// The three domains every seed test runs under.
pub const DOMAINS: [&str; 3] = [DEFAULT_DOMAIN, ACCURATE_DOMAIN, INNU_DOMAIN];

/// One key domain with the test configuration.
pub struct Domain {
    pub keys: Keys,
    pub rules: PropagationRules,
}

/// Runs `test` once per domain; a failure names the domain it happened under.
pub fn for_each_domain(test: impl Fn(&Domain)) {
    for name in DOMAINS {
        let domain = Domain::new(name);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| test(&domain))) {
            eprintln!("failed under domain {name}");
            resume_unwind(panic);
        }
    }
}

impl Domain {
    pub fn new(domain: &str) -> Self {
        let keys = Keys::for_domain(domain).expect("test domains are valid");
        let rules = PropagationConfig {
            label_keys: vec!["team".into(), "*.example.com/*".into()],
            annotation_keys: vec!["owner".into(), "*.example.com/*".into()],
            sub_namespace_label_keys: vec!["app".into()],
            sub_namespace_annotation_keys: vec!["note".into()],
            propagate_label_key_excludes: vec!["*kubernetes.io/*".into()],
            propagate_annotation_key_excludes: vec!["*kubernetes.io/*".into()],
            ..Default::default()
        }
        .compile(&keys)
        .expect("the test configuration is valid");
        Self { keys, rules }
    }

    pub fn root(&self, name: &str) -> NamespaceState {
        NamespaceState::new(name).with_label(&self.keys.type_label, "root")
    }

    pub fn template(&self, name: &str) -> NamespaceState {
        NamespaceState::new(name).with_label(&self.keys.type_label, "template")
    }

    pub fn sub(&self, name: &str, parent: &str) -> NamespaceState {
        NamespaceState::new(name).with_label(&self.keys.parent_label, parent)
    }

    pub fn instance(&self, name: &str, template: &str) -> NamespaceState {
        NamespaceState::new(name).with_label(&self.keys.template_label, template)
    }

    pub fn tree(&self, namespaces: impl IntoIterator<Item = NamespaceState>) -> NamespaceTree {
        NamespaceTree::new(&self.keys, namespaces)
    }

    /// A ConfigMap `name` in `namespace`, annotated `propagate=<mode>` when a mode is given.
    pub fn config_map(&self, namespace: &str, name: &str, mode: Option<&str>, data: &str) -> Value {
        let mut object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
                         "resourceVersion": "1", "labels": {"team": "a"}, "annotations": {}},
            "data": {"value": data}
        });
        if let Some(mode) = mode {
            object["metadata"]["annotations"][&self.keys.propagate_annotation] = json!(mode);
        }
        object
    }

    /// A live object that is a copy made from `from` with `mode`, as the API server returns it.
    pub fn live_copy(
        &self,
        namespace: &str,
        name: &str,
        mode: &str,
        from: &str,
        data: &str,
    ) -> Value {
        let mut object = self.config_map(namespace, name, Some(mode), data);
        object["metadata"]["annotations"][&self.keys.from_annotation] = json!(from);
        object
    }
}

pub fn config_maps() -> GroupKind {
    GroupKind::new("", "ConfigMap")
}

/// The action planned for `name` in `namespace`.
pub fn action<'a>(plans: &'a [PlannedCopy], namespace: &str, name: &str) -> &'a CopyAction {
    &plans
        .iter()
        .find(|p| p.namespace == namespace && p.name == name)
        .unwrap_or_else(|| panic!("no plan for {namespace}/{name} in {plans:#?}"))
        .action
}

/// The object a Create action makes, failing on any other action.
pub fn created(action: &CopyAction) -> &Value {
    match action {
        CopyAction::Create(copy) => copy,
        other => panic!("expected Create, got {other:?}"),
    }
}

/// The object an Update action applies, failing on any other action.
pub fn updated(action: &CopyAction) -> &Value {
    match action {
        CopyAction::Update(copy) => copy,
        other => panic!("expected Update, got {other:?}"),
    }
}
