//! Watches that feed the [`Index`] and say which namespaces to reconcile.
//!
//! One watch per kind (namespaces, SubNamespaces, each watched kind) runs
//! `kube::runtime::watcher` and hands each event to its [`Feed`], which updates the index and
//! returns the namespaces the event touches; those go to the namespace controller. Namespaces
//! and SubNamespaces are each watched once for everything that needs them ([`ControllerFeeds`]):
//! the Namespace watch fills the namespace controller's store, feeds the index, and tells the
//! SubNamespace controller which SubNamespaces each namespace event concerns, deletions
//! included (kube's shared reflector hands its subscribers no deletions, so the SubNamespace
//! controller cannot subscribe to it for them); the SubNamespace watch fills the SubNamespace
//! controller's store, feeds the index and asks for a reconcile of each SubNamespace it
//! hears of. A (re)list
//! replaces the kind's entries wholesale, so objects deleted while the watch was down (or the
//! controller stopped) disappear from the index as they should, and it triggers at least what
//! the live events it stands for would have: every namespace that holds or held an object of
//! the kind, and for namespaces also the SubNamespaces concerned by those that vanished (a
//! SubNamespace whose namespace was deleted unseen makes it again now, not at its requeue).
//! When every watch has listed once, the caches are synced: reconciles wait for that.
//!
//! Objects of the watched kinds and SubNamespaces lose their managedFields as they come off
//! the watch ([`without_managed_fields`]), before a relist buffers them and before the index
//! keeps them: nothing the hierarchy decides reads them (a copy is built from the source's
//! content and compared on the fields it sets), and they are often the larger part of a small
//! object. Namespaces keep theirs until [`namespace_state`] has read which keys the
//! propagating managers hold.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use arbor_policy::object::GroupKind;
use arbor_policy::propagation::{
    NamespaceState, PropagatedKeys, SubNamespace, predecessor_field_managers,
};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::index::Index;
use crate::kinds::WatchedKinds;
use crate::metrics::Metrics;

/// Namespaces to reconcile.
pub type Triggers = mpsc::UnboundedSender<ObjectRef<Namespace>>;

/// Asks for a reconcile of each of `namespaces`.
pub fn send_triggers(triggers: &Triggers, namespaces: BTreeSet<String>) {
    for namespace in namespaces {
        // The receiver goes away only at shutdown, when nothing needs reconciling.
        let _ = triggers.send(ObjectRef::new(&namespace));
    }
}

/// How one kind's events change the index.
pub trait Feed<K>: Send + 'static {
    fn apply(&self, index: &Index, object: K) -> BTreeSet<String>;
    fn delete(&self, index: &Index, object: K) -> BTreeSet<String>;
    fn replace(&self, index: &Index, listed: Vec<K>) -> BTreeSet<String>;
}

fn to_value<K: Serialize>(object: &K) -> Option<Value> {
    serde_json::to_value(object)
        .inspect_err(|error| tracing::warn!(%error, "cannot read a watched object"))
        .ok()
}

/// SubNamespaces to reconcile.
pub type SubNamespaceTriggers = mpsc::UnboundedSender<ObjectRef<DynamicObject>>;

/// Namespaces; `propagators` are the field managers whose keys count as propagated (see
/// [`PropagatedKeys`]).
///
/// Every event also asks for a reconcile of the namespace itself (what the namespace
/// controller's own watch did before the watches became one) and of the SubNamespaces it
/// concerns ([`sub_namespaces_concerned`]).
#[derive(Debug)]
pub struct NamespaceFeed {
    pub propagators: Vec<String>,
    /// Where SubNamespaces are served under the key domain.
    pub sub_namespaces: ApiResource,
    pub sub_namespace_triggers: SubNamespaceTriggers,
}

impl NamespaceFeed {
    /// Asks for a reconcile of each SubNamespace an event on namespace `name` (with `labels`)
    /// concerns.
    fn tell_sub_namespaces(&self, index: &Index, name: &str, labels: &BTreeMap<String, String>) {
        for concerned in sub_namespaces_concerned(index, &self.sub_namespaces, name, labels) {
            // The receiver goes away only at shutdown, when nothing needs reconciling.
            let _ = self.sub_namespace_triggers.send(concerned);
        }
    }
}

