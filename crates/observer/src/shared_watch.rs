//! Watches shared by every observer: one per kind and namespace.
//!
//! An observer follows a handful of objects by name. A watch of its own per object is one
//! connection to the API server each (with TLS, tens of KB of buffers apiece), so 1,000
//! Applications of three objects held 3,000 connections and most of the controller's memory.
//! Here the first observer of an object of kind K in namespace N starts one watch of K in N;
//! every other observer of a K in N subscribes to that watch by name, and the watch ends with
//! its last subscriber.
//!
//! The watch keeps the objects of K in N as last seen, so an observer that subscribes after
//! the watch listed gets its object's current state at once, in order with the events that
//! follow: subscribing and dispatching take the same lock. After every (re)list each
//! subscriber is told its object's state as listed, as a watch of its own would have told it.
//!
//! Each object is kept once, in the form the observers read ([`observed_form`]), and handed to
//! them behind an `Arc`: the observers of 1,000 Applications then hold no copy of their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arbor_policy::observe::ResourceId;
use futures::StreamExt;
use kube::Api;
use kube::core::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::resolve::Resolver;

/// What a subscriber hears about its object.
#[derive(Debug, Clone)]
pub enum ObjectEvent {
    /// The object's state after the watch listed (on subscribing to a watch that has listed,
    /// or after a relist): `None` when it does not exist.
    Listed(Option<Arc<Value>>),
    /// The object was created or changed.
    Applied(Arc<Value>),
    /// The object was deleted.
    Deleted,
}

/// The shared watches; cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedWatches {
    resolver: Resolver,
    watches: Arc<Mutex<HashMap<WatchKey, Arc<Mutex<Shared>>>>>,
}

/// The kind and namespace one watch covers (no namespace: a cluster-scoped kind).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WatchKey {
    api_version: String,
    kind: String,
    namespace: Option<String>,
}

#[derive(Debug)]
struct Shared {
    /// The objects by name as last seen; `None` until the first list is complete.
    objects: Option<HashMap<String, Arc<Value>>>,
    subscribers: HashMap<String, Vec<(u64, mpsc::UnboundedSender<ObjectEvent>)>>,
    next_id: u64,
    /// Ends the watch.
    token: CancellationToken,
}

impl Shared {
    fn dispatch(&mut self, name: &str, event: &ObjectEvent) {
        if let Some(subscribers) = self.subscribers.get_mut(name) {
            // A subscriber whose receiver is gone unsubscribes on its own (its guard's drop).
            for (_, sender) in subscribers.iter() {
                let _ = sender.send(event.clone());
            }
        }
    }
}

/// One observer's subscription to the events of one object; unsubscribes when dropped.
#[derive(Debug)]
pub struct Subscription {
    watches: SharedWatches,
    key: WatchKey,
    name: String,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.watches.unsubscribe(&self.key, &self.name, self.id);
    }
}

impl SharedWatches {
    pub fn new(resolver: Resolver) -> Self {
        Self {
            resolver,
            watches: Arc::default(),
        }
    }

