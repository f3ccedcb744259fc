//! The namespace tree the tree rules judge against.
//!
//! In a cluster, [`ClusterTree`] keeps reflectors of Namespaces and SubNamespaces and builds
//! the tree as it is about to be from them ([`NamespaceTree::about_to_be`]: SubNamespaces whose
//! namespaces do not exist yet already stand in it).
//!
//! The tree needs the names, labels and annotations of namespaces and the names of
//! SubNamespaces, nothing else, so both reflectors watch metadata only
//! (`PartialObjectMeta`), and what they keep is cut down further before it is stored
//! ([`keep_labels`], [`keep_identity`]): managedFields alone can be larger than the rest of an
//! object, and at a thousand namespaces they were most of what the webhook held.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arbor_policy::keys::Keys;
use arbor_policy::propagation::{NamespaceState, NamespaceTree, SubNamespace};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::DynamicObject;
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio_util::sync::CancellationToken;

/// A view of the namespace tree, as of now.
pub trait TreeSource: Send + Sync {
    fn tree(&self) -> Arc<NamespaceTree>;
}

/// A fixed tree, for tests, tools and benchmarks.
#[derive(Debug, Clone)]
pub struct FixedTree(Arc<NamespaceTree>);

impl FixedTree {
    pub fn new(keys: &Keys, namespaces: Vec<NamespaceState>) -> Self {
        Self(Arc::new(NamespaceTree::new(keys, namespaces)))
    }
}

impl TreeSource for FixedTree {
    fn tree(&self) -> Arc<NamespaceTree> {
        self.0.clone()
    }
}

/// A tree and the reflector generation it was built at.
type BuiltTree = (u64, Arc<NamespaceTree>);

/// The live tree, from reflectors.
///
/// Building a [`NamespaceTree`] reads every Namespace, so the tree is built once per change:
/// each reflector event bumps a generation, and a request builds the tree only when the
/// generation moved since the cached one was built.
#[derive(Clone)]
pub struct ClusterTree {
    keys: Keys,
    /// Namespaces: name, labels and annotations.
    namespaces: Store<PartialObjectMeta<Namespace>>,
    /// SubNamespaces in the group of the key domain: their names (the spec is not needed, and
    /// not read, so a SubNamespace of any shape counts).
    sub_namespaces: Store<PartialObjectMeta<DynamicObject>>,
    generation: Arc<AtomicU64>,
    cached: Arc<Mutex<Option<BuiltTree>>>,
}

impl std::fmt::Debug for ClusterTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTree")
            .field("domain", &self.keys.domain())
            .field("namespaces", &self.namespaces.len())
            .field("sub_namespaces", &self.sub_namespaces.len())
            .finish()
    }
}

/// Why the reflectors could not be synced.
#[derive(Debug, thiserror::Error)]
#[error("the {kind} reflector stopped before its first list completed")]
pub struct ReflectorError {
    kind: &'static str,
}

impl ClusterTree {
    /// Starts both reflectors on tasks that end with `shutdown`; returns the tree and a future
    /// that completes when both have listed once.
    pub fn start(
        client: Client,
        keys: Keys,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = Result<(), ReflectorError>>) {
        let (namespaces, namespace_writer) = reflector::store();
        let sub_api = arbor_api::SubNamespaceApi::for_domain(keys.domain()).api_resource();
        let sub_writer =
            reflector::store::Writer::<PartialObjectMeta<DynamicObject>>::new(sub_api.clone());
        let sub_namespaces = sub_writer.as_reader();
        let generation = Arc::new(AtomicU64::new(0));
        spawn_reflector(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            (),
            namespace_writer,
            keep_labels,
            generation.clone(),
            shutdown.clone(),
        );
        spawn_reflector(
            Api::<PartialObjectMeta<DynamicObject>>::all_with(client, &sub_api),
            sub_api,
            sub_writer,
            keep_identity,
            generation.clone(),
            shutdown,
        );
        let tree = Self {
            keys,
            namespaces: namespaces.clone(),
            sub_namespaces: sub_namespaces.clone(),
            generation,
            cached: Arc::new(Mutex::new(None)),
        };
        // A plain await is enough: this future is each store's only waiter. kube 5 wakes only
        // the last-polled waiter of a store (see arbor-observer's `open_when_synced`).
        let synced = async move {
            namespaces
                .wait_until_ready()
                .await
                .map_err(|_| ReflectorError { kind: "Namespace" })?;
            sub_namespaces
                .wait_until_ready()
                .await
                .map_err(|_| ReflectorError {
                    kind: "SubNamespace",
                })?;
            Ok(())
        };
        (tree, synced)
    }

