//! Starting the controller in a process (the binary, tests and benchmarks all use this).
//!
//! [`start`] checks what must hold before any write (a valid domain and configuration, every
//! watched kind served and namespaced, RBAC for every verb), then runs the watches that feed
//! the index and two `kube::runtime::Controller`s: one on Namespace, triggered by the index
//! with exactly the namespaces an event touches, and one on SubNamespace (with its
//! finalizer), triggered by its own objects and by namespaces of their names. Namespaces and
//! SubNamespaces are each watched once: each watch fills its controller's store, feeds the
//! index and triggers the controllers (see [`crate::watch`]); neither controller watches.

use std::sync::Arc;

use arbor_api::SubNamespaceApi;
use arbor_policy::keys::{InvalidDomain, Keys};
use arbor_policy::propagation::{ConfigError, PropagationConfig, PropagationRules};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::access::{self, AccessError, Resource};
use crate::context::Context;
use crate::grpc::HierarchyGrpc;
use crate::index::Index;
use crate::kinds::{self, KindError};
use crate::metrics::Metrics;
use crate::watch::{self, ControllerFeeds, SyncTracker, WatchSetup};
use crate::writer::Writer;
use crate::{namespace_reconciler, subnamespace_reconciler};

/// How many reconciles of each controller run at once.
const CONCURRENCY: u16 = 16;

/// What the controller is started with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The key domain: `arbor.dev`, `accurate.cybozu.com`, `innu.cybozu.com`, or another.
    pub domain: String,
    pub config: PropagationConfig,
    /// Who reports the Events: `Component::reporter` in the binary, so every controller
    /// names its replica the same way.
    pub reporter: Reporter,
}

/// Why the controller did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("--domain: {0}")]
    Domain(#[from] InvalidDomain),
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("configuration: {0}")]
    Kind(#[from] KindError),
    #[error(transparent)]
    Access(#[from] AccessError),
}

/// A running controller.
#[derive(Debug)]
pub struct Running {
    index: Index,
    rules: PropagationRules,
    metrics: Metrics,
    synced: tokio::sync::watch::Receiver<bool>,
    resync: mpsc::UnboundedSender<()>,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// The index (read by the gRPC service).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The gRPC `HierarchyService` over this controller's index.
    pub fn service(&self) -> HierarchyGrpc {
        HierarchyGrpc::new(self.index.clone(), self.rules.clone())
    }

    /// Waits until every watch has listed once.
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|s| *s).await;
    }

    /// Whether every watch has listed once.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Asks for a reconcile of every namespace.
    pub fn resync(&self) {
        let _ = self.resync.send(());
    }

    /// Namespace reconciles completed so far.
    pub fn reconciles(&self) -> u64 {
        self.metrics.reconciles.get()
    }

    /// Stops the controllers and watches and waits for them.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            if let Err(error) = task.await {
                tracing::error!(%error, "controller task failed");
            }
        }
    }
}

/// Every resource the controller reads and writes, for the RBAC check.
fn resources(kinds: &kinds::WatchedKinds, sub_namespaces: &ApiResource) -> Vec<Resource> {
    let mut resources = vec![
        Resource::new("", "namespaces"),
        Resource::new(&sub_namespaces.group, &sub_namespaces.plural),
    ];
    resources.extend(
        kinds
            .iter()
            .map(|(_, r)| Resource::new(&r.group, &r.plural)),
    );
    resources
}

/// Checks, then starts the watches and controllers; they stop when `shutdown` is cancelled
/// or [`Running::stop`] is called.
pub async fn start(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<Running, StartError> {
    let keys = Keys::for_domain(&settings.domain)?;
    let rules = settings.config.compile(&keys)?;
    let kinds = kinds::resolve(&client, &settings.config.watches).await?;
    let sub_api = SubNamespaceApi::for_domain(&settings.domain).api_resource();
    access::check(&client, &resources(&kinds, &sub_api)).await?;

    let shutdown = shutdown.child_token();
    let index = Index::new(&keys);
    let (triggers, triggered) = mpsc::unbounded_channel::<ObjectRef<Namespace>>();
    let (resync, resynced) = mpsc::unbounded_channel::<()>();
    let (sub_namespace_triggers, sub_namespaces_triggered) =
        mpsc::unbounded_channel::<ObjectRef<DynamicObject>>();
    let (namespace_store, namespace_writer) = reflector::store::<Namespace>();
    let sub_namespace_writer = reflector::store::Writer::<DynamicObject>::new(sub_api.clone());
    let sub_namespace_store = sub_namespace_writer.as_reader();
    let (sync, synced) = SyncTracker::new(watch::watch_names(&kinds));
    let setup = WatchSetup {
        client: client.clone(),
        sub_namespaces: sub_api.clone(),
        kinds: kinds.clone(),
        index: index.clone(),
        triggers: triggers.clone(),
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
    };
    let mut tasks = watch::spawn_all(
        &setup,
        &sync,
        ControllerFeeds {
            namespaces: namespace_writer,
            sub_namespaces: sub_namespace_writer,
            sub_namespace_triggers,
        },
    );

    let recorder = Recorder::new(client.clone(), settings.reporter.clone());
    let context = Arc::new(Context::new(
        rules.clone(),
        index.clone(),
        Writer::new(client.clone(), kinds, shutdown.clone()),
        recorder,
        metrics.clone(),
        sub_api.clone(),
        triggers,
        synced.clone(),
    ));
    let config = ControllerConfig::default().concurrency(CONCURRENCY);

    let stop = shutdown.clone();
    // Every trigger comes from the one Namespace watch (through the index), none from a
    // stream of the controller's own.
    let namespaces = Controller::for_stream(futures::stream::pending(), namespace_store)
        .with_config(config.clone())
        .reconcile_on(UnboundedReceiverStream::new(triggered))
        .reconcile_all_on(UnboundedReceiverStream::new(resynced))
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(
            namespace_reconciler::reconcile,
            namespace_reconciler::error_policy,
            Arc::clone(&context),
        )
        .for_each(|_| async {});
    tasks.push(tokio::spawn(namespaces));

    let stop = shutdown.clone();
    // Likewise every trigger comes from the one SubNamespace watch and the Namespace watch.
    let sub_namespaces =
        Controller::for_stream_with(futures::stream::pending(), sub_namespace_store, sub_api)
            .with_config(config)
            .reconcile_on(UnboundedReceiverStream::new(sub_namespaces_triggered))
            .graceful_shutdown_on(async move { stop.cancelled().await })
            .run(
                subnamespace_reconciler::reconcile,
                subnamespace_reconciler::error_policy,
                context,
            )
            .for_each(|_| async {});
    tasks.push(tokio::spawn(sub_namespaces));

    Ok(Running {
        index,
        rules,
        metrics,
        synced,
        resync,
        shutdown,
        tasks,
    })
}
