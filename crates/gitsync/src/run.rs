//! The process: flags → settings → client, admin server, leadership → controllers and the
//! `SyncService` gRPC server, with graceful shutdown around them.
//!
//! Flag combinations that seeds/002 and Faros rule out (`--namespace` with
//! `--gittrack-mode=Disabled`, or with any `--clustergittrack-mode` but `Disabled`, the default
//! being IncludeNamespaced; both modes Disabled) stop the process before it connects to
//! anything, with the policy's message naming the flags and saying which to set. With leader
//! election on, only the leader runs the controllers; a lost Lease ends the process with an
//! error, as for every component (see `arbor_runtime::component`). With `--shards N` (N > 1)
//! every replica runs them, each syncing the sources of the shards it holds
//! ([`crate::controller::shard`]).
//!
//! Stopping is every component's one stop sequence ([`Component::run_until_stopped`]), in an
//! order that never leaves a shard with no one to answer for it longer than its hand-over:
//! the controllers and the drift re-applies in flight
//! ([`crate::grpc`]) stop first (a round finishes the writes it sent and starts no other,
//! see [`crate::controller::shard`]), then the shard Leases are given up, and
//! only then does the `SyncService` server close ([`arbor_runtime::shutdown`]). Meanwhile the
//! server answers questions about the shards whose Leases this replica still holds, from what
//! its rounds recorded (nobody else writes for those shards until the Leases are given up),
//! and starts no new work. The controllers are work the shutdown waits for, within its grace
//! period (`--shutdown-grace`): one whose write is still unanswered then is abandoned, logged
//! and counted, and the Leases are left to expire rather than given up under that write.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arbor_policy::keys::{Keys, ManagementLabel};
use arbor_policy::ownership::{FlagError, ModeFlags};
use arbor_runtime::component::{Component, LostLease, StartError};
use arbor_runtime::flags::{CommonArgs, parse_duration};
use arbor_runtime::shards::ShardArgs;
use arbor_runtime::shutdown::{Drained, Shutdown};
use kube::runtime::events::Recorder;
use tokio::task::JoinHandle;

use crate::apply::{Applier, Discovery};
use crate::controller::metrics::Metrics;
use crate::controller::{Context, Registry, Settings, reconcile};
use crate::fetch::{FetchSettings, Fetcher};
use crate::grpc::SyncServiceImpl;
use crate::peer_replicas::PeerReplicas;

/// `arbor-gitsync`'s flags.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "arbor-gitsync",
    about = "Keeps the cluster in the state that GitTracks and ClusterGitTracks declare."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub modes: ModeFlags,

    #[command(flatten)]
    pub sharding: ShardArgs,

    /// The largest fraction of a source's objects one round may delete without the source's
    /// allow-mass-prune annotation.
    #[arg(long, env = "ARBOR_MAX_PRUNE_FRACTION", default_value_t = 0.5, value_parser = parse_fraction)]
    pub max_prune_fraction: f64,

    /// The window the mass-prune guard counts over: within it, a source may lose at most
    /// --max-prune-fraction of the most objects it held (its high-water mark).
    #[arg(long, env = "ARBOR_PRUNE_WINDOW", default_value = "1h", value_parser = parse_duration)]
    pub prune_window: Duration,

    /// How often every object is compared with git, so drift is repaired without an observer.
    #[arg(long, env = "ARBOR_RESYNC_PERIOD", default_value = "10m", value_parser = parse_duration)]
    pub resync_period: Duration,

    /// How many writes gitsync sends to the API server at once, over all sources (objects,
    /// tracking objects, finalizers). kube-apiserver's API Priority and Fairness puts a
    /// service account's requests in the workload-low priority level, which holds about 245 of
    /// a default server's 600 concurrent requests (--max-requests-inflight 400 plus
    /// --max-mutating-requests-inflight 200, shared by nominal shares 100 of 245): 16 keeps a
    /// large sync under 7 % of that level, so other tenants' controllers are not queued behind
    /// it, and at 10-20 ms a write it still makes about 1,000 writes per second.
    #[arg(long, env = "ARBOR_MAX_CONCURRENT_WRITES", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub max_concurrent_writes: u16,

    /// The label that lets Arbor update or delete an object, as `key=value`.
    #[arg(
        long,
        env = "ARBOR_MANAGEMENT_LABEL",
        default_value = "arbor.dev/managed=enabled"
    )]
    pub management_label: ManagementLabel,

    /// Where repositories are cached.
    #[arg(long, env = "ARBOR_CACHE_DIR", default_value = "/var/cache/arbor")]
    pub cache_dir: PathBuf,

    /// Accept `file://` repository URLs. They read the controller's own file system, so this is
    /// for tests and demos only; even then no source may fetch from the cache directory.
    #[arg(
        long,
        env = "ARBOR_ALLOW_FILE_REPOSITORIES",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub allow_file_repositories: bool,

    /// The ServiceAccount, in a GitTrack's own namespace, that a GitTrack without
    /// spec.serviceAccountName applies as (gitsync impersonates it). Empty: gitsync's own
    /// identity. ClusterGitTracks always apply as gitsync.
    #[arg(long, env = "ARBOR_DEFAULT_SERVICE_ACCOUNT", default_value = "")]
    pub default_service_account: String,

    /// Refuse to sync a GitTrack that has no service account to apply as (neither
    /// spec.serviceAccountName nor --default-service-account).
    #[arg(
        long,
        env = "ARBOR_REQUIRE_SERVICE_ACCOUNT",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub require_service_account: bool,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    let fraction: f64 = text
        .parse()
        .map_err(|_| format!("invalid fraction {text:?}: use a number between 0 and 1"))?;
    if (0.0..=1.0).contains(&fraction) {
        Ok(fraction)
    } else {
        Err(format!(
            "invalid fraction {text:?}: use a number between 0 and 1"
        ))
    }
}

