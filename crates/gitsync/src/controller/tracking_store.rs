//! The tracking objects as this replica's watches hold them, so that a round reads its source's
//! inventory from memory instead of listing every tracking object again.
//!
//! ## Model
//!
//! The finalizer's controllers ([`reconcile`](super::reconcile)) watch GitTrackObjects and
//! ClusterGitTrackObjects; their reflector stores are kept here. Each stored copy is a
//! [`TrackingRecord`]: only what the decisions read, decoded so from the wire.
//!
//! A watch lags behind the writes. A round started right after another could read a store that
//! has not seen the last round's writes yet and create a tracking object twice, or write a
//! condition again. So every write this replica makes to a tracking object is remembered with
//! the resourceVersion it produced ([`TrackingStores::wrote`], [`TrackingStores::let_go`]), and
//! a round reads the store only once the store shows each of them (the pattern of client-go's
//! controller expectations). A write is shown when the store holds the object at that
//! resourceVersion or later, or (for a create or change) when the watch has delivered any
//! event at or past it: resourceVersions are one revision counter for the whole store the API
//! server keeps, and one watch delivers its events in that order, so an object missing then is
//! truly gone. The wait is bounded: past [`PATIENCE`] the round lists the tracking objects as
//! before, logged, and so do the rounds after it, without waiting, until the watch shows those
//! writes (unlike client-go's expectations, never given up on: a watch that never shows a write
//! is not to be read). Where no watch covers what a source needs, or the server's
//! resourceVersions are not numbers, rounds list as before.
//!
//! Only this replica's own writes are waited for, so a store is read only for a source whose
//! tracking objects a round here has listed since this replica took the source on
//! ([`InventoryRead`](super::tracking::InventoryRead)): from then on, the writes that could
//! make the store's copy of them wrong are this replica's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use arbor_policy::ownership::NamespaceScope;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use super::tracking_record::{TrackingRecord, TrackingResource};

/// How long a round waits for the watch to show this replica's earlier writes before it lists.
pub const PATIENCE: Duration = Duration::from_secs(5);
/// How often a waiting round looks at the store again.
const POLL: Duration = Duration::from_millis(5);

/// The two tracking kinds' stores, and the writes they have not shown yet.
#[derive(Debug)]
pub struct TrackingStores {
    gittrack_objects: OnceLock<Watched>,
    cluster_gittrack_objects: OnceLock<Watched>,
    written: Mutex<Written>,
    patience: Duration,
}

#[derive(Debug)]
struct Watched {
    store: Store<TrackingRecord>,
    scope: NamespaceScope,
    /// The highest resourceVersion of an event the store has applied.
    seen: AtomicU64,
}

#[derive(Debug, Default)]
struct Written {
    /// By tracking object (namespace, name): what the store must show before a round reads it.
    expected: HashMap<(Option<String>, String), Expectation>,
    /// A write returned a resourceVersion that is not a number: stores are never trusted.
    opaque: bool,
}

#[derive(Debug, Clone, Copy)]
struct Expectation {
    shows: Shows,
    since: Instant,
    /// A round already waited for it in vain: the next ones list without waiting.
    late: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shows {
    /// The object at this resourceVersion or later (it was created or changed).
    AtLeast(u64),
    /// The object gone, or later than this resourceVersion (it was let go).
    Beyond(u64),
}

impl Default for TrackingStores {
    fn default() -> Self {
        Self::with_patience(PATIENCE)
    }
}

impl TrackingStores {
    pub fn with_patience(patience: Duration) -> Self {
        Self {
            gittrack_objects: OnceLock::new(),
            cluster_gittrack_objects: OnceLock::new(),
            written: Mutex::default(),
            patience,
        }
    }

    /// The store of the watch of `resource` covering `scope` (every ClusterGitTrackObject is
    /// cluster-wide).
    pub fn watch(
        &self,
        resource: TrackingResource,
        store: Store<TrackingRecord>,
        scope: NamespaceScope,
    ) {
        let (slot, scope) = match resource {
            TrackingResource::GitTrackObject => (&self.gittrack_objects, scope),
            TrackingResource::ClusterGitTrackObject => (
                &self.cluster_gittrack_objects,
                NamespaceScope::AllNamespaces,
            ),
        };
        let _ = slot.set(Watched {
            store,
            scope,
            seen: AtomicU64::new(0),
        });
    }

    /// The watch of GitTrackObjects (`namespaced`) or ClusterGitTrackObjects has applied an
    /// event at resourceVersion `version` to its store.
    pub fn saw(&self, namespaced: bool, version: Option<u64>) {
        let watched = if namespaced {
            self.gittrack_objects.get()
        } else {
            self.cluster_gittrack_objects.get()
        };
        if let (Some(watched), Some(version)) = (watched, version) {
            watched.seen.fetch_max(version, Ordering::SeqCst);
        }
    }

    fn written(&self) -> MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This replica created or changed the tracking object `namespace`/`name`, which is now at
    /// `resource_version`.
    pub fn wrote(&self, namespace: Option<&str>, name: &str, resource_version: Option<&str>) {
        self.expect(namespace, name, resource_version, Shows::AtLeast);
    }

