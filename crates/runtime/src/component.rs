//! The start-up sequence every controller binary shares.
//!
//! A controller's `run` builds a [`Component`] from its [`CommonArgs`], registers its metrics
//! and readiness gates, serves the admin endpoints, and then (with leader election on) waits
//! for the Lease before it starts reconciling. Keeping that order in one place means every
//! component answers `/healthz` before it leads, reports not-ready until its caches sync, and
//! releases its Lease on SIGTERM.

use std::net::SocketAddr;

use prometheus_client::registry::Registry;

use crate::admin::{self, Readiness};
use crate::authz::{Authz, AuthzError};
use crate::client::{self, ClientError};
use crate::flags::CommonArgs;
use crate::grpc::{self, GrpcError, TlsMaterial};
use crate::lease::{LeaderElector, Leadership, LeaseConfig};
use crate::listener::{Limits, ListenerMetrics};
use crate::metrics::MetricsRegistry;
use crate::shutdown::Shutdown;
use crate::telemetry::{self, InvalidLogFilter};

/// Start-up failed before the component could do any work.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Logging(#[from] InvalidLogFilter),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Grpc(#[from] GrpcError),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("cannot serve the admin endpoints on {address}: {source}")]
    Admin {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("the admin server is already running; register metrics before serving it")]
    AdminAlreadyServed,
    #[error(transparent)]
    Authz(#[from] AuthzError),
}

/// A running controller process: its client, metrics, readiness, TLS material and shutdown.
pub struct Component {
    name: &'static str,
    args: CommonArgs,
    client: kube::Client,
    tls: Option<TlsMaterial>,
    metrics: Option<MetricsRegistry>,
    limits: Limits,
    readiness: Readiness,
    shutdown: Shutdown,
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Component")
            .field("name", &self.name)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

impl Component {
    /// Sets up logging, signal handling, TLS material and the Kubernetes client.
    pub async fn start(name: &'static str, args: CommonArgs) -> Result<Self, StartError> {
        telemetry::init(&args.log_level, args.log_format)?;
        let client = client::client(&args).await?;
        Self::with_client(name, args, client)
    }

    /// As [`Component::start`], with a client the caller built (tests, the demo); logging is
    /// left to the caller.
    pub fn with_client(
        name: &'static str,
        args: CommonArgs,
        client: kube::Client,
    ) -> Result<Self, StartError> {
        let tls = TlsMaterial::load(&args.tls)?;
        let shutdown = Shutdown::new(args.shutdown_grace);
        shutdown.trigger_on_signals().map_err(StartError::Signals)?;
        let mut metrics = MetricsRegistry::new();
        let limits = Limits::new(
            args.listener.clone(),
            ListenerMetrics::register(metrics.component(name)),
        );
        Ok(Self {
            name,
            args,
            client,
            tls,
            metrics: Some(metrics),
            limits,
            readiness: Readiness::new(),
            shutdown,
        })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn args(&self) -> &CommonArgs {
        &self.args
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.tls.as_ref()
    }

    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// The component's metrics sub-registry (`arbor_<name>_…`); only before [`serve_admin`].
    ///
    /// [`serve_admin`]: Component::serve_admin
    pub fn metrics(&mut self) -> Result<&mut Registry, StartError> {
        let name = self.name;
        self.metrics
            .as_mut()
            .map(|registry| registry.component(name))
            .ok_or(StartError::AdminAlreadyServed)
    }

    /// Serves `/metrics`, `/healthz` and `/readyz`; ends metric registration.
    pub async fn serve_admin(&mut self) -> Result<SocketAddr, StartError> {
        let registry = self.metrics.take().ok_or(StartError::AdminAlreadyServed)?;
        let address = self.args.admin_addr;
        admin::serve(
            address,
            registry.freeze(),
            self.readiness.clone(),
            self.limits.clone(),
            self.shutdown.token(),
        )
        .await
        .map_err(|source| StartError::Admin { address, source })
    }

    /// The bounds and metrics of this component's listeners.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Serves `routes` on `--grpc-addr` through the bounded listener, with this component's
    /// TLS and `--grpc-allow` rules, until shutdown; returns the bound address.
    pub async fn serve_grpc(
        &self,
        routes: tonic::service::Routes,
    ) -> Result<SocketAddr, StartError> {
        let authz = Authz::from_args(&self.args.authz)?;
        let listener =
            grpc::listener(self.args.grpc_addr, self.tls.as_ref(), self.limits.clone()).await?;
        let address = listener.local_addr();
        self.shutdown
            .spawn(listener.serve(grpc::router(routes, authz), self.shutdown.token()));
        Ok(address)
    }

    /// Campaigns for the component's Lease when leader election is on; `None` when it is off
    /// (a single replica, tests).
    pub fn campaign(&self) -> Option<Leadership> {
        let election = &self.args.leader_election;
        if !election.enabled {
            return None;
        }
        let identity = election.identity.clone().unwrap_or_else(default_identity);
        let config = LeaseConfig {
            name: election
                .lease_name
                .clone()
                .unwrap_or_else(|| format!("arbor-{}", self.name)),
            namespace: election.lease_namespace.clone(),
            identity,
            lease_duration: election.lease_duration,
            renew_interval: election.renew_interval,
        };
        Some(LeaderElector::new(self.client.clone(), config).spawn(self.shutdown.token()))
    }
}

/// The host name plus the process id, unique enough when `POD_NAME` is not set.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "arbor".to_owned());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_identity_is_distinct_per_process() {
        assert!(default_identity().ends_with(&format!("-{}", std::process::id())));
    }
}
