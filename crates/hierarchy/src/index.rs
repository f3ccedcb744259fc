//! The controller's picture of the cluster: namespaces, SubNamespaces and every object of a
//! watched kind, kept current from watch events.
//!
//! The index is plain data behind a lock, updated by [`crate::watch`] and read by the
//! reconcilers and the gRPC service; it never talks to the API server, so it is tested without
//! one. Each update answers the question the controller must ask next: *which namespaces
//! must be reconciled because of this event?*
//!
//! - A namespace changed: itself (its own upstream may have changed) and its children (what
//!   they receive comes from it).
//! - An object changed or went away: its namespace (it may be a copy to check against its
//!   source, or gain `propagate` from `propagate-generated`) and that namespace's children
//!   (the object may be a source they copy).
//! - A SubNamespace changed: the namespace it names (its spec labels and annotations go there).
//! - The set of namespaces halted by a cycle changed: every namespace that entered or left it,
//!   so propagation resumes below a cycle that was broken.
//!
//! The namespace tree and its cycle report are rebuilt once per namespace change and shared
//! as `Arc`s, so a reconcile reads a consistent snapshot without copying the tree.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use arbor_policy::keys::Keys;
use arbor_policy::object::{GroupKind, GroupVersionKind, ObjectKey};
use arbor_policy::propagation::{
    CycleReport, NamespaceState, NamespaceTree, SubNamespace, controller_of, find_cycles,
};
use serde_json::Value;

/// Objects of one namespace, by kind and name.
type NamespaceObjects = BTreeMap<(GroupKind, String), Value>;

/// The shared index; cheap to clone.
#[derive(Debug, Clone)]
pub struct Index {
    keys: Keys,
    state: Arc<RwLock<IndexState>>,
}

#[derive(Debug)]
struct IndexState {
    namespaces: BTreeMap<String, NamespaceState>,
    tree: Arc<NamespaceTree>,
    cycles: Arc<CycleReport>,
    sub_namespaces: BTreeMap<(String, String), SubNamespace>,
    objects: BTreeMap<String, NamespaceObjects>,
}

/// What a relist of namespaces changed in the index.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespacesRelisted {
    /// The namespaces to reconcile: every namespace listed and every one that vanished.
    pub touched: BTreeSet<String>,
    /// The namespaces the index held that the list no longer has (deleted while the watch
    /// was down), as the index knew them: what depended on them must hear of it, as it would
    /// have from their Deleted events.
    pub vanished: Vec<NamespaceState>,
}

/// What a namespace reconcile needs, read in one go.
#[derive(Debug, Clone)]
pub struct NamespaceView {
    pub namespace: NamespaceState,
    pub tree: Arc<NamespaceTree>,
    pub cycles: Arc<CycleReport>,
    /// The SubNamespace that asked for this namespace, if its parent has one of this name.
    pub sub_namespace: Option<SubNamespace>,
    /// Watched objects in the namespace's upstream (empty without one).
    pub upstream_objects: Vec<Value>,
    /// Watched objects in the namespace itself.
    pub objects: Vec<Value>,
}

