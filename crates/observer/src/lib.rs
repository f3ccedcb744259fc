//! # arbor-observer
//!
//! Keeps Applications (seeds/004, Krake's Kubernetes application observer) as declared, and
//! tells arbor-gitsync at once when a git-managed object drifts.
//!
//! ## Model
//!
//! * The [`controller`] reconciles `Application`s: it validates the spec and the observer
//!   schema, applies `spec.manifest` by server-side apply (field manager `arbor-observer`),
//!   records `status.lastAppliedManifest` and `status.lastObservedManifest`, and deletes the
//!   objects through a finalizer. What to do, and when to stop and start the observer, is
//!   decided by `arbor_policy::observe` (seeds/004's table). One exception: a create stops an
//!   observer still running from before (the table says a create finds none; one outlives the
//!   status that recorded the last apply when that status is wiped, or restored without it),
//!   as before an update, so that no status write of it lands after the create's.
//! * One [`observer`] per Application, a task with its own cancellation token held by the
//!   [`registry`]: it follows the Application's objects through the [`shared_watch`]es (one
//!   watch per kind and namespace for all observers), projects them through the observer
//!   schema and writes `status.lastObservedManifest` when the projection changes. Stopping
//!   or replacing an observer cancels it and waits (at most 10 s, then it is aborted and
//!   counted) for a status write it already sent; it sends none after it was cancelled. The
//!   controller sees last applied and last observed differ and re-applies: drift of an
//!   observed field is healed; a change to a field the schema does not observe is left alone.
//! * With `--shards N`, replicas share the Applications by shard Leases
//!   ([`arbor_runtime::shards`]): every write for an Application, the controller's and its
//!   observer's, is made only while this replica holds the Application's shard, checked right
//!   before it is sent, and the observers of a shard left are stopped as soon as the change is
//!   seen ([`registry`]). A reconcile ended because its shard was left (or the replica stops)
//!   is a normal outcome, not a reconcile error.
//! * [`drift`]: watches of the git-managed kinds (`--drift-kinds`, objects with the
//!   `--management-label`), debounced and reported to gitsync's `SyncService.ReportDrift`
//!   with retries (`--gitsync-addr`; off without it).
//! * [`service`]: the gRPC `ObserverService` (ListApplications, GetObservation, WatchDrift),
//!   [`metrics`] and Kubernetes Events.
//!
//! [`run`] is the binary's entry point; [`start`] runs the same in-process (tests, benches)
//! and returns a [`Running`] handle.

pub mod apply;
pub mod args;
pub mod controller;
pub mod convert;
pub mod drift;
pub mod error;
pub mod manifest;
pub mod metrics;
pub mod observer;
pub mod registry;
pub mod resolve;
pub mod service;
pub mod shared_watch;
pub mod status;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arbor_api::Application;
use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::GroupVersionKind;
use arbor_proto::v1::observer_service_server::ObserverServiceServer;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_runtime::admin::{Readiness, ReadyGate};
use arbor_runtime::compact_object::CompactObject;
use arbor_runtime::shutdown::Drained;
use arbor_runtime::{Component, LostLease, Shutdown};
use futures::StreamExt;
use kube::Api;
use kube::runtime::Controller;
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::events::Recorder;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

pub use args::ObserverArgs;
pub use error::Error;
pub use registry::{AppKey, LifecycleEvent, ObserverRegistry, ObserverStats};

use crate::controller::Context;
use crate::drift::report::Backoff;
use crate::observer::ObserverContext;
use crate::service::ObserverGrpc;

/// The component name: metrics prefix `arbor_observer_`, Lease `arbor-observer`.
pub const COMPONENT: &str = "observer";

/// What the observer does beyond the common flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// gitsync's gRPC address; drift of git-managed objects is not watched without it.
    pub gitsync_addr: Option<String>,
    pub management_label: ManagementLabel,
    pub drift_kinds: Vec<GroupVersionKind>,
    /// Quiet time per object before its drift is reported.
    pub drift_window: Duration,
    pub report_backoff: Backoff,
    /// How many shards the Applications are shared in between replicas (`--shards`).
    pub shards: u32,
    /// How many Applications are reconciled at once (`--max-concurrent-reconciles`).
    pub max_concurrent_reconciles: u16,
}

impl From<&ObserverArgs> for Config {
    fn from(args: &ObserverArgs) -> Self {
        Self {
            gitsync_addr: args.gitsync_addr.clone(),
            management_label: args.management_label.clone(),
            drift_kinds: args.drift_kinds.clone(),
            drift_window: drift::debounce::DEFAULT_WINDOW,
            report_backoff: Backoff::default(),
            shards: args.sharding.shards,
            max_concurrent_reconciles: args.max_concurrent_reconciles,
        }
    }
}