/// The SubNamespaces an event on namespace `name` concerns: those asking for its name, and the
/// one its parent label (among `labels`) points to.
pub fn sub_namespaces_concerned(
    index: &Index,
    sub_api: &ApiResource,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<ObjectRef<DynamicObject>> {
    let mut concerned: BTreeSet<(String, String)> =
        index.sub_namespaces_named(name).into_iter().collect();
    if let Some(parent) = labels.get(&index.keys().parent_label) {
        concerned.insert((parent.clone(), name.to_owned()));
    }
    concerned
        .into_iter()
        .map(|(parent, name)| ObjectRef::new_with(&name, sub_api.clone()).within(&parent))
        .collect()
}

/// The field managers that propagate under `domain`: Arbor's own and its predecessor's.
pub fn propagators(domain: &str) -> Vec<String> {
    let mut managers = vec![arbor_api::keys::HIERARCHY_FIELD_MANAGER.to_owned()];
    managers.extend(
        predecessor_field_managers(domain)
            .iter()
            .map(|m| (*m).to_owned()),
    );
    managers
}

/// What the hierarchy reads of a Namespace, with the keys only propagating managers hold.
pub fn namespace_state(namespace: &Namespace, propagators: &[String]) -> NamespaceState {
    let propagators: Vec<&str> = propagators.iter().map(String::as_str).collect();
    let entries = namespace
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| Some((entry.manager.as_deref()?, &entry.fields_v1.as_ref()?.0)));
    NamespaceState {
        name: namespace.name_any(),
        labels: namespace.labels().clone(),
        annotations: namespace.annotations().clone(),
        propagated: PropagatedKeys::from_managed_fields(entries, &propagators),
    }
}

impl Feed<Namespace> for NamespaceFeed {
    fn apply(&self, index: &Index, object: Namespace) -> BTreeSet<String> {
        self.tell_sub_namespaces(index, &object.name_any(), object.labels());
        let mut touched = index.apply_namespace(namespace_state(&object, &self.propagators));
        touched.insert(object.name_any());
        touched
    }
    fn delete(&self, index: &Index, object: Namespace) -> BTreeSet<String> {
        self.tell_sub_namespaces(index, &object.name_any(), object.labels());
        let mut touched = index.delete_namespace(&object.name_any());
        touched.insert(object.name_any());
        touched
    }
    fn replace(&self, index: &Index, listed: Vec<Namespace>) -> BTreeSet<String> {
        for namespace in &listed {
            self.tell_sub_namespaces(index, &namespace.name_any(), namespace.labels());
        }
        let relisted = index.replace_namespaces(
            listed
                .iter()
                .map(|ns| namespace_state(ns, &self.propagators))
                .collect(),
        );
        // Deleted while the watch was down: told as their Deleted events would have told.
        for vanished in &relisted.vanished {
            self.tell_sub_namespaces(index, &vanished.name, &vanished.labels);
        }
        relisted.touched
    }
}

/// SubNamespaces, in the group of the key domain. An object that does not decode is left out
/// of the index (the SubNamespace reconciler reports it); the watch goes on with the others.
///
/// Every event but a deletion also asks for a reconcile of the SubNamespace itself (what the
/// SubNamespace controller's own watch did before the watches became one); a deletion needs
/// none, as the finalizer held the object for its clean-up until then.
#[derive(Debug)]
pub struct SubNamespaceFeed {
    /// Where SubNamespaces are served under the key domain.
    pub sub_namespaces: ApiResource,
    pub sub_namespace_triggers: SubNamespaceTriggers,
}

impl SubNamespaceFeed {
    fn reconcile(&self, object: &DynamicObject) {
        let reference = ObjectRef::new_with(&object.name_any(), self.sub_namespaces.clone())
            .within(&object.namespace().unwrap_or_default());
        // The receiver goes away only at shutdown, when nothing needs reconciling.
        let _ = self.sub_namespace_triggers.send(reference);
    }
}