    /// This replica deleted the tracking object `namespace`/`name` (or removed its last
    /// finalizer), which was at `resource_version` before.
    pub fn let_go(&self, namespace: Option<&str>, name: &str, resource_version: Option<&str>) {
        self.expect(namespace, name, resource_version, Shows::Beyond);
    }

    fn expect(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
        shows: fn(u64) -> Shows,
    ) {
        let mut written = self.written();
        let Some(version) = resource_version.and_then(|text| text.parse::<u64>().ok()) else {
            if !written.opaque {
                tracing::info!(
                    resource_version,
                    "a tracking object's resourceVersion is not a number: rounds list tracking \
                     objects instead of reading the watch"
                );
            }
            written.opaque = true;
            return;
        };
        written.expected.insert(
            (namespace.map(str::to_owned), name.to_owned()),
            Expectation {
                shows: shows(version),
                since: Instant::now(),
                late: false,
            },
        );
    }

    /// The GitTrackObjects in `namespace` (every namespace with `None`) from the watch, once it
    /// shows this replica's earlier writes; `None` when no watch here covers them or it did not
    /// catch up in time (the caller lists instead).
    pub async fn gittrack_objects(
        &self,
        namespace: Option<&str>,
    ) -> Option<Vec<Arc<TrackingRecord>>> {
        let watched = self.gittrack_objects.get()?;
        let covered = match namespace {
            Some(namespace) => watched.scope.contains(namespace),
            None => watched.scope == NamespaceScope::AllNamespaces,
        };
        if !covered || !self.caught_up().await {
            return None;
        }
        Some(match namespace {
            Some(namespace) => watched
                .store
                .state_filter(|record| record.meta().namespace.as_deref() == Some(namespace)),
            None => watched.store.state(),
        })
    }

    /// Every ClusterGitTrackObject from the watch, as [`Self::gittrack_objects`].
    pub async fn cluster_gittrack_objects(&self) -> Option<Vec<Arc<TrackingRecord>>> {
        let watched = self.cluster_gittrack_objects.get()?;
        if !self.caught_up().await {
            return None;
        }
        Some(watched.store.state())
    }

    /// Waits (up to the patience) until both stores have their first listing and show every
    /// write this replica made before the wait began.
    async fn caught_up(&self) -> bool {
        let began = Instant::now();
        let deadline = began + self.patience;
        for watched in [
            self.gittrack_objects.get(),
            self.cluster_gittrack_objects.get(),
        ]
        .into_iter()
        .flatten()
        {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if !matches!(
                tokio::time::timeout(remaining, watched.store.wait_until_ready()).await,
                Ok(Ok(()))
            ) {
                tracing::info!("the tracking objects' watch has not listed them yet");
                return false;
            }
        }
        loop {
            let (waiting, late) = {
                let mut written = self.written();
                if written.opaque {
                    return false;
                }
                // A write the watch never shows is never forgotten: a watch that far behind
                // is not to be read (rounds list until it shows the write).
                written.expected.retain(|(namespace, name), expectation| {
                    !self.shows(namespace.as_deref(), name, expectation.shows)
                });
                let waiting = written
                    .expected
                    .values()
                    .filter(|expectation| expectation.since <= began);
                let late = waiting.clone().any(|expectation| expectation.late);
                (waiting.count(), late)
            };
            if waiting == 0 {
                return true;
            }
            if late {
                tracing::debug!(
                    waiting,
                    "the tracking objects' watch is still late; listing"
                );
                return false;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    waiting,
                    patience_ms = self.patience.as_millis(),
                    "the tracking objects' watch has not shown this replica's last writes in \
                     time; rounds list them until it does"
                );
                for expectation in self.written().expected.values_mut() {
                    expectation.late |= expectation.since <= began;
                }
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether the store shows what `shows` expects of `namespace`/`name`.
    fn shows(&self, namespace: Option<&str>, name: &str, shows: Shows) -> bool {
        let (watched, reference) = match namespace {
            Some(namespace) => (
                self.gittrack_objects.get(),
                ObjectRef::new_with(name, TrackingResource::GitTrackObject).within(namespace),
            ),
            None => (
                self.cluster_gittrack_objects.get(),
                ObjectRef::new_with(name, TrackingResource::ClusterGitTrackObject),
            ),
        };
        // A write to a kind no watch here covers never concerns a store.
        let Some(watched) = watched else { return true };
        let stored = watched
            .store
            .get(&reference)
            .map(|object| object.version().unwrap_or(0));
        match (shows, stored) {
            (Shows::AtLeast(version), Some(stored)) if stored >= version => true,
            // Any event at or past the write: the watch has passed it.
            (Shows::AtLeast(version), _) => watched.seen.load(Ordering::SeqCst) >= version,
            // The let-go's own resourceVersion is not known: only the object itself tells.
            (Shows::Beyond(version), Some(stored)) => stored > version,
            (Shows::Beyond(_), None) => true,
        }
    }
}
