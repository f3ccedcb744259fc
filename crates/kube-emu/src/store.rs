//! The object store: one ordered map per resource, a global monotonic resourceVersion, and a
//! bounded history of changes that watches and paged lists read.
//!
//! Every write gets the next revision, like etcd's global revision behind kube-apiserver. The
//! history keeps the last `window` changes; a watch or a continue token older than the oldest
//! retained change is answered with 410 Gone, which is what makes clients relist. Each change
//! keeps the object's previous state too, so the state of a collection at an earlier revision
//! can be rebuilt (consistent paging) and a watch with a selector sees an object leave it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque, btree_map};
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use crate::meta;
use crate::registry::ResourceId;

/// Where an object lives within its resource: namespace (empty for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    pub fn of(object: &Value) -> ObjectKey {
        ObjectKey::new(meta::namespace(object), meta::name(object))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One committed change.
#[derive(Debug, Clone)]
pub struct Change {
    pub revision: u64,
    pub resource: ResourceId,
    pub change_type: ChangeType,
    /// The object after the change; for deletions, its last state.
    pub object: Arc<Value>,
    /// The object before the change (`None` for additions).
    pub previous: Option<Arc<Value>>,
}

/// A revision older than the retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    pub oldest: u64,
}

/// A resource together with the key of one of its objects.
pub type ObjectRef = (ResourceId, ObjectKey);

/// A collection as it was at a revision ([`Store::at_revision`]): the live objects, with
/// those changed since then replaced by what they were.
pub struct AtRevision<'a> {
    live: Peekable<btree_map::Range<'a, ObjectKey, Arc<Value>>>,
    /// Each key changed since the revision, with what it was then (`None`: absent).
    replaced: Peekable<btree_map::IntoIter<ObjectKey, Option<Arc<Value>>>>,
}

impl<'a> Iterator for AtRevision<'a> {
    type Item = (Cow<'a, ObjectKey>, Arc<Value>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.live.peek(), self.replaced.peek()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((live, _)), Some((changed, _))) => (*live).cmp(changed),
            };
            if order == Ordering::Less {
                let (key, object) = self.live.next()?;
                return Some((Cow::Borrowed(key), object.clone()));
            }
            if order == Ordering::Equal {
                self.live.next();
            }
            if let (key, Some(object)) = self.replaced.next()? {
                return Some((Cow::Owned(key), object));
            }
        }
    }
}

#[derive(Debug)]
pub struct Store {
    collections: BTreeMap<ResourceId, BTreeMap<ObjectKey, Arc<Value>>>,
    revision: u64,
    history: VecDeque<Arc<Change>>,
    window: usize,
    /// Changes at or below this revision are no longer in `history`.
    compacted: u64,
    by_uid: HashMap<String, ObjectRef>,
    dependents: HashMap<String, BTreeSet<ObjectRef>>,
    revisions: watch::Sender<u64>,
}

impl Store {
    /// An empty store keeping the last `window` changes (at least one).
    pub fn new(window: usize) -> Store {
        Store {
            collections: BTreeMap::new(),
            revision: 0,
            history: VecDeque::new(),
            window: window.max(1),
            compacted: 0,
            by_uid: HashMap::new(),
            dependents: HashMap::new(),
            revisions: watch::channel(0).0,
        }
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Wakes on every commit with the new revision.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.revisions.subscribe()
    }

    pub fn get(&self, resource: &ResourceId, key: &ObjectKey) -> Option<&Arc<Value>> {
        self.collections.get(resource)?.get(key)
    }

