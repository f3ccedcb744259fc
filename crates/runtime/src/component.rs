//! The start-up sequence every Arbor binary shares.
//!
//! A binary's `run` builds a [`Component`] from its [`CommonArgs`], registers its metrics
//! and readiness gates, serves the admin endpoints and its gRPC services
//! ([`Component::serve_grpc`], the one way any component serves gRPC), and then, with leader
//! election on, waits for the Lease ([`LeaseGate::acquired`]) before it starts reconciling.
//! Keeping that order in one place means every component answers `/healthz` before it leads,
//! reports not-ready until its caches sync, and releases its Lease on SIGTERM.
//!
//! ## Who this replica is
//!
//! [`Component::identity`] names the replica in its Lease and in the Events it reports
//! ([`Component::reporter`]): `--lease-identity`, which the chart fills with the pod name from
//! the downward API (`POD_NAME`), else the host name and the process id. Never the process id
//! alone: it is 1 in every container, so every replica would claim to hold the same Lease.
//!
//! ## A lost Lease ends the process
//!
//! When a leader finds another replica holding its Lease, or cannot renew it within its renew
//! deadline (two thirds of the lease duration, [`crate::lease::renew_deadline`]), [`LeaseGate::hold`] logs why, starts shutdown (every controller loop selects on
//! it, so reconciling stops), and returns [`LostLease`]; the binary exits non-zero and the
//! Deployment restarts it, as a fresh candidate. This is what client-go's leader election
//! does for kube-controller-manager (its `OnStoppedLeading` exits the process) and what
//! kube-rs controllers with Lease-based election do: going back to following inside the same
//! process would need every watch, cache and half-done write to be torn down and rebuilt
//! correctly, while a restart gets that for free and makes the loss visible as a restart
//! count. One behaviour for every controller, because the gate is the only way one leads.
//! The webhook elects no leader (every replica answers admission), so it never campaigns.
//!
//! ## One stop sequence
//!
//! Every leader-elected controller runs its work and stops it through
//! [`Component::run_until_stopped`], so that the order lives in one place:
//!
//! 1. the work starts only once this replica leads (at once without leader election), as work
//!    the shutdown waits for ([`Shutdown::spawn`]);
//! 2. the stop starts on SIGTERM / SIGINT, on a lost Lease ([`LeaseGate::hold`]), on a caller's
//!    [`Shutdown::trigger`], or when the work ends by itself (a leader whose work is gone must
//!    not go on holding its Lease);
//! 3. the tracked work is drained within `--shutdown-grace`; only then is the Lease released,
//!    and not at all when the grace period ran out ([`Drained::TimedOut`]) or tracked work gave
//!    up a write it had sent ([`Drained::Withheld`]): the Lease then expires on its own once
//!    the process is gone;
//! 4. the servers stop last ([`Shutdown::drain`]);
//! 5. a lost Lease is the answer ([`LostLease`]) however the drain ended, so the binary exits
//!    non-zero; a panic of the work is resumed once the drain is over.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use kube::runtime::events::Reporter;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::admin::{self, Readiness};
use crate::authz::{Authz, AuthzError};
use crate::client::{self, ClientError};
use crate::flags::{CommonArgs, LeaderElectionArgs};
use crate::grpc::{self, GrpcError, TlsMaterial};
use crate::lease::{LeaderElector, LeaseConfig};
use crate::listener::{Limits, ListenerMetrics};
use crate::metrics::MetricsRegistry;
use crate::shards::{PeerAddress, ShardConfig, ShardMetrics, Shards};
use crate::shutdown::{Drained, Shutdown};
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

/// This replica lost its Lease: it stopped reconciling and must exit (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "lost the Lease {namespace}/{name} (another replica took it, or it could not be renewed within the renew deadline); exiting so that the Deployment restarts this replica as a candidate"
)]
pub struct LostLease {
    pub namespace: String,
    pub name: String,
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
    identity: String,
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Component")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

impl Component {
    /// Sets up logging, signal handling, TLS material and the Kubernetes client.
    pub async fn start(name: &'static str, args: CommonArgs) -> Result<Self, StartError> {
        telemetry::init(&args.log_level, args.log_format)?;
        let config = client::config(&args).await?;
        Self::with_config(name, args, config)
    }

