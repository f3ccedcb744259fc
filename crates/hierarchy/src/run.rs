//! The process: flags → [`Component`] → leadership → controller, with the admin server, the
//! `HierarchyService` gRPC server and graceful shutdown around it.
//!
//! Only the leader runs the controller; the others wait (and are not ready). The readiness
//! gate opens once the caches synced. Stopping is every component's one stop sequence
//! (`arbor_runtime::Component::run_until_stopped`): a lost Lease stops the controller and ends
//! the process with an error; the stop waits for the controller's writes in flight at most the
//! grace period (`--shutdown-grace`) before the Lease is released; past it, the Lease is left
//! to expire.

use arbor_api::hierarchy_config::{self, HierarchyConfigError};
use arbor_policy::keys::{InvalidDomain, Keys};
use arbor_runtime::component::{Component, LostLease};

use crate::args::Args;
use crate::controller::{self, Settings, StartError};
use crate::metrics::Metrics;

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("--domain: {0}")]
    Domain(#[from] InvalidDomain),
    #[error("--config: {0}")]
    Config(#[from] HierarchyConfigError),
    #[error(transparent)]
    Component(#[from] arbor_runtime::StartError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    LostLease(#[from] LostLease),
}

/// Runs until a signal (or loss of leadership).
pub async fn run(args: Args) -> Result<(), RunError> {
    // Compiled here for the domain, so that an error in the file names it before anything starts.
    let keys = Keys::for_domain(&args.domain)?;
    let config = hierarchy_config::load(args.config.as_deref(), &keys)?.config;
    let mut component = Component::start("hierarchy", args.common).await?;
    let metrics = Metrics::register(component.metrics()?);
    let caches = component.readiness().gate("hierarchy-caches");
    component.serve_admin().await?;

    let gate = component.campaign();
    if !gate.acquired_or_drained().await? {
        return Ok(());
    }
    let settings = Settings {
        domain: args.domain,
        config,
        reporter: component.reporter(),
    };
    let token = component.shutdown().token();
    let running = controller::start(component.client(), settings, metrics, token.clone()).await?;
    let grpc_addr = component
        .serve_grpc(tonic::service::Routes::new(running.service().into_server()))
        .await?;
    tracing::info!(%grpc_addr, "serving HierarchyService");
    // The controller is the component's work: the stop waits for its writes in flight within
    // the grace period, and a reconcile stuck in a write past it is abandoned (logged,
    // counted) with the Lease left to expire rather than released under it
    // (`Component::run_until_stopped`).
    let work = async move {
        tokio::select! {
            () = running.synced() => caches.open(),
            () = token.cancelled() => {}
        }
        token.cancelled().await;
        caches.close();
        running.stop().await;
    };
    component.run_until_stopped(gate, work).await?;
    Ok(())
}