    /// Objects of `resource`, in key order, optionally within one namespace.
    pub fn list<'a>(
        &'a self,
        resource: &ResourceId,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        self.collections
            .get(resource)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter(move |(key, _)| namespace.is_none_or(|ns| key.namespace == ns))
    }

    /// Whether any object of any namespaced resource lives in `namespace`.
    pub fn namespace_has_objects(&self, namespace: &str) -> bool {
        self.collections
            .values()
            .any(|objects| objects.keys().any(|key| key.namespace == namespace))
    }

    /// Every (resource, key) in `namespace`.
    pub fn objects_in_namespace(&self, namespace: &str) -> Vec<ObjectRef> {
        self.collections
            .iter()
            .flat_map(|(resource, objects)| {
                objects
                    .keys()
                    .filter(|key| key.namespace == namespace)
                    .map(|key| (resource.clone(), key.clone()))
            })
            .collect()
    }

    pub fn find_uid(&self, uid: &str) -> Option<&ObjectRef> {
        self.by_uid.get(uid)
    }

    /// Objects with an ownerReference to `owner_uid`.
    pub fn dependents_of(&self, owner_uid: &str) -> Vec<ObjectRef> {
        self.dependents
            .get(owner_uid)
            .map(|refs| refs.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Stores `object` at `key` with the next revision as its resourceVersion.
    pub fn put(&mut self, resource: &ResourceId, key: ObjectKey, mut object: Value) -> Arc<Value> {
        let revision = self.next_revision(&mut object);
        let object = Arc::new(object);
        let previous = self
            .collections
            .entry(resource.clone())
            .or_default()
            .insert(key.clone(), object.clone());
        if let Some(previous) = &previous {
            self.unindex(resource, &key, previous);
        }
        self.index(resource, &key, &object);
        let change_type = if previous.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.record(Change {
            revision,
            resource: resource.clone(),
            change_type,
            object: object.clone(),
            previous,
        });
        object
    }

    /// Removes the object at `key`; the deletion is recorded with `last_state` when given
    /// (an update that removed the last finalizer), else with the stored object.
    pub fn remove(
        &mut self,
        resource: &ResourceId,
        key: &ObjectKey,
        last_state: Option<Value>,
    ) -> Option<Arc<Value>> {
        let removed = self.collections.get_mut(resource)?.remove(key)?;
        self.unindex(resource, key, &removed);
        let mut object = last_state.unwrap_or_else(|| (*removed).clone());
        let revision = self.next_revision(&mut object);
        let object = Arc::new(object);
        self.record(Change {
            revision,
            resource: resource.clone(),
            change_type: ChangeType::Deleted,
            object: object.clone(),
            previous: Some(removed),
        });
        Some(object)
    }

    /// Forgets an emptied resource (its CRD is gone).
    pub fn drop_resource(&mut self, resource: &ResourceId) {
        if self
            .collections
            .get(resource)
            .is_some_and(BTreeMap::is_empty)
        {
            self.collections.remove(resource);
        }
    }

    /// Changes after `revision`, oldest first.
    pub fn changes_after(&self, revision: u64) -> Result<Vec<Arc<Change>>, TooOld> {
        self.check_retained(revision)?;
        let start = self
            .history
            .partition_point(|change| change.revision <= revision);
        Ok(self.history.range(start..).cloned().collect())
    }

    /// The objects of `resource` as they were at `revision`, in key order from `from` on.
    ///
    /// A paged list reads one page of this per request, so it costs the page plus the changes
    /// made since `revision`, not the whole collection (etcd serves a range at a revision the
    /// same way): the live collection is merged with what each later change replaced.
    pub fn at_revision<'a>(
        &'a self,
        resource: &ResourceId,
        revision: u64,
        from: Bound<&ObjectKey>,
    ) -> Result<AtRevision<'a>, TooOld> {
        self.check_retained(revision)?;
        let starts_after = |key: &ObjectKey| match from {
            Bound::Included(first) => key >= first,
            Bound::Excluded(after) => key > after,
            Bound::Unbounded => true,
        };
        // Newest first, so that the oldest change after `revision` has the last word: what it
        // replaced is what the object was at `revision` (`None`: it did not exist yet).
        let mut replaced = BTreeMap::new();
        for change in self.history.iter().rev() {
            if change.revision <= revision {
                break;
            }
            if change.resource != *resource {
                continue;
            }
            let key = ObjectKey::of(&change.object);
            if starts_after(&key) {
                replaced.insert(key, change.previous.clone());
            }
        }
        static NONE: BTreeMap<ObjectKey, Arc<Value>> = BTreeMap::new();
        let live = self
            .collections
            .get(resource)
            .unwrap_or(&NONE)
            .range::<ObjectKey, _>((from, Bound::Unbounded));
        Ok(AtRevision {
            live: live.peekable(),
            replaced: replaced.into_iter().peekable(),
        })
    }

    fn check_retained(&self, revision: u64) -> Result<(), TooOld> {
        if revision < self.compacted {
            return Err(TooOld {
                requested: revision,
                oldest: self.compacted + 1,
            });
        }
        Ok(())
    }

    fn next_revision(&mut self, object: &mut Value) -> u64 {
        self.revision += 1;
        meta::metadata_mut(object).insert(
            "resourceVersion".into(),
            Value::from(self.revision.to_string()),
        );
        self.revision
    }

    fn record(&mut self, change: Change) {
        let revision = change.revision;
        self.history.push_back(Arc::new(change));
        while self.history.len() > self.window {
            if let Some(evicted) = self.history.pop_front() {
                self.compacted = evicted.revision;
            }
        }
        self.revisions.send_replace(revision);
    }

    fn index(&mut self, resource: &ResourceId, key: &ObjectKey, object: &Value) {
        let target = (resource.clone(), key.clone());
        let uid = meta::uid(object);
        if !uid.is_empty() {
            self.by_uid.insert(uid.to_owned(), target.clone());
        }
        for owner in meta::owner_refs(object) {
            self.dependents
                .entry(owner.uid)
                .or_default()
                .insert(target.clone());
        }
    }

    fn unindex(&mut self, resource: &ResourceId, key: &ObjectKey, object: &Value) {
        let target = (resource.clone(), key.clone());
        let uid = meta::uid(object);
        if self.by_uid.get(uid) == Some(&target) {
            self.by_uid.remove(uid);
        }
        for owner in meta::owner_refs(object) {
            if let Some(dependents) = self.dependents.get_mut(&owner.uid) {
                dependents.remove(&target);
                if dependents.is_empty() {
                    self.dependents.remove(&owner.uid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configmaps() -> ResourceId {
        ResourceId::new("", "configmaps")
    }

    fn object(name: &str, value: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}, "data": {"v": value}})
    }

    #[test]
    fn every_write_gets_the_next_global_revision() {
        let mut store = Store::new(10);
        let a = store.put(&configmaps(), ObjectKey::new("ns", "a"), object("a", "1"));
        let b = store.put(
            &ResourceId::new("", "secrets"),
            ObjectKey::new("ns", "b"),
            object("b", "1"),
        );
        assert_eq!(meta::resource_version(&a), "1");
        assert_eq!(meta::resource_version(&b), "2");
        assert_eq!(store.revision(), 2);
    }

    #[test]
    fn history_older_than_the_window_is_too_old() {
        let mut store = Store::new(2);
        for value in ["1", "2", "3", "4"] {
            store.put(&configmaps(), ObjectKey::new("ns", "a"), object("a", value));
        }
        assert_eq!(
            store.changes_after(1).unwrap_err(),
            TooOld {
                requested: 1,
                oldest: 3
            }
        );
        let retained = store
            .changes_after(2)
            .expect("revision 2 is the compaction point");
        assert_eq!(retained.len(), 2);
    }

    #[test]
    fn a_collection_is_read_as_it_was_at_an_earlier_revision() {
        let mut store = Store::new(10);
        store.put(&configmaps(), ObjectKey::new("ns", "a"), object("a", "1"));
        store.put(&configmaps(), ObjectKey::new("ns", "a"), object("a", "2"));
        store.put(&configmaps(), ObjectKey::new("ns", "b"), object("b", "1"));
        store.remove(&configmaps(), &ObjectKey::new("ns", "a"), None);
        let at = |revision| -> Vec<(String, String)> {
            store
                .at_revision(&configmaps(), revision, Bound::Unbounded)
                .expect("retained")
                .map(|(key, object)| (key.name.clone(), object["data"]["v"].to_string()))
                .collect()
        };
        assert_eq!(at(1), [("a".to_owned(), "\"1\"".to_owned())]);
        assert_eq!(
            at(3),
            [
                ("a".to_owned(), "\"2\"".to_owned()),
                ("b".to_owned(), "\"1\"".to_owned())
            ]
        );
        assert_eq!(at(4), [("b".to_owned(), "\"1\"".to_owned())]);
        let after_a: Vec<_> = store
            .at_revision(
                &configmaps(),
                3,
                Bound::Excluded(&ObjectKey::new("ns", "a")),
            )
            .expect("retained")
            .map(|(key, _)| key.name.clone())
            .collect();
        assert_eq!(after_a, ["b"]);
    }

    #[test]
    fn dependents_are_indexed_by_owner_uid() {
        let mut store = Store::new(10);
        let mut child = object("child", "1");
        child["metadata"]["ownerReferences"] = json!([{"uid": "uid-parent"}]);
        store.put(&configmaps(), ObjectKey::new("ns", "child"), child);
        assert_eq!(store.dependents_of("uid-parent").len(), 1);
        store.remove(&configmaps(), &ObjectKey::new("ns", "child"), None);
        assert!(store.dependents_of("uid-parent").is_empty());
        assert!(store.find_uid("uid-child").is_none());
    }
}