fn sub_namespace(object: &DynamicObject) -> Option<SubNamespace> {
    SubNamespace::decode(&to_value(object)?)
        .inspect_err(|error| {
            tracing::debug!(namespace = ?object.namespace(), name = %object.name_any(), %error,
                "SubNamespace left out of the index: it does not decode");
        })
        .ok()
}

impl Feed<DynamicObject> for SubNamespaceFeed {
    fn apply(&self, index: &Index, object: DynamicObject) -> BTreeSet<String> {
        let touched = match sub_namespace(&object) {
            Some(s) => index.apply_sub_namespace(s),
            // What it asked for before no longer holds.
            None => index
                .delete_sub_namespace(&object.namespace().unwrap_or_default(), &object.name_any()),
        };
        self.reconcile(&object);
        touched
    }
    fn delete(&self, index: &Index, object: DynamicObject) -> BTreeSet<String> {
        index.delete_sub_namespace(&object.namespace().unwrap_or_default(), &object.name_any())
    }
    fn replace(&self, index: &Index, listed: Vec<DynamicObject>) -> BTreeSet<String> {
        let touched =
            index.replace_sub_namespaces(listed.iter().filter_map(sub_namespace).collect());
        for object in &listed {
            self.reconcile(object);
        }
        touched
    }
}

/// Objects of one watched kind.
#[derive(Debug)]
pub struct ObjectFeed(pub GroupKind);

impl Feed<DynamicObject> for ObjectFeed {
    fn apply(&self, index: &Index, object: DynamicObject) -> BTreeSet<String> {
        to_value(&object).map_or_else(BTreeSet::new, |v| index.apply_object(v))
    }
    fn delete(&self, index: &Index, object: DynamicObject) -> BTreeSet<String> {
        to_value(&object).map_or_else(BTreeSet::new, |v| index.delete_object(&v))
    }
    fn replace(&self, index: &Index, listed: Vec<DynamicObject>) -> BTreeSet<String> {
        index.replace_objects(&self.0, listed.iter().filter_map(to_value).collect())
    }
}

/// Tracks which watches have listed once; publishes `true` when all have.
#[derive(Debug, Clone)]
pub struct SyncTracker {
    pending: Arc<Mutex<BTreeSet<String>>>,
    synced: Arc<watch::Sender<bool>>,
}

impl SyncTracker {
    pub fn new(watches: impl IntoIterator<Item = String>) -> (Self, watch::Receiver<bool>) {
        let (synced, receiver) = watch::channel(false);
        let pending: BTreeSet<String> = watches.into_iter().collect();
        if pending.is_empty() {
            synced.send_replace(true);
        }
        let tracker = Self {
            pending: Arc::new(Mutex::new(pending)),
            synced: Arc::new(synced),
        };
        (tracker, receiver)
    }

    pub fn listed(&self, watch: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.remove(watch) && pending.is_empty() {
            tracing::info!("caches synced");
            self.synced.send_replace(true);
        }
    }
}

/// Runs one watch until `shutdown`.
pub async fn follow<K, F>(
    name: String,
    events: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    feed: F,
    setup: WatchSetup,
    sync: SyncTracker,
) where
    F: Feed<K>,
{
    let WatchSetup {
        index,
        triggers,
        metrics,
        shutdown,
        ..
    } = setup;
    let mut events = std::pin::pin!(events);
    let mut listed = Vec::new();
    let send = |touched| send_triggers(&triggers, touched);
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            None => return,
            Some(Ok(Event::Apply(object))) => send(feed.apply(&index, object)),
            Some(Ok(Event::Delete(object))) => send(feed.delete(&index, object)),
            Some(Ok(Event::Init)) => listed.clear(),
            Some(Ok(Event::InitApply(object))) => listed.push(object),
            Some(Ok(Event::InitDone)) => {
                send(feed.replace(&index, std::mem::take(&mut listed)));
                sync.listed(&name);
            }
            Some(Err(error)) => {
                tracing::warn!(watch = %name, %error, "watch failed; retrying");
                metrics.error("WatchFailed");
            }
        }
    }
}

/// Everything the watches need.
#[derive(Clone)]
pub struct WatchSetup {
    pub client: Client,
    /// Where SubNamespaces are served under the key domain.
    pub sub_namespaces: ApiResource,
    pub kinds: WatchedKinds,
    pub index: Index,
    pub triggers: Triggers,
    pub metrics: Metrics,
    pub shutdown: CancellationToken,
}