    fn build(&self) -> NamespaceTree {
        let states: Vec<NamespaceState> = self
            .namespaces
            .state()
            .into_iter()
            .filter_map(|namespace| {
                let meta = &namespace.metadata;
                Some(NamespaceState {
                    name: meta.name.clone()?,
                    labels: meta.labels.clone().unwrap_or_default(),
                    annotations: meta.annotations.clone().unwrap_or_default(),
                    ..NamespaceState::default()
                })
            })
            .collect();
        let pending: Vec<SubNamespace> = self
            .sub_namespaces
            .state()
            .into_iter()
            .filter_map(|sub| {
                let meta = sub.meta();
                Some(SubNamespace::new(
                    meta.namespace.clone()?,
                    meta.name.clone()?,
                ))
            })
            .collect();
        NamespaceTree::about_to_be(&self.keys, states, pending)
    }
}

/// Namespace metadata as the tree reads it: name, labels and annotations.
pub fn keep_labels(meta: &mut ObjectMeta) {
    *meta = ObjectMeta {
        name: meta.name.take(),
        labels: meta.labels.take(),
        annotations: meta.annotations.take(),
        resource_version: meta.resource_version.take(),
        ..ObjectMeta::default()
    };
}

/// Metadata that only names an object: namespace, name and uid.
pub fn keep_identity(meta: &mut ObjectMeta) {
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        ..ObjectMeta::default()
    };
}

/// Runs a reflector of the metadata of `api`'s objects into `writer`, each cut down by `keep`
/// before it is stored.
pub(crate) fn spawn_reflector<K>(
    api: Api<PartialObjectMeta<K>>,
    dyntype: K::DynamicType,
    writer: reflector::store::Writer<PartialObjectMeta<K>>,
    keep: fn(&mut ObjectMeta),
    generation: Arc<AtomicU64>,
    shutdown: CancellationToken,
) where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    let kind = K::kind(&dyntype).into_owned();
    // Every event, deletions and relists included, has been applied to the store when it
    // comes out of `reflect`, so bumping the generation afterwards never hides a change.
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |object| keep(&mut object.metadata))
        .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                event = stream.next() => match event {
                    Some(Ok(_)) => {
                        generation.fetch_add(1, Ordering::AcqRel);
                    }
                    Some(Err(error)) => tracing::warn!(%kind, %error, "watch error; retrying"),
                    None => break,
                },
            }
        }
    });
}

impl TreeSource for ClusterTree {
    fn tree(&self) -> Arc<NamespaceTree> {
        let generation = self.generation.load(Ordering::Acquire);
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((built_at, tree)) = cached.as_ref()
            && *built_at == generation
        {
            return tree.clone();
        }
        let tree = Arc::new(self.build());
        *cached = Some((generation, tree.clone()));
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_meta() -> ObjectMeta {
        serde_json::from_value(serde_json::json!({
            "name": "team-dev", "namespace": "team", "uid": "u1", "resourceVersion": "7",
            "labels": {"arbor.dev/parent": "team"},
            "annotations": {"note": "kept for the tree"},
            "finalizers": ["kubernetes"],
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}],
        }))
        .unwrap()
    }

    #[test]
    fn namespace_metadata_keeps_what_the_tree_reads() {
        let mut meta = full_meta();
        keep_labels(&mut meta);
        assert_eq!(meta.name.as_deref(), Some("team-dev"));
        assert_eq!(meta.labels, full_meta().labels);
        assert_eq!(meta.annotations, full_meta().annotations);
        assert_eq!(meta.managed_fields, None);
        assert_eq!(meta.finalizers, None);
    }

    #[test]
    fn identity_metadata_keeps_namespace_name_and_uid_only() {
        let mut meta = full_meta();
        keep_identity(&mut meta);
        assert_eq!(
            (
                meta.namespace.as_deref(),
                meta.name.as_deref(),
                meta.uid.as_deref()
            ),
            (Some("team"), Some("team-dev"), Some("u1"))
        );
        assert_eq!(meta.labels, None);
        assert_eq!(meta.annotations, None);
        assert_eq!(meta.managed_fields, None);
    }
}