/// The binary's entry point: runs until SIGTERM / SIGINT.
pub async fn run(args: ObserverArgs) -> Result<(), Error> {
    let config = Config::from(&args);
    let component = Component::start(COMPONENT, args.common).await?;
    start(component, config).await?.wait().await
}

/// A running observer controller.
#[derive(Debug)]
pub struct Running {
    pub grpc_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub registry: ObserverRegistry,
    /// Ready once the Applications are listed and every drift watch has its initial list.
    pub readiness: Readiness,
    shutdown: Shutdown,
    /// The component's one stop sequence ([`Component::run_until_stopped`]), running.
    stopped: JoinHandle<Result<Drained, LostLease>>,
}

impl Running {
    /// The replica's shutdown: what stopping waits for, and what it abandoned.
    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// Waits until shutdown and the end of in-flight work. The controller is work the drain
    /// waits for within the grace period, like every other tracked task: a reconcile whose
    /// write is still unanswered then is abandoned (logged, counted) and the Lease left to
    /// expire, rather than the stop waiting for it without bound. A lost Lease is an error
    /// ([`arbor_runtime::LostLease`]) either way, so the binary exits non-zero.
    pub async fn wait(self) -> Result<(), Error> {
        match self.stopped.await {
            Ok(stopped) => stopped.map(drop).map_err(Error::from),
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(_cancelled) => Ok(()),
        }
    }

    /// Starts shutdown and waits for it.
    pub async fn stop(self) -> Result<(), Error> {
        self.shutdown.trigger();
        self.wait().await
    }
}

/// Serves admin and gRPC, then (once leader) runs the controller, the observers and the drift
/// reporting.
pub async fn start(mut component: Component, config: Config) -> Result<Running, Error> {
    let metrics = metrics::Metrics::register(component.metrics()?);
    let undecodable = arbor_runtime::decode::DecodeFailures::register(component.metrics()?);
    let shard_metrics = arbor_runtime::ShardMetrics::register(
        component.metrics()?,
        "shard_reconciles",
        "Application reconciles, by the shard of the Application",
    );
    let ready = component.readiness().gate("applications-synced");
    let drift_gates: Vec<ReadyGate> = match config.gitsync_addr {
        Some(_) => config
            .drift_kinds
            .iter()
            .map(|kind| component.readiness().gate(format!("drift-watch {kind}")))
            .collect(),
        None => Vec::new(),
    };
    let readiness = component.readiness().clone();
    let admin_addr = component.serve_admin().await?;
    let client = component.client();
    let shutdown = component.shutdown().clone();
    let token = shutdown.token();

    let registry = ObserverRegistry::new(metrics.clone(), shutdown.clone());
    let (drift, _) = broadcast::channel(1024);
    // Compact objects (metadata typed, the rest as JSON text), decoded one by one in the
    // reconcile: one Application of the wrong shape never stops the watch of the others, and
    // the cache holds each Application in a tenth of the memory of a JSON tree. The cache keeps
    // them without managedFields: nothing here reads who wrote which field, and with two
    // managers writing the manifests into the status they are a large part of every
    // Application.
    let resource = arbor_runtime::decode::api_resource::<Application>();
    let cache = reflector::store::Writer::new(resource.clone());
    let applications = cache.as_reader();
    let watched = watcher::watcher(
        Api::<CompactObject>::all_with(client.clone(), &resource),
        watcher::Config::default(),
    )
    .modify(|application| application.metadata.managed_fields = None);
    let controller = Controller::for_stream_with(
        reflector::reflector(cache, watched).applied_objects(),
        applications,
        resource,
    )
    .with_config(ControllerConfig::default().concurrency(config.max_concurrent_reconciles));
    let grpc = ObserverGrpc::new(
        controller.store(),
        registry.clone(),
        drift.clone(),
        token.clone(),
    );
    let grpc_addr = component
        .serve_grpc(tonic::service::Routes::new(ObserverServiceServer::new(
            grpc,
        )))
        .await?;

    let resolver = resolve::Resolver::new(client.clone());
    let gitsync = config
        .gitsync_addr
        .as_deref()
        .map(|address| arbor_runtime::grpc::connect_lazy(address, component.tls()))
        .transpose()?;
    let (gate, shards) = component.campaign_shards(config.shards, shard_metrics);
    // With shards, a change of the held shards looks at every Application again: those of a
    // gained shard start, those of a lost one have their observers stopped.
    let controller = controller.reconcile_all_on(shards.changes());
    let drift_shards = shards.clone();
    let follow_shards = shards.clone();
    let context = Arc::new(Context {
        observers: ObserverContext {
            resolver: resolver.clone(),
            watches: shared_watch::SharedWatches::new(resolver.clone()),
            registry: registry.clone(),
            drift: drift.clone(),
            shards,
        },
        recorder: Recorder::new(client, component.reporter()),
        undecodable,
    });
    let task_registry = registry.clone();
    let task_shutdown = shutdown.clone();
    // The component's work, started once this replica leads.
    let work = async move {
        if let Some(channel) = gitsync {
            spawn_drift_reporting(
                &task_shutdown,
                &config,
                DriftPipeline {
                    resolver,
                    channel,
                    watchers: drift,
                    metrics,
                    gates: drift_gates,
                    shards: drift_shards,
                },
            );
        }
        tokio::spawn(open_when_synced(controller.store(), ready));
        // The observers of a shard left stop at once, not when the controller reaches each
        // Application (it may be busy with others for a while).
        task_shutdown.spawn(
            task_registry
                .clone()
                .follow_shards(follow_shards, token.clone()),
        );
        let controller = controller
            .graceful_shutdown_on(token.clone().cancelled_owned())
            .run(controller::reconcile, controller::error_policy, context)
            .for_each(|outcome| async move {
                if let Err(error) = outcome {
                    tracing::debug!(%error, "reconcile");
                }
            });
        // The controller ends on shutdown, which a lost Lease starts too. Shutdown cancels the
        // observers at once (see `registry`); they are waited for here.
        controller.await;
        task_registry.stop_all().await;
    };
    let stopped = tokio::spawn(component.run_until_stopped(gate, work));
    Ok(Running {
        grpc_addr,
        admin_addr,
        registry,
        readiness,
        shutdown,
        stopped,
    })
}