    /// As [`Component::start`], with the client's configuration the caller chose (tests, the
    /// demo); logging is left to the caller. The client stops resending throttled requests
    /// once the component begins to stop ([`crate::throttle`]). There is no way to hand a
    /// component a client built elsewhere: its resends would go on while it stops, so a test
    /// built that way would not exercise the stop the binaries make.
    pub fn with_config(
        name: &'static str,
        args: CommonArgs,
        config: kube::Config,
    ) -> Result<Self, StartError> {
        let shutdown = Shutdown::new(args.shutdown_grace);
        let client = client::with_retries_until(config, shutdown.token())?;
        let tls = TlsMaterial::load(&args.tls)?;
        shutdown.trigger_on_signals().map_err(StartError::Signals)?;
        let mut metrics = MetricsRegistry::new();
        metrics.component(name).register(
            "shutdown_work_abandoned",
            "Tracked work (reconciles, re-applies) still running when the shutdown grace period \
             ran out; the Lease was then left to expire rather than released under it",
            shutdown.abandoned_work(),
        );
        let limits = Limits::new(
            args.listener.clone(),
            ListenerMetrics::register(metrics.component(name)),
        );
        let identity = replica_identity(&args.leader_election);
        Ok(Self {
            identity,
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

    /// Sends every request of the component through `around`, built on the client
    /// [`Component::with_config`] made, which keeps stopping its resends with the component
    /// (tests put a fault there; see `arbor_testkit::client_faults`).
    pub fn with_client_around(mut self, around: impl FnOnce(kube::Client) -> kube::Client) -> Self {
        self.client = around(self.client);
        self
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// This replica's name in its Lease and its Events (see the module docs).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Who reports this component's Events: `arbor-<name>`, from this replica.
    pub fn reporter(&self) -> Reporter {
        Reporter {
            controller: format!("arbor-{}", self.name),
            instance: Some(self.identity.clone()),
        }
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
    /// TLS and `--grpc-allow` rules, until shutdown's last phase (after the Leases are
    /// released: see [`Shutdown::spawn_server`]); returns the bound address.
    pub async fn serve_grpc(
        &self,
        routes: tonic::service::Routes,
    ) -> Result<SocketAddr, StartError> {
        let authz = Authz::from_args(&self.args.authz)?;
        let listener =
            grpc::listener(self.args.grpc_addr, self.tls.as_ref(), self.limits.clone()).await?;
        let address = listener.local_addr();
        self.shutdown.spawn_server(
            listener.serve(grpc::router(routes, authz), self.shutdown.serving_token()),
        );
        Ok(address)
    }

    /// Tells the other replicas where this one serves gRPC (`bound`, the address
    /// [`Component::serve_grpc`] returned), so that they pass it requests about the shards it
    /// holds: `--grpc-advertise-address` when set, else the bound address when it is a
    /// loopback one (tests, the demo). Nothing with one shard.
    pub fn advertise_grpc(&self, shards: &Shards, bound: SocketAddr) -> Result<(), StartError> {
        if shards.count() <= 1 {
            return Ok(());
        }
        let server_name = self.args.grpc_advertise_server_name.clone();
        let address = match &self.args.grpc_advertise_address {
            Some(address) => grpc::bracket_ipv6_host(address).into_owned(),
            None if bound.ip().is_loopback() => {
                let scheme = if self.tls.as_ref().is_some_and(TlsMaterial::serves) {
                    "https"
                } else {
                    "http"
                };
                format!("{scheme}://{bound}")
            }
            None => {
                tracing::warn!(
                    "no --grpc-advertise-address: the other replicas cannot pass this one the \
                     requests about its shards, so those requests fail (Unavailable, naming this \
                     replica) when they reach another replica"
                );
                return Ok(());
            }
        };
        // Checked now, so that a wrong flag stops the start instead of every forwarded request.
        grpc::endpoint_verified_as(&address, self.tls.as_ref(), server_name.as_deref())?;
        shards.advertise(PeerAddress { address });
        Ok(())
    }

    /// The name the other replicas' serving certificates must carry when this one calls them
    /// (`--grpc-advertise-server-name`; the address's host when unset).
    pub fn grpc_peer_server_name(&self) -> Option<&str> {
        self.args.grpc_advertise_server_name.as_deref()
    }

    /// Campaigns for the component's Lease when leader election is on; the gate lets every
    /// replica through when it is off (a single replica, tests). The campaign is shutdown's
    /// second phase: the Lease is released after every writer stopped, before the process exits.
    pub fn campaign(&self) -> LeaseGate {
        let election = &self.args.leader_election;
        let shutdown = self.shutdown.clone();
        if !election.enabled {
            return LeaseGate::open(shutdown);
        }
        let config = LeaseConfig {
            name: election
                .lease_name
                .clone()
                .unwrap_or_else(|| format!("arbor-{}", self.name)),
            namespace: election.lease_namespace.clone(),
            identity: self.identity.clone(),
            lease_duration: election.lease_duration,
            renew_interval: election.renew_interval,
        };
        let lease = LostLease {
            namespace: config.namespace.clone(),
            name: config.name.clone(),
        };
        tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %self.identity, "campaigning for the Lease");
        // The campaign stops (and releases the Lease) only in shutdown's second phase, once
        // every writer has finished: see `arbor_runtime::shutdown`.
        let leadership =
            LeaderElector::new(self.client.clone(), config).spawn(shutdown.release_token());
        let leading = leadership.subscribe();
        shutdown.spawn_release(leadership.finished());
        LeaseGate {
            lease: Some((lease, leading)),
            lost: Arc::default(),
            led: Arc::default(),
            shutdown,
        }
    }
}

impl Component {
    /// [`Component::campaign`] for a component whose work can be shared (`--shards`): with
    /// one shard, or without leader election, exactly `campaign` and every shard held; with
    /// more, every replica works on the shards it holds (see [`crate::shards`]) and the gate
    /// only waits for shutdown. The shard Leases are given up in shutdown's second phase, as
    /// the component's Lease is.
    pub fn campaign_shards(&self, shards: u32, metrics: ShardMetrics) -> (LeaseGate, Shards) {
        let election = &self.args.leader_election;
        if shards <= 1 || !election.enabled {
            return (
                self.campaign(),
                Shards::all(shards, &self.identity, metrics, self.shutdown.token()),
            );
        }
        let config = ShardConfig {
            prefix: election
                .lease_name
                .clone()
                .unwrap_or_else(|| format!("arbor-{}", self.name)),
            namespace: election.lease_namespace.clone(),
            identity: self.identity.clone(),
            shards,
            lease_duration: election.lease_duration,
            renew_interval: election.renew_interval,
        };
        let (held, manager) = crate::shards::spawn(
            self.client.clone(),
            config,
            metrics,
            self.shutdown.token(),
            self.shutdown.release_token(),
        );
        self.shutdown.spawn_release(async move {
            if let Err(error) = manager.await {
                tracing::error!(%error, "the shard Lease manager failed");
            }
        });
        (LeaseGate::open(self.shutdown.clone()), held)
    }

    /// The one stop sequence of every leader-elected controller (see the module docs): runs
    /// `work` as tracked work once this replica leads through `gate`, waits for the stop
    /// (a signal, a lost Lease, [`Shutdown::trigger`], or `work` ending by itself), drains
    /// the tracked work within `--shutdown-grace` and then releases the Lease, unless the drain
    /// says it must be left to expire. Answers how the drain ended, or [`LostLease`].
    ///
    /// `work` must end soon after [`Shutdown::token`] is cancelled. The returned future owns
    /// what it needs: a binary awaits it, an in-process start (tests) spawns it and keeps the
    /// handle.
    pub fn run_until_stopped<W>(
        &self,
        gate: LeaseGate,
        work: W,
    ) -> impl Future<Output = Result<Drained, LostLease>> + Send + 'static + use<W>
    where
        W: Future<Output = ()> + Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        async move {
            let leads = gate.acquired().await;
            // A caller that started its work on an earlier acquisition (and so has led) gets it
            // tracked even if the Lease was lost since: the drain then waits for it, stopping.
            let mut work = gate.has_led().then(|| shutdown.spawn(work));
            // How the work ended, when it ended before the stop began.
            let mut ended = None;
            let held = match (leads, work.as_mut()) {
                (Ok(true), Some(running)) => tokio::select! {
                    biased;
                    held = gate.hold() => held,
                    joined = running => {
                        if !shutdown.is_shutting_down() {
                            tracing::error!("the component's work ended before it was told to stop; stopping");
                        }
                        ended = Some(joined);
                        Ok(())
                    }
                },
                (leads, _) => leads.map(drop),
            };
            shutdown.trigger();
            let drained = shutdown.drain().await;
            let joined = match (ended, work) {
                (Some(joined), _) => Some(joined),
                (None, Some(running)) if running.is_finished() => Some(running.await),
                // Abandoned at the grace period: it ends with the process.
                (None, _) => None,
            };
            if let Some(Err(join)) = joined
                && join.is_panic()
            {
                std::panic::resume_unwind(join.into_panic());
            }
            held?;
            match gate.lost() {
                Some(lost) => Err(lost),
                None => Ok(drained),
            }
        }
    }
}

/// Whether this replica may act, and the lost-lease policy (see the module docs).
#[derive(Debug, Clone)]
pub struct LeaseGate {
    /// The Lease and whether this replica holds it; `None` without leader election.
    lease: Option<(LostLease, watch::Receiver<bool>)>,
    /// Set when [`LeaseGate::hold`] or [`LeaseGate::acquired`] found the Lease lost; shared by
    /// the gate's clones.
    lost: Arc<OnceLock<LostLease>>,
    /// Set once [`LeaseGate::acquired`] saw this replica lead; shared by the gate's clones.
    led: Arc<AtomicBool>,
    shutdown: Shutdown,
}

impl LeaseGate {
    /// A gate that lets this replica through until shutdown: no Lease to hold.
    fn open(shutdown: Shutdown) -> Self {
        Self {
            lease: None,
            lost: Arc::default(),
            led: Arc::default(),
            shutdown,
        }
    }

    /// The Lease this replica lost, if it lost it ([`LeaseGate::hold`], [`LeaseGate::acquired`],
    /// through any clone of the gate).
    pub fn lost(&self) -> Option<LostLease> {
        self.lost.get().cloned()
    }

    /// Whether this replica has led (or leads without leader election): work started on that
    /// acquisition may be running, even if the Lease was lost since.
    fn has_led(&self) -> bool {
        self.lease.is_none() || self.led.load(Ordering::SeqCst)
    }

    /// Records the loss of `lease` and starts shutdown; returns it.
    fn lose(&self, lease: &LostLease) -> LostLease {
        let lost = lease.clone();
        let _ = self.lost.set(lost.clone());
        self.shutdown.trigger();
        lost
    }

    /// Waits until this replica holds the Lease: `Ok(true)` then, `Ok(false)` when shutdown
    /// came first. Without leader election, `Ok(true)` at once. When the campaign ended
    /// without ever leading (its task died), this replica can never lead: it logs why, starts
    /// shutdown and answers [`LostLease`], so the binary exits non-zero instead of waiting,
    /// unready, for a Lease nobody campaigns for. Once this replica has led, it never waits to
    /// lead again: a Lease lost since is [`LostLease`] at once (the campaign goes on, and
    /// could win the Lease back after another replica wrote under it).
    pub async fn acquired(&self) -> Result<bool, LostLease> {
        let Some((lease, leading)) = &self.lease else {
            return Ok(true);
        };
        let mut leading = leading.clone();
        let token = self.shutdown.token();
        if self.led.load(Ordering::SeqCst) {
            if token.is_cancelled() {
                return Ok(false);
            }
            if *leading.borrow() {
                return Ok(true);
            }
            tracing::error!(error = %lease, "stopping");
            return Err(self.lose(lease));
        }
        tokio::select! {
            biased;
            () = token.cancelled() => Ok(false),
            held = leading.wait_for(|leading| *leading) => match held {
                Ok(_) => {
                    self.led.store(true, Ordering::SeqCst);
                    Ok(true)
                }
                Err(_) => {
                    tracing::error!(error = %lease, "the campaign for the Lease ended before this replica led");
                    Err(self.lose(lease))
                }
            },
        }
    }

    /// [`LeaseGate::acquired`] for a binary that waits for the Lease before it starts its
    /// work: when this replica will not lead (a stop, or a dead campaign), shutdown is drained
    /// before the answer, so the caller only has to return it. Not for a task that shutdown
    /// itself tracks, which the drain would wait for.
    pub async fn acquired_or_drained(&self) -> Result<bool, LostLease> {
        let led = self.acquired().await;
        if led != Ok(true) {
            self.shutdown.drain().await;
        }
        led
    }

    /// Waits while this replica may go on: `Ok` once shutdown starts; on a lost Lease, logs
    /// why, starts shutdown so every loop stops reconciling, and returns [`LostLease`] for the
    /// binary to exit non-zero with. Before this replica has led, it first waits to lead
    /// ([`LeaseGate::acquired`]): not leading yet is no loss.
    pub async fn hold(&self) -> Result<(), LostLease> {
        let token = self.shutdown.token();
        let Some((lease, leading)) = &self.lease else {
            token.cancelled().await;
            return Ok(());
        };
        if !self.acquired().await? {
            return Ok(());
        }
        let mut leading = leading.clone();
        tokio::select! {
            // A campaign that ends after shutdown began is a stop, not a lost Lease.
            biased;
            () = token.cancelled() => Ok(()),
            _ = leading.wait_for(|leading| !*leading) => {
                if token.is_cancelled() {
                    return Ok(());
                }
                tracing::error!(error = %lease, "stopping");
                Err(self.lose(lease))
            }
        }
    }
}

/// `--lease-identity` (`POD_NAME`) when given, else [`default_identity`].
fn replica_identity(election: &LeaderElectionArgs) -> String {
    election
        .identity
        .clone()
        .filter(|identity| !identity.is_empty())
        .unwrap_or_else(default_identity)
}

/// The host name plus the process id, unique enough when `POD_NAME` is not set.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_identity_is_distinct_per_process() {
        assert!(default_identity().ends_with(&format!("-{}", std::process::id())));
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    fn identity_from(flags: &[&str]) -> String {
        use clap::Parser as _;
        let cli = Cli::try_parse_from(std::iter::once("arbor").chain(flags.iter().copied()))
            .expect("flags parse");
        replica_identity(&cli.common.leader_election)
    }

    #[test]
    fn the_pod_name_is_the_identity_and_without_it_host_and_pid_never_a_bare_pid() {
        assert_eq!(
            identity_from(&["--lease-identity", "arbor-gitsync-7d9f-x2"]),
            "arbor-gitsync-7d9f-x2"
        );
        let pid = std::process::id().to_string();
        for flags in [&[][..], &["--lease-identity", ""][..]] {
            let identity = identity_from(flags);
            let (host, suffix) = identity.rsplit_once('-').expect("host-pid");
            assert_eq!(suffix, pid, "{identity}");
            assert!(!host.is_empty(), "{identity}");
            assert_ne!(identity, pid);
        }
    }
}
