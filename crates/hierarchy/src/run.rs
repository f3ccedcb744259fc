//! The process: flags → client → leadership → controller, with the admin server and graceful
//! shutdown around it.
//!
//! Only the leader runs the controller; the others wait (and are not ready). The readiness
//! gate opens once the caches synced. Losing the lease stops the controller and ends the
//! process with an error, so the replica restarts as a candidate rather than acting on a lease
//! it no longer holds.

use arbor_runtime::admin::{self, Readiness};
use arbor_runtime::authz::{Authz, AuthzError};
use arbor_runtime::lease::{LeaderElector, LeaseConfig};
use arbor_runtime::listener::{Limits, ListenerMetrics};
use arbor_runtime::metrics::MetricsRegistry;
use arbor_runtime::shutdown::Shutdown;

use crate::args::Args;
use crate::config::{self, ConfigFileError};
use crate::controller::{self, Settings, StartError};
use crate::metrics::Metrics;

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    ConfigFile(#[from] ConfigFileError),
    #[error(transparent)]
    Client(#[from] arbor_runtime::client::ClientError),
    #[error("cannot serve the admin endpoint on {addr}: {source}")]
    Admin {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Grpc(#[from] arbor_runtime::grpc::GrpcError),
    #[error(transparent)]
    Authz(#[from] AuthzError),
    #[error("lost the leader lease {0}; restarting as a candidate")]
    LostLeadership(String),
}

/// Runs until a signal (or loss of leadership).
pub async fn run(args: Args) -> Result<(), RunError> {
    let common = &args.common;
    let config = config::load(args.config.as_deref())?;
    let client = arbor_runtime::client::client(common).await?;

    let shutdown = Shutdown::new(common.shutdown_grace);
    shutdown.trigger_on_signals().map_err(RunError::Signals)?;
    let mut registry = MetricsRegistry::new();
    let metrics = Metrics::register(registry.component("hierarchy"));
    let limits = Limits::new(
        common.listener.clone(),
        ListenerMetrics::register(registry.component("hierarchy")),
    );
    let readiness = Readiness::new();
    let caches = readiness.gate("hierarchy-caches");
    admin::serve(
        common.admin_addr,
        registry.freeze(),
        readiness,
        limits.clone(),
        shutdown.token(),
    )
    .await
    .map_err(|source| RunError::Admin {
        addr: common.admin_addr,
        source,
    })?;

    let identity = common
        .leader_election
        .identity
        .clone()
        .unwrap_or_else(|| format!("arbor-hierarchy-{}", std::process::id()));
    let lease_name = common
        .leader_election
        .lease_name
        .clone()
        .unwrap_or_else(|| "arbor-hierarchy".into());
    let leadership = common.leader_election.enabled.then(|| {
        LeaderElector::new(
            client.clone(),
            LeaseConfig {
                name: lease_name.clone(),
                namespace: common.leader_election.lease_namespace.clone(),
                identity: identity.clone(),
                lease_duration: common.leader_election.lease_duration,
                renew_interval: common.leader_election.renew_interval,
            },
        )
        .spawn(shutdown.token())
    });
    if let Some(leadership) = &leadership {
        tracing::info!(lease = %lease_name, %identity, "waiting for leadership");
        let token = shutdown.token();
        tokio::select! {
            () = leadership.acquired() => {}
            () = token.cancelled() => return Ok(()),
        }
    }

    let settings = Settings {
        domain: args.domain.clone(),
        config,
        instance: Some(identity),
    };
    let running = controller::start(client, settings, metrics, shutdown.token()).await?;
    let token = shutdown.token();
    serve_grpc(common, limits, &running, &shutdown).await?;
    tokio::select! {
        () = running.synced() => caches.open(),
        () = token.cancelled() => {}
    }

    let lost = async {
        match &leadership {
            Some(leadership) => leadership.lost().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        // On shutdown the campaign releases the Lease, so both are ready: a stop is a stop,
        // not a lost lease.
        biased;
        () = token.cancelled() => Ok(()),
        () = lost => Err(RunError::LostLeadership(lease_name)),
    };
    caches.close();
    running.stop().await;
    shutdown.trigger();
    if let Some(leadership) = leadership {
        leadership.finished().await;
    }
    shutdown.drain().await;
    outcome
}

/// Serves `HierarchyService` on `--grpc-addr` through the bounded listener (TLS from the
/// flags, plaintext only on loopback; `--grpc-allow` rules).
async fn serve_grpc(
    common: &arbor_runtime::flags::CommonArgs,
    limits: Limits,
    running: &controller::Running,
    shutdown: &Shutdown,
) -> Result<(), RunError> {
    let tls = arbor_runtime::grpc::TlsMaterial::load(&common.tls)?;
    let authz = Authz::from_args(&common.authz)?;
    let listener = arbor_runtime::grpc::listener(common.grpc_addr, tls.as_ref(), limits).await?;
    let addr = listener.local_addr();
    let routes = tonic::service::Routes::new(running.service().into_server());
    tracing::info!(%addr, "serving HierarchyService");
    shutdown.spawn(listener.serve(arbor_runtime::grpc::router(routes, authz), shutdown.token()));
    Ok(())
}