impl Args {
    /// The controllers' settings; refuses the flag combinations the seed rules out.
    pub fn settings(&self) -> Result<Settings, RunError> {
        let scope = self.modes.scope()?;
        Ok(Settings {
            scope,
            label: self.management_label.clone(),
            keys: Keys::default(),
            max_prune_fraction: self.max_prune_fraction,
            prune_window: self.prune_window,
            resync_period: self.resync_period,
            max_concurrent_writes: usize::from(self.max_concurrent_writes),
            cache_dir: self.cache_dir.clone(),
            fetch: FetchSettings {
                allow_file_repositories: self.allow_file_repositories,
                ..FetchSettings::default()
            },
            crd_patience: Duration::from_secs(30),
            default_service_account: Some(self.default_service_account.clone())
                .filter(|name| !name.is_empty()),
            require_service_account: self.require_service_account,
            shards: self.sharding.shards,
        })
    }
}

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Flags(#[from] FlagError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Grpc(#[from] arbor_runtime::grpc::GrpcError),
    #[error("cannot create the cache directory {path}: {source}")]
    CacheDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    LostLease(#[from] LostLease),
}

/// Runs until a signal (or loss of leadership).
pub async fn run(args: Args) -> Result<(), RunError> {
    let settings = args.settings()?;
    let component = Component::start("gitsync", args.common.clone()).await?;
    let Some(running) = start(component, settings).await? else {
        return Ok(());
    };
    running.wait().await
}

/// A running instance.
pub struct Running {
    shutdown: Shutdown,
    /// The component's one stop sequence ([`Component::run_until_stopped`]), running.
    stopped: JoinHandle<Result<Drained, LostLease>>,
    grpc_addr: SocketAddr,
    ctx: Context,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("grpc_addr", &self.grpc_addr)
            .finish_non_exhaustive()
    }
}

/// Starts an instance on `component` (tests build it with `Component::with_config`, as
/// [`run`] does through `Component::start`). Returns `None` when shut down while waiting for
/// leadership.
pub async fn start(
    mut component: Component,
    settings: Settings,
) -> Result<Option<Running>, RunError> {
    std::fs::create_dir_all(&settings.cache_dir).map_err(|source| RunError::CacheDir {
        path: settings.cache_dir.clone(),
        source,
    })?;
    let metrics = Arc::new(Metrics::register(component.metrics()?));
    let ready = component.readiness().gate("gitsync-controllers");
    component.serve_admin().await?;
    let (gate, shards) = component.campaign_shards(settings.shards, metrics.shards.clone());
    if !gate.acquired_or_drained().await? {
        return Ok(None);
    }
    let client = component.client();
    let (registry, triggers) = Registry::new();
    let reporter = component.reporter();
    let fetcher = Fetcher::new(&settings.cache_dir, settings.fetch.clone()).map_err(|error| {
        RunError::CacheDir {
            path: error.path,
            source: error.source,
        }
    })?;
    let ctx = Context {
        client: client.clone(),
        fetcher,
        impersonation: Arc::new(crate::controller::identity::Impersonation::new(
            client.clone(),
        )),
        applier: Applier::new(Discovery::new(client.clone()), settings.label.clone()),
        writes: Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_writes)),
        settings: Arc::new(settings),
        registry: Arc::new(registry),
        tracking: Arc::default(),
        metrics,
        recorder: Recorder::new(client, reporter),
        shards,
        sources: Arc::default(),
        stopping: component.shutdown().token(),
    };
    let controllers = reconcile::controllers(ctx.clone(), triggers, &component.shutdown().token());
    let stopped = tokio::spawn(component.run_until_stopped(gate, controllers));

    let grpc_addr = component
        .serve_grpc(tonic::service::Routes::new(
            SyncServiceImpl::new(
                ctx.clone(),
                PeerReplicas::new(
                    ctx.shards.clone(),
                    component.tls().cloned(),
                    component.grpc_peer_server_name().map(str::to_owned),
                ),
                component.shutdown().clone(),
            )
            .into_server(),
        ))
        .await?;
    component.advertise_grpc(&ctx.shards, grpc_addr)?;
    tracing::info!(%grpc_addr, "serving SyncService");
    ready.open();
    Ok(Some(Running {
        shutdown: component.shutdown().clone(),
        stopped,
        grpc_addr,
        ctx,
    }))
}

impl Running {
    /// The address `SyncService` listens on.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The controllers' shared context (registry, settings).
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The replica's shutdown: what stopping waits for, and what it abandoned.
    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// Waits for a signal or the loss of leadership, then for the stop (see the module docs).
    pub async fn wait(self) -> Result<(), RunError> {
        match self.stopped.await {
            Ok(stopped) => stopped.map(drop).map_err(RunError::from),
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(_cancelled) => Ok(()),
        }
    }

    /// Stops the controllers, releases the Leases, then closes the servers (see the module
    /// docs).
    pub async fn stop(self) {
        self.shutdown.trigger();
        if let Err(error) = self.wait().await {
            tracing::error!(%error, "stopping");
        }
    }
}