/// Opens `ready` once the controller's cache of Applications has its initial list.
///
/// The wait is re-polled on a short interval because a pending `Store::wait_until_ready` may
/// never be woken when the store has another waiter. In kube-runtime 5.0.0 the store's
/// readiness is a `DelayedInit` around one `futures::channel::oneshot::Receiver`, which holds
/// a single waker: every pending poll replaces the waker of the previous one, and the writer's
/// first `InitDone` wakes only the task that polled last. The controller's runner waits on this
/// same store (`delay_tasks_until`) and is polled again on each watch event, so it usually is
/// that last task. Once the store is ready the result is memoised, so the next poll here
/// returns at once.
async fn open_when_synced(store: kube::runtime::reflector::Store<CompactObject>, ready: ReadyGate) {
    loop {
        match tokio::time::timeout(Duration::from_millis(50), store.wait_until_ready()).await {
            Ok(Ok(())) => return ready.open(),
            // The controller ended before it listed.
            Ok(Err(_)) => return,
            Err(_) => continue,
        }
    }
}

/// What the drift reporting is built from.
struct DriftPipeline {
    resolver: resolve::Resolver,
    channel: tonic::transport::Channel,
    watchers: broadcast::Sender<arbor_proto::v1::DriftEvent>,
    metrics: metrics::Metrics,
    /// One per drift kind, opened when its watch has listed.
    gates: Vec<ReadyGate>,
    /// With `--shards`, each drift is reported by the replica holding its object's shard.
    shards: arbor_runtime::Shards,
}

/// Watches the git-managed kinds and reports their drift to gitsync.
fn spawn_drift_reporting(shutdown: &Shutdown, config: &Config, pipeline: DriftPipeline) {
    let DriftPipeline {
        resolver,
        channel,
        watchers,
        metrics,
        gates,
        shards,
    } = pipeline;
    let token = shutdown.token();
    let (seen, seen_rx) = mpsc::channel(1024);
    let (debounced, debounced_rx) = mpsc::channel(1024);
    for (kind, gate) in config.drift_kinds.iter().zip(gates) {
        shutdown.spawn(drift::watch::watch_kind(
            drift::watch::KindWatch {
                resolver: resolver.clone(),
                kind: kind.clone(),
                label: config.management_label.clone(),
                listed: gate,
                shards: shards.clone(),
            },
            seen.clone(),
            metrics.clone(),
            token.clone(),
        ));
    }
    shutdown.spawn(drift::debounce::debounce(
        seen_rx,
        debounced,
        watchers,
        config.drift_window,
        token.clone(),
    ));
    shutdown.spawn(drift::report::report(
        SyncServiceClient::new(channel),
        debounced_rx,
        config.report_backoff,
        metrics,
        token,
    ));
}
