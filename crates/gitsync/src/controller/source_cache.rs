//! What every source in scope reports on the cluster, for decisions that must not depend on
//! which replica ran which round.
//!
//! With `--shards`, a replica runs the rounds of its own shards only, so its
//! [`Registry`](super::registry::Registry) knows what those sources declare and nothing of the others. Every round,
//! wherever it ran, writes its management conflicts to its source's status (`ARB3020`, naming
//! the object): a source that declares an object another source holds says so there. The
//! source controllers watch every source of their kind, whatever its shard, and their caches are
//! read here, so deciding whether another source declares an object costs no request once their
//! first list has arrived (until then the kind is listed). A cache that received its first list
//! with no object in it knows the kind has none: it is empty, not unknown. A decision to delete
//! is confirmed with a fresh list ([`Freshness::Listed`]): a cache behind a watch outage may
//! miss a conflict reported meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use arbor_api::keys::SourceRef;
use arbor_api::{ClusterGitTrack, GitTrack};
use arbor_policy::object::ObjectKey;
use arbor_policy::ownership::NamespaceScope;
use arbor_runtime::decode::api_resource;
use kube::Api;
use kube::Resource;
use kube::ResourceExt;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::Store;

use super::error::MANAGEMENT_CONFLICT;
use super::settings::Settings;

/// The source controllers' caches, each set once its controller starts.
#[derive(Default)]
pub struct SourceCaches {
    gittracks: OnceLock<Watched>,
    cluster_gittracks: OnceLock<Watched>,
}

/// One controller's cache, and whether its first list has been applied to it: kube-runtime's
/// store says so only to an awaiting reader, and wakes only its last one (the controller's).
struct Watched {
    store: Store<DynamicObject>,
    listed: Arc<AtomicBool>,
}

/// Where [`SourceCaches::all`] reads the sources; when a decision must be confirmed from a
/// fresh list is arbor-policy's rule ([`Freshness::to_confirm`]).
pub use arbor_policy::sync::round::Freshness;

impl std::fmt::Debug for SourceCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceCaches").finish_non_exhaustive()
    }
}

/// One source as its cache holds it.
#[derive(Debug, Clone)]
pub struct CachedSource {
    pub reference: SourceRef,
    pub object: Arc<DynamicObject>,
}

impl CachedSource {
    fn of(object: Arc<DynamicObject>) -> Self {
        Self {
            reference: reference_of(&object),
            object,
        }
    }

    /// Its status reports a management conflict on `key`.
    pub fn reports_conflict_on(&self, key: &ObjectKey) -> bool {
        let key = key.to_string();
        self.object.data["status"]["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|error| {
                error["code"].as_str() == Some(MANAGEMENT_CONFLICT)
                    && error["object"].as_str() == Some(key.as_str())
            })
    }

    pub fn deleting(&self) -> bool {
        self.object.metadata.deletion_timestamp.is_some()
    }
}

impl SourceCaches {
    /// Keeps the cache of the controller of source kind `K`; the returned flag is to be set
    /// once the watch's first list (its `InitDone`) has been applied to the store.
    pub fn set<K: Resource<DynamicType = ()>>(
        &self,
        store: Store<DynamicObject>,
    ) -> Arc<AtomicBool> {
        let slot = if K::kind(&()) == ClusterGitTrack::kind(&()) {
            &self.cluster_gittracks
        } else {
            &self.gittracks
        };
        let listed = Arc::new(AtomicBool::new(false));
        // Each controller starts once per instance; a second store would be the same watch.
        let _ = slot.set(Watched {
            store,
            listed: listed.clone(),
        });
        listed
    }

    /// The cached source `reference` names; `None` when it is not there or its kind is not
    /// watched here.
    pub fn get(&self, reference: &SourceRef) -> Option<CachedSource> {
        let (slot, resource, namespace, name) = match reference {
            SourceRef::GitTrack { namespace, name } => (
                &self.gittracks,
                api_resource::<GitTrack>(),
                Some(namespace),
                name,
            ),
            SourceRef::ClusterGitTrack { name } => (
                &self.cluster_gittracks,
                api_resource::<ClusterGitTrack>(),
                None,
                name,
            ),
        };
        let mut key = ObjectRef::new_with(name, resource);
        if let Some(namespace) = namespace {
            key = key.within(namespace);
        }
        let object = slot.get()?.store.get(&key)?;
        Some(CachedSource {
            reference: reference.clone(),
            object,
        })
    }

    /// Every source this instance watches, as cached; `None` while a watched kind's cache has
    /// not received its first list (after it, the cache holds a whole list: what it holds,
    /// nothing included, is complete).
    pub fn cached(&self, settings: &Settings) -> Option<Vec<CachedSource>> {
        let watches = settings.scope.watches();
        let mut sources = Vec::new();
        if watches.gittracks != NamespaceScope::Nowhere {
            sources.extend(filled(&self.gittracks)?);
        }
        if watches.cluster_gittracks {
            sources.extend(filled(&self.cluster_gittracks)?);
        }
        Some(sources)
    }

    /// Every source this instance watches: as cached, or listed from the API server for a kind
    /// whose cache has not received its first list, or for every kind when `freshness` asks.
    /// The caches' readiness is not awaited: kube-runtime's store wakes only its last waiter,
    /// which must stay the controller's.
    pub async fn all(
        &self,
        client: &kube::Client,
        settings: &Settings,
        freshness: Freshness,
    ) -> Result<Vec<CachedSource>, kube::Error> {
        let watches = settings.scope.watches();
        let mut sources = Vec::new();
        if let Some(api) = super::reconcile::scoped_api::<GitTrack>(client, &watches.gittracks) {
            sources.extend(filled_or_listed(&self.gittracks, &api, freshness).await?);
        }
        if watches.cluster_gittracks {
            let api = Api::all_with(client.clone(), &api_resource::<ClusterGitTrack>());
            sources.extend(filled_or_listed(&self.cluster_gittracks, &api, freshness).await?);
        }
        Ok(sources)
    }
}

fn filled(slot: &OnceLock<Watched>) -> Option<Vec<CachedSource>> {
    let watched = slot.get()?;
    watched.listed.load(Ordering::Acquire).then(|| {
        watched
            .store
            .state()
            .into_iter()
            .map(CachedSource::of)
            .collect()
    })
}

async fn filled_or_listed(
    slot: &OnceLock<Watched>,
    api: &Api<DynamicObject>,
    freshness: Freshness,
) -> Result<Vec<CachedSource>, kube::Error> {
    if freshness == Freshness::Cached
        && let Some(cached) = filled(slot)
    {
        return Ok(cached);
    }
    let listed = api.list(&ListParams::default()).await?;
    Ok(listed
        .items
        .into_iter()
        .map(|object| CachedSource::of(Arc::new(object)))
        .collect())
}

fn reference_of(object: &DynamicObject) -> SourceRef {
    match object.namespace() {
        Some(namespace) => SourceRef::GitTrack {
            namespace,
            name: object.name_any(),
        },
        None => SourceRef::ClusterGitTrack {
            name: object.name_any(),
        },
    }
}
