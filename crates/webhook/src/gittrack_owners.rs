//! Where the GitTrack that an ownerReference names really is.
//!
//! An ownerReference carries a kind, a name and a uid, never a namespace: kube-apiserver reads
//! a namespaced owner in its dependent's own namespace, and its garbage collector calls a uid
//! that belongs to an object of another namespace an invalid cross-namespace reference
//! (`OwnerRefInvalidNamespace`). So a GitTrackObject in `team-b` can claim the GitTrack of
//! `team-a` by its uid alone, with no source annotation to show the claim. Seeds/002 says a
//! GitTrack never owns an object in another namespace, in every mode; to judge such a claim
//! the webhook must know where the GitTrack with that uid lives. [`GitTrackLocator`] answers
//! that, from a reflector of every GitTrack ([`WatchedGitTracks`]). A uid it does not know
//! (the GitTrack is not yet in the cache, or does not exist) leaves the owner in the tracking
//! object's namespace, as the API server reads it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

/// Which namespace holds the GitTrack with a uid.
pub trait GitTrackLocator: Send + Sync {
    fn namespace_of(&self, uid: &str) -> Option<String>;
}

/// Every GitTrack of the cluster, from a reflector of their metadata, of which only the
/// namespace, name and uid are kept: a GitTrack whose spec does not decode is still located,
/// and the spec, status and managedFields of every GitTrack are not held.
#[derive(Clone)]
pub struct WatchedGitTracks {
    store: Store<PartialObjectMeta<DynamicObject>>,
}

impl std::fmt::Debug for WatchedGitTracks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedGitTracks")
            .field("gittracks", &self.store.len())
            .finish()
    }
}

impl WatchedGitTracks {
    /// Starts the reflector on a task that ends with `shutdown`.
    pub fn start(client: Client, shutdown: CancellationToken) -> Self {
        let resource = ApiResource::erase::<arbor_api::GitTrack>(&());
        let writer =
            reflector::store::Writer::<PartialObjectMeta<DynamicObject>>::new(resource.clone());
        let store = writer.as_reader();
        crate::tree::spawn_reflector(
            Api::<PartialObjectMeta<DynamicObject>>::all_with(client, &resource),
            resource,
            writer,
            crate::tree::keep_identity,
            Arc::new(AtomicU64::new(0)),
            shutdown,
        );
        Self { store }
    }
}

impl GitTrackLocator for WatchedGitTracks {
    fn namespace_of(&self, uid: &str) -> Option<String> {
        self.store
            .state()
            .iter()
            .find(|gittrack| gittrack.metadata.uid.as_deref() == Some(uid))
            .and_then(|gittrack| gittrack.namespace())
    }
}

/// Known GitTracks by uid, for tests, tools and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct FixedGitTracks(HashMap<String, String>);

impl FixedGitTracks {
    /// The GitTrack with `uid` is in `namespace`.
    #[must_use]
    pub fn with(mut self, uid: &str, namespace: &str) -> Self {
        self.0.insert(uid.to_owned(), namespace.to_owned());
        self
    }
}

impl GitTrackLocator for FixedGitTracks {
    fn namespace_of(&self, uid: &str) -> Option<String> {
        self.0.get(uid).cloned()
    }
}