impl Index {
    pub fn new(keys: &Keys) -> Self {
        Self {
            keys: keys.clone(),
            state: Arc::new(RwLock::new(IndexState {
                namespaces: BTreeMap::new(),
                tree: Arc::new(NamespaceTree::new(keys, [])),
                cycles: Arc::new(CycleReport::default()),
                sub_namespaces: BTreeMap::new(),
                objects: BTreeMap::new(),
            })),
        }
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, IndexState> {
        // A panic while holding the lock leaves plain data behind; reading it is still sound.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, IndexState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A namespace was added or changed.
    pub fn apply_namespace(&self, namespace: NamespaceState) -> BTreeSet<String> {
        let name = namespace.name.clone();
        let mut state = self.write();
        if state.namespaces.get(&name) == Some(&namespace) {
            return BTreeSet::new();
        }
        state.namespaces.insert(name.clone(), namespace);
        let mut touched = state.rebuild_tree(&self.keys);
        touched.insert(name.clone());
        touched.extend(state.tree.children(&name).into_iter().map(str::to_owned));
        touched
    }

    /// A namespace is gone, with everything in it.
    pub fn delete_namespace(&self, name: &str) -> BTreeSet<String> {
        let mut state = self.write();
        let mut touched: BTreeSet<String> = state
            .tree
            .children(name)
            .into_iter()
            .map(str::to_owned)
            .collect();
        if state.namespaces.remove(name).is_none() {
            return touched;
        }
        state.objects.remove(name);
        touched.extend(state.rebuild_tree(&self.keys));
        touched
    }

    /// The namespaces after a (re)list: the listed set replaces what the index held.
    pub fn replace_namespaces(&self, listed: Vec<NamespaceState>) -> NamespacesRelisted {
        let mut listed: BTreeMap<String, NamespaceState> =
            listed.into_iter().map(|ns| (ns.name.clone(), ns)).collect();
        let mut state = self.write();
        std::mem::swap(&mut state.namespaces, &mut listed);
        let before = listed;
        let vanished: Vec<NamespaceState> = before
            .into_values()
            .filter(|ns| !state.namespaces.contains_key(&ns.name))
            .collect();
        for namespace in &vanished {
            state.objects.remove(&namespace.name);
        }
        state.rebuild_tree(&self.keys);
        // After a relist anything may have changed while the watch was down.
        let mut touched: BTreeSet<String> = state.namespaces.keys().cloned().collect();
        touched.extend(vanished.iter().map(|ns| ns.name.clone()));
        NamespacesRelisted { touched, vanished }
    }

    /// An object of a watched kind was added or changed.
    pub fn apply_object(&self, object: Value) -> BTreeSet<String> {
        self.put(object, |_| true)
    }

    /// An object this controller wrote, before the watch delivers it. `replaced` is the
    /// resourceVersion of the object the write was planned from (`None`: there was none).
    ///
    /// Taken only while the index still holds what the write replaced. Otherwise the watch has
    /// delivered something of this object since the write was planned (the write itself, or a
    /// change after it, such as someone editing a copy the moment it was made), and what the
    /// watch said stands: putting the written object over it would make the index believe an
    /// older state, and no event would come to correct it.
    pub fn apply_written(&self, object: Value, replaced: Option<&str>) -> BTreeSet<String> {
        self.put(object, |held| {
            match (held.map(resource_version), replaced) {
                (None, None) => true,
                (Some(Some(held)), Some(replaced)) => held == replaced,
                _ => false,
            }
        })
    }

    /// An object of a watched kind was deleted.
    pub fn delete_object(&self, object: &Value) -> BTreeSet<String> {
        self.take_out(object, |_| true)
    }

    /// An object this controller deleted, before the watch delivers it: removed only while
    /// the index holds the version deleted (see [`Index::apply_written`]).
    pub fn delete_written(&self, object: &Value) -> BTreeSet<String> {
        self.take_out(object, |held| {
            resource_version(held) == resource_version(object)
        })
    }

    /// Stores `object` when `over` accepts what the index holds of it (`None`: nothing); the
    /// namespaces touched, none when nothing changed.
    fn put(&self, object: Value, over: impl FnOnce(Option<&Value>) -> bool) -> BTreeSet<String> {
        let Some((namespace, id)) = identity(&object) else {
            return BTreeSet::new();
        };
        let mut state = self.write();
        let objects = state.objects.entry(namespace.clone()).or_default();
        let held = objects.get(&id);
        if held == Some(&object) || !over(held) {
            return BTreeSet::new();
        }
        objects.insert(id, object);
        state.touched_by_object_in(&namespace)
    }

    /// Removes what the index holds of `object` when `held` accepts it; the namespaces
    /// touched, none when nothing was removed.
    fn take_out(&self, object: &Value, held: impl FnOnce(&Value) -> bool) -> BTreeSet<String> {
        let Some((namespace, id)) = identity(object) else {
            return BTreeSet::new();
        };
        let mut state = self.write();
        let Some(objects) = state.objects.get_mut(&namespace) else {
            return BTreeSet::new();
        };
        if !objects.get(&id).is_some_and(held) {
            return BTreeSet::new();
        }
        objects.remove(&id);
        state.touched_by_object_in(&namespace)
    }

    /// The objects of one kind after a (re)list: they replace what the index held of that kind.
    pub fn replace_objects(&self, group_kind: &GroupKind, listed: Vec<Value>) -> BTreeSet<String> {
        let mut state = self.write();
        let mut touched_namespaces = BTreeSet::new();
        for (namespace, objects) in state.objects.iter_mut() {
            let before = objects.len();
            objects.retain(|(kind, _), _| kind != group_kind);
            if objects.len() != before {
                touched_namespaces.insert(namespace.clone());
            }
        }
        for object in listed {
            if let Some((namespace, id)) = identity(&object) {
                state
                    .objects
                    .entry(namespace.clone())
                    .or_default()
                    .insert(id, object);
                touched_namespaces.insert(namespace);
            }
        }
        touched_namespaces
            .iter()
            .flat_map(|ns| state.touched_by_object_in(ns))
            .collect()
    }

    /// A SubNamespace was added or changed.
    pub fn apply_sub_namespace(&self, sub_namespace: SubNamespace) -> BTreeSet<String> {
        let key = (sub_namespace.namespace.clone(), sub_namespace.name.clone());
        let child = sub_namespace.name.clone();
        let mut state = self.write();
        if state.sub_namespaces.get(&key) == Some(&sub_namespace) {
            return BTreeSet::new();
        }
        state.sub_namespaces.insert(key, sub_namespace);
        BTreeSet::from([child])
    }

    /// A SubNamespace was deleted.
    pub fn delete_sub_namespace(&self, namespace: &str, name: &str) -> BTreeSet<String> {
        let removed = self
            .write()
            .sub_namespaces
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some();
        if removed {
            BTreeSet::from([name.to_owned()])
        } else {
            BTreeSet::new()
        }
    }

    /// The SubNamespaces after a (re)list.
    pub fn replace_sub_namespaces(&self, listed: Vec<SubNamespace>) -> BTreeSet<String> {
        let mut state = self.write();
        let mut touched: BTreeSet<String> = state
            .sub_namespaces
            .values()
            .map(|s| s.name.clone())
            .collect();
        state.sub_namespaces = listed
            .into_iter()
            .map(|s| ((s.namespace.clone(), s.name.clone()), s))
            .collect();
        touched.extend(state.sub_namespaces.values().map(|s| s.name.clone()));
        touched
    }

    /// Everything a reconcile of `name` reads, or `None` when the namespace is not known.
    pub fn view(&self, name: &str) -> Option<NamespaceView> {
        let state = self.read();
        let namespace = state.namespaces.get(name)?.clone();
        let upstream = namespace
            .role(&self.keys)
            .upstream()
            .map(|u| u.name().to_owned());
        let sub_namespace = namespace
            .parent(&self.keys)
            .and_then(|parent| {
                state
                    .sub_namespaces
                    .get(&(parent.to_owned(), name.to_owned()))
            })
            .cloned();
        Some(NamespaceView {
            upstream_objects: upstream.map(|up| state.objects_in(&up)).unwrap_or_default(),
            objects: state.objects_in(name),
            namespace,
            tree: Arc::clone(&state.tree),
            cycles: Arc::clone(&state.cycles),
            sub_namespace,
        })
    }

    /// The current tree and its cycles.
    pub fn tree(&self) -> (Arc<NamespaceTree>, Arc<CycleReport>) {
        let state = self.read();
        (Arc::clone(&state.tree), Arc::clone(&state.cycles))
    }

    /// One watched object.
    pub fn object(&self, namespace: &str, group_kind: &GroupKind, name: &str) -> Option<Value> {
        self.read()
            .objects
            .get(namespace)?
            .get(&(group_kind.clone(), name.to_owned()))
            .cloned()
    }

    /// The object that controls `object` (its controller ownerReference), when it is watched.
    pub fn controller_of(&self, object: &Value) -> Option<Value> {
        let owner = controller_of(object)?;
        let namespace = arbor_policy::object::namespace(object)?;
        let group_kind =
            GroupVersionKind::from_api_version(&owner.api_version, &owner.kind).group_kind();
        self.object(namespace, &group_kind, &owner.name)
    }

    /// Whether a SubNamespace in `parent` asks for `name`.
    pub fn has_sub_namespace(&self, parent: &str, name: &str) -> bool {
        self.read()
            .sub_namespaces
            .contains_key(&(parent.to_owned(), name.to_owned()))
    }

    /// The SubNamespaces (as `(namespace, name)`) that ask for a namespace called `name`.
    pub fn sub_namespaces_named(&self, name: &str) -> Vec<(String, String)> {
        self.read()
            .sub_namespaces
            .keys()
            .filter(|(_, n)| n == name)
            .cloned()
            .collect()
    }

    /// Every namespace name.
    pub fn namespace_names(&self) -> Vec<String> {
        self.read().namespaces.keys().cloned().collect()
    }
}

impl IndexState {
    /// Rebuilds tree and cycles; returns the namespaces whose halted state changed.
    fn rebuild_tree(&mut self, keys: &Keys) -> BTreeSet<String> {
        let tree = NamespaceTree::new(keys, self.namespaces.values().cloned());
        let cycles = find_cycles(&tree);
        let changed = cycles
            .halted
            .symmetric_difference(&self.cycles.halted)
            .cloned()
            .collect();
        self.tree = Arc::new(tree);
        self.cycles = Arc::new(cycles);
        changed
    }

    fn objects_in(&self, namespace: &str) -> Vec<Value> {
        self.objects
            .get(namespace)
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    fn touched_by_object_in(&self, namespace: &str) -> BTreeSet<String> {
        let mut touched = BTreeSet::from([namespace.to_owned()]);
        touched.extend(self.tree.children(namespace).into_iter().map(str::to_owned));
        touched
    }
}

fn resource_version(object: &Value) -> Option<&str> {
    arbor_policy::object::str_at(object, &["metadata", "resourceVersion"])
}

fn identity(object: &Value) -> Option<(String, (GroupKind, String))> {
    let key = ObjectKey::of(object).ok()?;
    Some((
        key.namespace?.to_string(),
        (key.group_kind, key.name.to_string()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys() -> Keys {
        Keys::default()
    }

    fn ns(name: &str) -> NamespaceState {
        NamespaceState::new(name)
    }

    fn sub(name: &str, parent: &str) -> NamespaceState {
        NamespaceState::new(name).with_label(&keys().parent_label, parent)
    }

    fn secret(namespace: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"namespace": namespace, "name": name}})
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn versioned(namespace: &str, name: &str, version: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"namespace": namespace, "name": name, "resourceVersion": version},
               "data": {"value": value}})
    }

    fn held_value(index: &Index, name: &str) -> Option<Value> {
        index
            .object("child", &GroupKind::new("", "Secret"), name)
            .map(|object| object["data"]["value"].clone())
    }

    #[test]
    fn a_write_is_taken_only_while_the_index_holds_what_it_replaced() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("child"));