/// The name of the watch of one watched kind, like `Secret` or `Role.rbac.authorization.k8s.io`.
fn kind_watch_name(group_kind: &GroupKind) -> String {
    if group_kind.group.is_empty() {
        group_kind.kind.to_string()
    } else {
        format!("{}.{}", group_kind.kind, group_kind.group)
    }
}

/// The names of the watches, for the [`SyncTracker`].
pub fn watch_names(kinds: &WatchedKinds) -> Vec<String> {
    let mut names = vec!["namespaces".to_owned(), "subnamespaces".to_owned()];
    names.extend(kinds.iter().map(|(gk, _)| kind_watch_name(gk)));
    names
}

/// Drops what the server keeps about who wrote which field.
pub fn without_managed_fields(object: &mut DynamicObject) {
    object.metadata.managed_fields = None;
}

fn spawn<K, F>(
    name: String,
    api: Api<K>,
    trim: fn(&mut K),
    feed: F,
    setup: &WatchSetup,
    sync: &SyncTracker,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: Feed<K>,
{
    let events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(trim);
    tokio::spawn(follow(name, events, feed, setup.clone(), sync.clone()))
}

/// What the one watch of Namespaces and the one of SubNamespaces serve beside the index.
#[derive(Debug)]
pub struct ControllerFeeds {
    /// The namespace controller's store, filled before the index hears of an event, so a
    /// reconcile it triggers reads the namespace as the event left it.
    pub namespaces: reflector::store::Writer<Namespace>,
    /// The SubNamespace controller's store, filled the same way.
    pub sub_namespaces: reflector::store::Writer<DynamicObject>,
    pub sub_namespace_triggers: SubNamespaceTriggers,
}

/// Spawns every watch.
pub fn spawn_all(
    setup: &WatchSetup,
    sync: &SyncTracker,
    feeds: ControllerFeeds,
) -> Vec<tokio::task::JoinHandle<()>> {
    let client = || setup.client.clone();
    // Namespaces keep their managedFields: the propagated keys are read from them.
    let namespace_events = reflector::reflector(
        feeds.namespaces,
        watcher::watcher(Api::<Namespace>::all(client()), watcher::Config::default())
            .default_backoff(),
    );
    let namespace_feed = NamespaceFeed {
        propagators: propagators(setup.index.keys().domain()),
        sub_namespaces: setup.sub_namespaces.clone(),
        sub_namespace_triggers: feeds.sub_namespace_triggers.clone(),
    };
    let sub_namespace_events = reflector::reflector(
        feeds.sub_namespaces,
        watcher::watcher(
            Api::<DynamicObject>::all_with(client(), &setup.sub_namespaces),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(without_managed_fields),
    );
    let sub_namespace_feed = SubNamespaceFeed {
        sub_namespaces: setup.sub_namespaces.clone(),
        sub_namespace_triggers: feeds.sub_namespace_triggers,
    };
    let mut tasks = vec![
        tokio::spawn(follow(
            "namespaces".into(),
            namespace_events,
            namespace_feed,
            setup.clone(),
            sync.clone(),
        )),
        tokio::spawn(follow(
            "subnamespaces".into(),
            sub_namespace_events,
            sub_namespace_feed,
            setup.clone(),
            sync.clone(),
        )),
    ];
    for (group_kind, resource) in setup.kinds.iter() {
        let api = Api::<DynamicObject>::all_with(client(), resource);
        let feed = ObjectFeed(group_kind.clone());
        tasks.push(spawn(
            kind_watch_name(group_kind),
            api,
            without_managed_fields,
            feed,
            setup,
            sync,
        ));
    }
    tasks
}

impl std::fmt::Debug for WatchSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSetup").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synced_only_after_every_watch_listed() {
        let (tracker, synced) = SyncTracker::new(["a".to_owned(), "b".to_owned()]);
        tracker.listed("a");
        assert!(!*synced.borrow());
        tracker.listed("a");
        assert!(!*synced.borrow());
        tracker.listed("b");
        assert!(*synced.borrow());
    }
}