    /// Subscribes to the object `id` names, starting the watch of its kind and namespace if
    /// none runs. The events come on the returned receiver for as long as the subscription
    /// is kept.
    pub async fn subscribe(
        &self,
        id: &ResourceId,
    ) -> Result<(Subscription, mpsc::UnboundedReceiver<ObjectEvent>), Error> {
        let key = WatchKey {
            api_version: id.api_version.clone(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
        };
        // Resolved before taking the lock: discovery may ask the API server.
        let api = self.resolver.api_for(id).await?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut watches = lock(&self.watches);
        let shared = watches
            .entry(key.clone())
            .or_insert_with(|| {
                let token = CancellationToken::new();
                let shared = Arc::new(Mutex::new(Shared {
                    objects: None,
                    subscribers: HashMap::new(),
                    next_id: 0,
                    token: token.clone(),
                }));
                tokio::spawn(run_watch(api, key.clone(), shared.clone(), token));
                shared
            })
            .clone();
        let mut shared = lock(&shared);
        let subscription_id = shared.next_id;
        shared.next_id += 1;
        if let Some(objects) = &shared.objects {
            let current = objects.get(&id.name).cloned();
            // The receiver is still in hand: this cannot fail.
            let _ = sender.send(ObjectEvent::Listed(current));
        }
        shared
            .subscribers
            .entry(id.name.clone())
            .or_default()
            .push((subscription_id, sender));
        drop(shared);
        drop(watches);
        Ok((
            Subscription {
                watches: self.clone(),
                key,
                name: id.name.clone(),
                id: subscription_id,
            },
            receiver,
        ))
    }

    /// How many watches run (one per kind and namespace with subscribers).
    pub fn watch_count(&self) -> usize {
        lock(&self.watches).len()
    }

    fn unsubscribe(&self, key: &WatchKey, name: &str, subscription_id: u64) {
        let mut watches = lock(&self.watches);
        let Some(shared) = watches.get(key).cloned() else {
            return;
        };
        let mut shared = lock(&shared);
        if let Some(subscribers) = shared.subscribers.get_mut(name) {
            subscribers.retain(|(id, _)| *id != subscription_id);
            if subscribers.is_empty() {
                shared.subscribers.remove(name);
            }
        }
        if shared.subscribers.is_empty() {
            shared.token.cancel();
            drop(shared);
            watches.remove(key);
        }
    }
}

/// Runs one shared watch until `token` is cancelled, keeping `shared`'s objects and telling
/// its subscribers.
async fn run_watch(
    api: Api<DynamicObject>,
    key: WatchKey,
    shared: Arc<Mutex<Shared>>,
    token: CancellationToken,
) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    // The objects of a list in progress, swapped in when it is complete.
    let mut relisted: HashMap<String, Arc<Value>> = HashMap::new();
    loop {
        let event = tokio::select! {
            () = token.cancelled() => return,
            event = stream.next() => match event {
                Some(Ok(event)) => event,
                Some(Err(error)) => {
                    tracing::debug!(%error, "shared watch error; the watch restarts");
                    continue;
                }
                None => return,
            },
        };
        match event {
            Event::Init => relisted.clear(),
            Event::InitApply(object) => {
                if let Some((name, object)) = kept(&key, object) {
                    relisted.insert(name, object);
                }
            }
            Event::InitDone => {
                let mut shared = lock(&shared);
                let objects = std::mem::take(&mut relisted);
                let names: Vec<String> = shared.subscribers.keys().cloned().collect();
                for name in names {
                    let event = ObjectEvent::Listed(objects.get(&name).cloned());
                    shared.dispatch(&name, &event);
                }
                shared.objects = Some(objects);
            }
            Event::Apply(object) => {
                let Some((name, object)) = kept(&key, object) else {
                    continue;
                };
                let mut shared = lock(&shared);
                if let Some(objects) = &mut shared.objects {
                    objects.insert(name.clone(), object.clone());
                }
                shared.dispatch(&name, &ObjectEvent::Applied(object));
            }
            Event::Delete(object) => {
                let name = object.metadata.name.unwrap_or_default();
                let mut shared = lock(&shared);
                if let Some(objects) = &mut shared.objects {
                    objects.remove(&name);
                }
                shared.dispatch(&name, &ObjectEvent::Deleted);
            }
        }
    }
}

/// The object's name and the object as kept; an object that cannot be read as JSON is left
/// out, with a warning naming it.
fn kept(key: &WatchKey, object: DynamicObject) -> Option<(String, Arc<Value>)> {
    let name = object.metadata.name.clone().unwrap_or_default();
    match observed_form(object, &key.api_version, &key.kind) {
        Ok(value) => Some((name, Arc::new(value))),
        Err(error) => {
            tracing::warn!(kind = %key.kind, namespace = ?key.namespace, %name, %error,
                "a watched object cannot be read as JSON; its observers do not see this change");
            None
        }
    }
}

/// A live object as the observers read it: JSON with the identity fields a watch may leave
/// out, without its managedFields (who wrote which field is never observed, and it can be as
/// large as the rest of the object).
pub fn observed_form(
    mut object: DynamicObject,
    api_version: &str,
    kind: &str,
) -> Result<Value, serde_json::Error> {
    object.metadata.managed_fields = None;
    let mut value = serde_json::to_value(object)?;
    if let Value::Object(fields) = &mut value {
        fields.insert("apiVersion".into(), api_version.into());
        fields.insert("kind".into(), kind.into());
    }
    Ok(value)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
