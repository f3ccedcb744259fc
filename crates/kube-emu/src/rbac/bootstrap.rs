//! The bootstrap policy written at start when RBAC is on, and the ClusterRole aggregation
//! that kube-controller-manager would run (see the parent module's docs).

use serde_json::Value;

use super::cluster_roles;
use crate::managed::Writer;
use crate::registry::ResourceId;
use crate::selector::LabelSelector;
use crate::state::{State, WriteOptions};
use crate::store::{ObjectKey, Store};

const POLICY: &str = include_str!("bootstrap.yaml");

/// The bootstrap objects, parsed.
pub fn objects() -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(POLICY)
        .expect("the bootstrap policy is valid YAML")
        .into_iter()
        .filter(|object| object.is_object())
        .collect()
}

/// Writes the bootstrap policy into a fresh state.
pub fn install(state: &mut State) {
    let writer = Writer::system();
    for object in objects() {
        let plural = match object["kind"].as_str() {
            Some("ClusterRole") => "clusterroles",
            Some("ClusterRoleBinding") => "clusterrolebindings",
            other => panic!("the bootstrap policy holds only cluster kinds, not {other:?}"),
        };
        let kind = state
            .registry
            .get(&ResourceId::new(super::GROUP, plural))
            .cloned()
            .expect("RBAC kinds are built in");
        state
            .create(&kind, None, object, &writer, &WriteOptions::default())
            .expect("the bootstrap policy is valid");
    }
}

/// The selectors of an aggregated ClusterRole; `None` when it aggregates nothing.
fn selectors(role: &Value) -> Option<Vec<LabelSelector>> {
    let selectors = role
        .get("aggregationRule")?
        .get("clusterRoleSelectors")?
        .as_array()?;
    Some(
        selectors
            .iter()
            .filter_map(|selector| LabelSelector::from_object(selector).ok())
            .collect(),
    )
}

/// The rules `role` aggregates from the other ClusterRoles in `store`, in name order without
/// duplicates (kube-controller-manager's order).
fn aggregated_rules(store: &Store, name: &str, selectors: &[LabelSelector]) -> Vec<Value> {
    let mut rules: Vec<Value> = Vec::new();
    for (key, other) in store.list(&cluster_roles(), None) {
        if key.name == name || !selectors.iter().any(|selector| selector.matches(other)) {
            continue;
        }
        for rule in other
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

/// Fills in the rules of every aggregated ClusterRole, until nothing changes (an aggregated
/// role may itself be aggregated, as `view` is into `edit` and `edit` into `admin`).
pub fn aggregate(store: &mut Store) {
    let roles = store.list(&cluster_roles(), None).count();
    // Each round settles at least one more level of a chain; chains are shorter than the
    // number of roles.
    for _ in 0..=roles {
        let changes: Vec<(ObjectKey, Value)> = store
            .list(&cluster_roles(), None)
            .filter_map(|(key, role)| {
                let selectors = selectors(role)?;
                let rules = aggregated_rules(store, &key.name, &selectors);
                let current = role
                    .get("rules")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                (current != rules).then(|| {
                    let mut updated = (**role).clone();
                    updated["rules"] = Value::Array(rules);
                    (key.clone(), updated)
                })
            })
            .collect();
        if changes.is_empty() {
            return;
        }
        for (key, role) in changes {
            store.put(&cluster_roles(), key, role);
        }
    }
    tracing::warn!("ClusterRole aggregation did not settle");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::rules_of;

    fn rule_count(store: &Store, name: &str) -> usize {
        store
            .get(&cluster_roles(), &ObjectKey::new("", name))
            .map(|role| rules_of(role).len())
            .unwrap_or_default()
    }

    #[test]
    fn the_bootstrap_roles_aggregate_view_into_edit_into_admin() {
        let mut state = State::new(1000);
        install(&mut state);
        let view = rule_count(&state.store, "view");
        let edit = rule_count(&state.store, "edit");
        let admin = rule_count(&state.store, "admin");
        assert!(view > 0, "view aggregates system:aggregate-to-view");
        assert!(
            edit > view,
            "edit holds view's rules and its own: {edit} vs {view}"
        );
        assert!(admin > edit, "admin holds edit's rules and its own");
    }
}