        // The watch has not caught up: the written copy stands in for its event.
        assert_eq!(
            index.apply_written(versioned("child", "new", "5", "good"), None),
            names(&["child"])
        );
        assert_eq!(held_value(&index, "new"), Some(json!("good")));

        // A copy made, then edited by someone, and both events delivered before the write's
        // answer is recorded: the edit stands (recording the write would hide it for good).
        index.apply_object(versioned("child", "edited", "7", "good"));
        index.apply_object(versioned("child", "edited", "8", "tampered"));
        assert!(
            index
                .apply_written(versioned("child", "edited", "7", "good"), None)
                .is_empty()
        );
        assert_eq!(held_value(&index, "edited"), Some(json!("tampered")));

        // An update planned from version 8: taken while 8 is held, not once 9 has come.
        index.apply_written(versioned("child", "edited", "9", "good"), Some("8"));
        assert_eq!(held_value(&index, "edited"), Some(json!("good")));
        index.apply_object(versioned("child", "edited", "10", "tampered again"));
        index.apply_written(versioned("child", "edited", "11", "good"), Some("9"));
        assert_eq!(held_value(&index, "edited"), Some(json!("tampered again")));

        // A delete removes only the version it deleted.
        assert!(
            index
                .delete_written(&versioned("child", "edited", "9", "good"))
                .is_empty()
        );
        assert!(held_value(&index, "edited").is_some());
        index.delete_written(&versioned("child", "edited", "10", "tampered again"));
        assert!(held_value(&index, "edited").is_none());
    }

    #[test]
    fn namespace_change_touches_itself_and_its_children() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root").with_label(&keys().type_label, "root"));
        index.apply_namespace(sub("a", "root"));
        index.apply_namespace(sub("b", "a"));
        let touched = index.apply_namespace(
            ns("root")
                .with_label(&keys().type_label, "root")
                .with_label("team", "x"),
        );
        assert_eq!(touched, names(&["a", "root"]));
    }

    #[test]
    fn unchanged_namespace_touches_nothing() {
        let index = Index::new(&keys());
        index.apply_namespace(sub("a", "root"));
        assert!(index.apply_namespace(sub("a", "root")).is_empty());
    }

    #[test]
    fn object_change_touches_its_namespace_and_children() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root"));
        index.apply_namespace(sub("a", "root"));
        index.apply_namespace(sub("b", "root"));
        assert_eq!(
            index.apply_object(secret("root", "s")),
            names(&["a", "b", "root"])
        );
        assert_eq!(
            index.delete_object(&secret("root", "s")),
            names(&["a", "b", "root"])
        );
        assert!(index.delete_object(&secret("root", "s")).is_empty());
    }

    #[test]
    fn view_holds_upstream_objects_and_own_objects() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root"));
        index.apply_namespace(sub("a", "root"));
        index.apply_object(secret("root", "source"));
        index.apply_object(secret("a", "local"));
        let view = index.view("a").unwrap();
        assert_eq!(view.upstream_objects, vec![secret("root", "source")]);
        assert_eq!(view.objects, vec![secret("a", "local")]);
        assert!(index.view("root").unwrap().upstream_objects.is_empty());
        assert!(index.view("missing").is_none());
    }

    #[test]
    fn view_carries_the_sub_namespace_spec_from_the_parent() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root"));
        index.apply_namespace(sub("a", "root"));
        let touched = index.apply_sub_namespace(SubNamespace::new("root", "a"));
        assert_eq!(touched, names(&["a"]));
        assert_eq!(
            index.view("a").unwrap().sub_namespace,
            Some(SubNamespace::new("root", "a"))
        );
        index.delete_sub_namespace("root", "a");
        assert_eq!(index.view("a").unwrap().sub_namespace, None);
    }

    #[test]
    fn forming_and_breaking_a_cycle_touches_every_halted_namespace() {
        let index = Index::new(&keys());
        index.apply_namespace(sub("a", "b"));
        index.apply_namespace(sub("c", "b"));
        let touched = index.apply_namespace(sub("b", "a"));
        assert_eq!(touched, names(&["a", "b", "c"]));
        assert!(index.tree().1.is_halted("c"));
        let touched = index.apply_namespace(ns("b"));
        assert_eq!(touched, names(&["a", "b", "c"]));
        assert!(index.tree().1.halted.is_empty());
    }

    #[test]
    fn relist_replaces_objects_of_that_kind_only() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root"));
        index.apply_object(secret("root", "old"));
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"namespace": "root", "name": "cm"}});
        index.apply_object(config_map.clone());
        index.replace_objects(&GroupKind::new("", "Secret"), vec![secret("root", "new")]);
        let objects = index.view("root").unwrap().objects;
        assert_eq!(objects, vec![config_map, secret("root", "new")]);
    }

    #[test]
    fn deleting_a_namespace_drops_its_objects_and_touches_its_children() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root"));
        index.apply_namespace(sub("a", "root"));
        index.apply_object(secret("root", "s"));
        assert_eq!(index.delete_namespace("root"), names(&["a"]));
        index.apply_namespace(ns("root"));
        assert!(index.view("root").unwrap().objects.is_empty());
    }

    #[test]
    fn relist_reports_the_namespaces_that_vanished_as_they_were() {
        let index = Index::new(&keys());
        index.apply_namespace(ns("root"));
        index.apply_namespace(sub("gone", "root"));
        index.apply_namespace(sub("kept", "root"));
        index.apply_object(secret("gone", "s"));
        let relisted = index.replace_namespaces(vec![ns("root"), sub("kept", "root"), ns("new")]);
        assert_eq!(relisted.vanished, vec![sub("gone", "root")]);
        assert_eq!(relisted.touched, names(&["gone", "kept", "new", "root"]));
        assert!(index.view("gone").is_none());
        assert_eq!(index.tree().0.children("root"), vec!["kept"]);
        index.apply_namespace(sub("gone", "root"));
        assert!(index.view("gone").unwrap().objects.is_empty());
    }

    #[test]
    fn controller_of_finds_the_watched_owner() {
        let index = Index::new(&keys());
        let owner = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"namespace": "root", "name": "owner", "uid": "u1"}});
        index.apply_object(owner.clone());
        let owned = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "root", "name": "s", "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u1", "controller": true}]}});
        assert_eq!(index.controller_of(&owned), Some(owner));
        assert_eq!(index.controller_of(&secret("root", "plain")), None);
    }
}
