//! Sharing one controller's work across replicas through shard Leases (`--shards N`).
//!
//! With `--shards 1` (the default) nothing here runs: the component's one Lease decides which
//! replica works, as always. With `N > 1` every replica works, each on the objects of the
//! shards it holds; an object's shard is [`arbor_policy::shards::shard_of`] its uid.
//!
//! ## The Leases
//!
//! - `<component>-shard-<i>` for each shard `i`: its holder works on the shard;
//! - `<component>-member-<identity>` for each replica: it says the replica is alive, so a
//!   replica that holds nothing yet (just started) still counts when the others compute their
//!   fair share ([`arbor_policy::shards::plan_moves`]) and give up their surplus.
//!
//! Every renew interval the manager lists the namespace's Leases once, judges each holder's
//! expiry by its own clock ([`LeaderElector::observe`]), asks the policy which shards to keep,
//! take and give up, and writes only the Leases it holds or takes. A dead replica's shards are
//! free once their Leases have gone unrenewed for a lease duration.
//!
//! ## Never two writers for one shard
//!
//! A replica works on a shard only while [`Shards::holds`] it: it renewed the shard's Lease
//! less than the renew deadline (two thirds of the lease duration, as client-go's 10 s of 15 s)
//! before now, counted from *before* the renewal was sent. Another replica takes the shard no
//! sooner than a full lease duration after it saw that renewal, so the first has stopped with
//! a third of a lease duration to spare, whatever happened to its requests.
//!
//! Work on a shard runs under a [`ShardGuard`], which the controller checks right before each
//! batch of writes. Once the replica begins to stop, no shard is held for work any more (with
//! one shard as with many): work in flight finishes the write it sent and starts no other,
//! and the Leases are given up after it ([`crate::shutdown`]), except the Lease of a shard
//! whose work gave up a write it had sent ([`ShardGuard::withhold_release`]), which is left to
//! expire: only that shard waits for expiry, the others change hands at once. Giving a shard
//! up is a drain: the shard stops counting as held at once (no
//! new guard, no new batch), its Lease is still renewed while any guard is out, and only when
//! the last guard is dropped is the Lease deleted, so its next holder never starts beside a
//! batch still writing.
//!
//! ## Answering for a shard
//!
//! Questions about a shard's objects (gitsync's GetDeclared, GetStatus, ...) are answered by
//! the replica whose Lease it is, for as long as it is: [`Shards::answers_for`] also covers a
//! shard being given up (no new work, its Lease not yet deleted), so a replica that stops keeps
//! answering until its successor can take the shard, and never after it gave the Lease up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arbor_policy::shards::{ShardView, plan_moves, shard_of};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Preconditions};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{OwnedRwLockReadGuard, RwLock, watch};
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;

use crate::lease::{LeaderElector, LeaseConfig, Role};
use crate::shutdown::Shutdown;

/// `--shards`: how many shards the component's work is cut into.
#[derive(Debug, Clone, clap::Args)]
pub struct ShardArgs {
    /// How many shard Leases share this component's work between its replicas (each object
    /// belongs to the shard of its uid). 1: one replica at a time does all the work, under the
    /// component's Lease.
    #[arg(long = "shards", env = "ARBOR_SHARDS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
}

/// Annotation of a membership Lease: the URL its replica serves gRPC at.
pub const ADDRESS_ANNOTATION: &str = "arbor.dev/grpc-address";
/// Where another replica serves gRPC, as its membership Lease says. Only the address: the
/// name its certificate must carry is the caller's own setting, never something a Lease (which
/// other components may be able to write) could choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddress {
    /// `https://host:port`, or `http://` on loopback.
    pub address: String,
}

impl PeerAddress {
    fn of(lease: &Lease) -> Option<Self> {
        let annotations = lease.metadata.annotations.as_ref()?;
        // Written by this code it is bracketed already; by hand, perhaps not.
        let address = annotations.get(ADDRESS_ANNOTATION)?;
        Some(Self {
            address: crate::grpc::bracket_ipv6_host(address).into_owned(),
        })
    }
}

/// How one replica takes part in sharding.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The Leases' common prefix: `arbor-<component>`.
    pub prefix: String,
    pub namespace: String,
    pub identity: String,
    pub shards: u32,
    pub lease_duration: Duration,
    pub renew_interval: Duration,
}

impl ShardConfig {
    /// How long after a renewal was sent this replica still works on the shard.
    pub fn renew_deadline(&self) -> Duration {
        crate::lease::renew_deadline(self.lease_duration)
    }

    pub fn shard_lease(&self, shard: u32) -> String {
        format!("{}-shard-{shard}", self.prefix)
    }

    /// This replica's membership Lease: its identity made a valid object name.
    pub fn member_lease(&self) -> String {
        self.member_lease_of(&self.identity)
    }

    /// The membership Lease of the replica named `identity`.
    pub fn member_lease_of(&self, identity: &str) -> String {
        let identity: String = identity
            .to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let name = format!("{}-member-{}", self.prefix, identity.trim_matches('-'));
        name.chars().take(253).collect()
    }

    fn lease(&self, name: String) -> LeaseConfig {
        LeaseConfig {
            name,
            namespace: self.namespace.clone(),
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            renew_interval: self.renew_interval,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ShardLabels {
    pub shard: String,
}

/// Per shard: whether this replica holds it, and how much work it admitted for it.
#[derive(Debug, Clone, Default)]
pub struct ShardMetrics {
    held: Family<ShardLabels, Gauge>,
    work: Family<ShardLabels, Counter>,
}

impl ShardMetrics {
    /// Registers `shard_held` and `<work>` (a counter, help text `help`) in `registry`.
    pub fn register(registry: &mut Registry, work: &str, help: &str) -> Self {
        let metrics = Self::default();
        registry.register(
            "shard_held",
            "1 for each shard this replica holds (works on), 0 for the others",
            metrics.held.clone(),
        );
        registry.register(work, help, metrics.work.clone());
        metrics
    }

    fn labels(shard: u32) -> ShardLabels {
        ShardLabels {
            shard: shard.to_string(),
        }
    }
}

/// Which shards this replica may work on now; cheap to clone (a handle).
#[derive(Debug, Clone)]
pub struct Shards {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    count: u32,
    identity: String,
    /// `None`: every shard, always (one shard, or no election).
    deadline: Option<Duration>,
    /// Per shard, when its last successful renewal was sent; `None` when not held for work.
    renewed: Mutex<Vec<Option<Instant>>>,
    /// Per shard, when its last successful renewal was sent, for work or while it is given up;
    /// `None` once its Lease is given up or seen taken.
    leased: Mutex<Vec<Option<Instant>>>,
    /// Per shard, the replica its Lease names while unexpired, as last listed.
    holders: Mutex<Vec<Option<String>>>,
    /// Where this replica serves gRPC, for the others (written on its membership Lease).
    advertised: Mutex<Option<PeerAddress>>,
    /// Where each other live replica serves gRPC, as its membership Lease said at the last look.
    peers: Mutex<BTreeMap<String, PeerAddress>>,
    /// Per shard, shared by the guards of work in flight; taken exclusively to hand it over.
    in_flight: Vec<Arc<RwLock<()>>>,
    /// The shards held and how many times a shard was gained, republished on every change.
    /// The count survives the watch's coalescing: a shard lost and gained again between two
    /// looks still reads as a gain.
    held: watch::Sender<Held>,
    /// Told whenever a shard's Lease is renewed or given up, for [`Shards::lost`].
    leases: watch::Sender<()>,
    metrics: ShardMetrics,
    /// Cancelled when the replica begins to stop: from then on no shard is held for new work
    /// (see [`Shards::holds`]), while the Leases are kept until the work in flight is done.
    stopping: CancellationToken,
    /// Shards whose work gave up a write it had sent ([`ShardGuard::withhold_release`]): their
    /// Leases are not given up at shutdown but left to expire.
    withheld: Mutex<BTreeSet<u32>>,
}

impl Shards {
    /// Every one of `count` shards, until `stopping` is cancelled (the replica begins to stop):
    /// a single active replica (the component's Lease decides which), or no leader election
    /// at all.
    pub fn all(
        count: u32,
        identity: &str,
        metrics: ShardMetrics,
        stopping: CancellationToken,
    ) -> Self {
        let count = count.max(1);
        let shards = Self::new(count, identity, None, metrics, stopping);
        shards.publish();
        shards
    }

    fn new(
        count: u32,
        identity: &str,
        deadline: Option<Duration>,
        metrics: ShardMetrics,
        stopping: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                count,
                identity: identity.to_owned(),
                deadline,
                renewed: Mutex::new(vec![None; count as usize]),
                leased: Mutex::new(vec![None; count as usize]),
                holders: Mutex::new(vec![None; count as usize]),
                advertised: Mutex::new(None),
                peers: Mutex::new(BTreeMap::new()),
                in_flight: (0..count).map(|_| Arc::new(RwLock::new(()))).collect(),
                held: watch::channel(Held::default()).0,
                leases: watch::channel(()).0,
                metrics,
                stopping,
                withheld: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    pub fn count(&self) -> u32 {
        self.inner.count
    }

    /// The replica this is, as it names itself in the Leases (and `status.handledBy`).
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The shard of the object with `uid`.
    pub fn shard_of(&self, uid: &str) -> u32 {
        shard_of(uid, self.inner.count)
    }

    /// Whether this replica may work on `shard` now (see the module docs): never once it
    /// began to stop, so that work in flight starts no new write and the Leases are given up
    /// as soon as it ends, even with one shard held for good.
    pub fn holds(&self, shard: u32) -> bool {
        !self.inner.stopping.is_cancelled() && self.leased_for_work(shard)
    }

    /// Whether `shard`'s Lease was renewed for work within the renew deadline (with one shard,
    /// or no Leases: whether it is one of the shards), stopping or not.
    fn leased_for_work(&self, shard: u32) -> bool {
        let Some(deadline) = self.inner.deadline else {
            return shard < self.inner.count;
        };
        self.renewed()
            .get(shard as usize)
            .copied()
            .flatten()
            .is_some_and(|sent| sent.elapsed() < deadline)
    }

    /// Whether this replica answers questions about `shard` now: it holds the shard, or is
    /// giving it up (or stopping) and its Lease still names it (renewed less than the renew
    /// deadline ago).
    pub fn answers_for(&self, shard: u32) -> bool {
        let Some(deadline) = self.inner.deadline else {
            return shard < self.inner.count;
        };
        self.leased_for_work(shard)
            || lock(&self.inner.leased)
                .get(shard as usize)
                .copied()
                .flatten()
                .is_some_and(|sent| sent.elapsed() < deadline)
    }

    fn set_leased(&self, shard: u32, sent: Option<Instant>) {
        if let Some(slot) = lock(&self.inner.leased).get_mut(shard as usize) {
            *slot = sent;
        }
        self.inner.leases.send_replace(());
    }

    /// The replica that holds `shard`: this one, or the one its Lease named, unexpired, at
    /// the last look (a renew interval ago at most); `None` when free or not seen yet.
    pub fn holder(&self, shard: u32) -> Option<String> {
        if self.holds(shard) {
            return Some(self.inner.identity.clone());
        }
        lock(&self.inner.holders)
            .get(shard as usize)
            .cloned()
            .flatten()
            .filter(|holder| *holder != self.inner.identity)
    }

    fn set_holders(&self, holders: Vec<Option<String>>) {
        *lock(&self.inner.holders) = holders;
    }

    /// Tells the other replicas (from the next renewal of the membership Lease on) where this
    /// one serves gRPC, so that they can pass it requests about the shards it holds.
    pub fn advertise(&self, address: PeerAddress) {
        *lock(&self.inner.advertised) = Some(address);
    }

    /// Where this replica told the others it serves, if it did.
    pub fn advertised(&self) -> Option<PeerAddress> {
        lock(&self.inner.advertised).clone()
    }

    /// Where replica `identity` serves gRPC, if it is alive and said so at the last look.
    pub fn peer(&self, identity: &str) -> Option<PeerAddress> {
        lock(&self.inner.peers).get(identity).cloned()
    }

    /// Every other live replica that said where it serves gRPC, by identity.
    pub fn peers(&self) -> BTreeMap<String, PeerAddress> {
        lock(&self.inner.peers).clone()
    }

    fn set_peers(&self, peers: BTreeMap<String, PeerAddress>) {
        *lock(&self.inner.peers) = peers;
    }

    /// The shards held now.
    pub fn held(&self) -> BTreeSet<u32> {
        (0..self.inner.count)
            .filter(|shard| self.holds(*shard))
            .collect()
    }

    /// Yields whenever this replica gains a shard (to look at every object again, so the new
    /// shard's objects start at once).
    pub fn gains(&self) -> impl tokio_stream::Stream<Item = ()> + Send + 'static {
        let mut seen = self.inner.held.borrow().gains;
        self.watch().filter_map(move |held| {
            let gained = held.gains > seen;
            seen = held.gains;
            gained.then_some(())
        })
    }

    /// Yields after every change of the shards held (gained, given up, or lost: a missed
    /// renewal deadline is announced within a renew interval).
    pub fn changes(&self) -> impl tokio_stream::Stream<Item = ()> + Send + 'static {
        self.watch().map(drop)
    }

    fn watch(&self) -> tokio_stream::wrappers::WatchStream<Held> {
        tokio_stream::wrappers::WatchStream::from_changes(self.inner.held.subscribe())
    }

    /// Starts work on `shard`: `None` when this replica does not hold it. A shard is handed
    /// over only after every guard of it was dropped.
    pub async fn guard(&self, shard: u32) -> Option<ShardGuard> {
        let lock = self.inner.in_flight.get(shard as usize)?.clone();
        let lock = lock.read_owned().await;
        if !self.holds(shard) {
            // A missed deadline is only seen here so far: publish it, so that renewing the
            // shard reads as a gain and the work refused meanwhile is looked at again.
            self.publish();
            return None;
        }
        Some(ShardGuard {
            shards: self.clone(),
            shard,
            _lock: lock,
        })
    }

    /// Resolves once this replica's Lease of `shard` is gone: seen taken by another replica,
    /// given up, or not renewed within the renew deadline. A shard being given up to another
    /// replica is not lost while this replica still renews its Lease: work in flight on it
    /// finishes (new work is refused, [`Shards::holds`]), because a request dropped half-way can
    /// still be carried out by the API server after the next holder's writes, and the Lease is
    /// given up only once that work is done.
    pub async fn lost(&self, shard: u32) {
        let mut held = self.inner.held.subscribe();
        let mut leases = self.inner.leases.subscribe();
        loop {
            if !self.answers_for(shard) {
                return;
            }
            let renewed = self.renewed().get(shard as usize).copied().flatten();
            let leased = lock(&self.inner.leased)
                .get(shard as usize)
                .copied()
                .flatten();
            let remaining = match (renewed.max(leased), self.inner.deadline) {
                (Some(sent), Some(deadline)) => deadline.saturating_sub(sent.elapsed()),
                // Held for good (no Leases): only a change could end it, and none comes.
                _ => Duration::MAX,
            };
            tokio::select! {
                changed = held.changed() => if changed.is_err() { return },
                changed = leases.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(remaining.min(Duration::from_secs(3600))) => {}
            }
        }
    }

    fn renewed(&self) -> MutexGuard<'_, Vec<Option<Instant>>> {
        lock(&self.inner.renewed)
    }

    fn set(&self, shard: u32, renewed: Option<Instant>) {
        if let Some(slot) = self.renewed().get_mut(shard as usize) {
            *slot = renewed;
        }
        self.publish();
    }

    /// Counts one unit of work (a round, an apply) admitted for `shard`.
    pub fn count_work(&self, shard: u32) {
        self.inner
            .metrics
            .work
            .get_or_create(&ShardMetrics::labels(shard))
            .inc();
    }

    fn publish(&self) {
        // The Leases held, stopping or not: a replica that stops keeps what its work recorded
        // about its shards (it answers for them until the Leases are given up).
        let held: BTreeSet<u32> = (0..self.inner.count)
            .filter(|shard| self.leased_for_work(*shard))
            .collect();
        for shard in 0..self.inner.count {
            self.inner
                .metrics
                .held
                .get_or_create(&ShardMetrics::labels(shard))
                .set(i64::from(held.contains(&shard)));
        }
        self.inner.held.send_if_modified(|current| {
            if current.shards == held {
                return false;
            }
            if held.difference(&current.shards).next().is_some() {
                current.gains += 1;
            }
            current.shards = held;
            true
        });
    }
}

/// A poisoned lock only means a panic elsewhere; what it guards stays meaningful.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What [`Shards`] publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Held {
    shards: BTreeSet<u32>,
    gains: u64,
}

/// Work on one shard in flight; the shard is not handed over while it lives.
#[derive(Debug)]
pub struct ShardGuard {
    shards: Shards,
    shard: u32,
    _lock: OwnedRwLockReadGuard<()>,
}

impl ShardGuard {
    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// Whether the shard is still held: ask right before each batch of writes.
    pub fn still_held(&self) -> bool {
        self.shards.holds(self.shard)
    }

    /// Tells that this work gave up, at a bound of its own, a write it had already sent: the
    /// API server may still carry it out, so the shard's Lease is not given up at shutdown but
    /// left to expire once this process is gone. Only this shard's: the replica's other shards
    /// are handed over as usual. With one Lease for all the work (one shard, or no leader
    /// election), that Lease is the component's, and it is withheld through `shutdown`
    /// ([`Shutdown::withhold_release`]).
    pub fn withhold_release(&self, shutdown: &Shutdown) {
        if self.shards.inner.deadline.is_none() {
            shutdown.withhold_release();
            return;
        }
        lock(&self.shards.inner.withheld).insert(self.shard);
    }

    /// Resolves once the shard is no longer held; race the work against it.
    pub async fn lost(&self) {
        self.shards.lost(self.shard).await;
    }

    /// Runs `work` until it ends or the shard is lost ([`Shards::lost`]: not while it is only
    /// being given up); `None` when the shard was lost first, and then nothing more of `work`
    /// runs (its next write is never sent).
    pub async fn while_held<F: std::future::Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.lost() => None,
            output = work => Some(output),
        }
    }
}

/// Starts taking part in sharding; the manager runs until `release` is cancelled, then gives
/// every shard and its membership up (after the guards in flight are dropped).
pub fn spawn(
    client: kube::Client,
    config: ShardConfig,
    metrics: ShardMetrics,
    stopping: CancellationToken,
    release: CancellationToken,
) -> (Shards, tokio::task::JoinHandle<()>) {
    let shards = Shards::new(
        config.shards.max(1),
        &config.identity,
        Some(config.renew_deadline()),
        metrics,
        stopping,
    );
    let manager = Manager::new(client, config, shards.clone());
    (shards, tokio::spawn(manager.run(release)))
}

struct Manager {
    api: Api<Lease>,
    client: kube::Client,
    config: ShardConfig,
    shards: Shards,
    member: LeaderElector,
    electors: Vec<LeaderElector>,
    /// Other replicas' membership Leases, each judged by its own clock.
    others: BTreeMap<String, LeaderElector>,
    /// Shards being given up: no longer held for work, Lease kept until no guard is out.
    draining: BTreeSet<u32>,
}

impl Manager {
    fn new(client: kube::Client, config: ShardConfig, shards: Shards) -> Self {
        let electors = (0..config.shards)
            .map(|shard| {
                LeaderElector::new(client.clone(), config.lease(config.shard_lease(shard)))
            })
            .collect();
        Self {
            api: Api::namespaced(client.clone(), &config.namespace),
            member: LeaderElector::new(client.clone(), config.lease(config.member_lease())),
            client,
            electors,
            others: BTreeMap::new(),
            draining: BTreeSet::new(),
            config,
            shards,
        }
    }

    async fn run(mut self, release: CancellationToken) {
        tracing::info!(shards = self.config.shards, identity = %self.config.identity, "sharing the work by shard Leases");
        loop {
            if let Err(error) = self.step().await {
                tracing::warn!(%error, "shard Lease step failed");
            }
            // A shard whose renewal deadline passed is announced here, at the latest.
            self.shards.publish();
            tokio::select! {
                () = release.cancelled() => break,
                () = tokio::time::sleep(self.config.renew_interval) => {}
            }
        }
        self.give_everything_up().await;
    }

    async fn step(&mut self) -> Result<(), crate::lease::LeaseError> {
        // Our own membership first: the others size their share by it.
        if let Some(advertised) = self.shards.advertised() {
            self.member
                .annotate(ADDRESS_ANNOTATION, &advertised.address);
        }
        let _ = self.member.try_acquire_or_renew().await?;
        let leases = match self.api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(error) => {
                tracing::warn!(%error, namespace = %self.config.namespace, "cannot list the Leases");
                return Ok(());
            }
        };
        let by_name: BTreeMap<String, Lease> = leases
            .into_iter()
            .filter_map(|lease| lease.metadata.name.clone().map(|name| (name, lease)))
            .collect();
        let (members, dead) = self.live_members(&by_name);
        self.forget_dead_members(dead).await;
        let views: Vec<ShardView> = (0..self.config.shards)
            .map(|shard| {
                let elector = &mut self.electors[shard as usize];
                match by_name.get(&self.config.shard_lease(shard)) {
                    Some(lease) => {
                        let seen = elector.observe(lease);
                        ShardView {
                            holder: seen.holder,
                            expired: seen.expired,
                        }
                    }
                    None => {
                        elector.observe_absent();
                        ShardView::default()
                    }
                }
            })
            .collect();
        self.shards.set_holders(
            views
                .iter()
                .map(|view| view.holder.clone().filter(|_| !view.expired))
                .collect(),
        );
        let me = self.config.identity.clone();
        // A shard taken by another replica is lost at once, whatever our deadline says.
        for (shard, view) in (0..).zip(&views) {
            if view.holder.as_deref() != Some(me.as_str()) {
                if self.shards.leased_for_work(shard) {
                    tracing::warn!(shard, holder = ?view.holder, "shard taken by another replica");
                }
                self.shards.set(shard, None);
                self.shards.set_leased(shard, None);
                self.draining.remove(&shard);
            }
        }
        let moves = plan_moves(&me, &members, &views);
        for shard in moves.release {
            if self.draining.insert(shard) {
                tracing::info!(
                    shard,
                    members = members.len(),
                    "giving up a shard above the fair share"
                );
            }
        }
        for shard in moves.keep.iter().chain(&moves.acquire).copied() {
            self.draining.remove(&shard);
            self.renew(shard, true).await;
        }
        let withheld = lock(&self.shards.inner.withheld).clone();
        for shard in self.draining.clone() {
            self.shards.set(shard, None);
            // A write given up on the shard may still land: its Lease is left to expire, never
            // handed to the replica that joined (as at the release, `give_everything_up`).
            if withheld.contains(&shard) {
                self.renew(shard, false).await;
                continue;
            }
            let idle = self.shards.inner.in_flight[shard as usize]
                .clone()
                .try_write_owned();
            match idle {
                Ok(_idle) => {
                    let surrendered = self.electors[shard as usize].surrender().await;
                    self.shards.set_leased(shard, None);
                    surrendered?;
                    self.draining.remove(&shard);
                    tracing::info!(shard, "gave up a shard");
                }
                // Work still in flight: keep the Lease until it ends.
                Err(_) => self.renew(shard, false).await,
            }
        }
        Ok(())
    }

    /// Renews (or takes) `shard`'s Lease; `for_work` says whether the shard is then held for
    /// new work (not while draining).
    async fn renew(&mut self, shard: u32, for_work: bool) {
        let sent = Instant::now();
        match self.electors[shard as usize].try_acquire_or_renew().await {
            Ok(Role::Leader) => {
                self.shards.set_leased(shard, Some(sent));
                if for_work {
                    if !self.shards.leased_for_work(shard) {
                        tracing::info!(shard, "holding a shard");
                    }
                    self.shards.set(shard, Some(sent));
                }
            }
            Ok(Role::Follower { .. }) => {
                self.shards.set(shard, None);
                self.shards.set_leased(shard, None);
            }
            // The deadline in `holds` ends the work if this goes on.
            Err(error) => tracing::warn!(shard, %error, "cannot renew a shard Lease"),
        }
    }

    /// Replicas whose membership Lease is alive, and every holder of a live shard Lease; and
    /// the membership Leases this replica saw unrenewed for a lease duration, with the
    /// resourceVersion it saw.
    fn live_members(
        &mut self,
        leases: &BTreeMap<String, Lease>,
    ) -> (BTreeSet<String>, Vec<(String, String)>) {
        let mut dead = Vec::new();
        let member_prefix = format!("{}-member-", self.config.prefix);
        let own = self.config.member_lease();
        let mut members = BTreeSet::from([self.config.identity.clone()]);
        let mut peers = BTreeMap::new();
        self.others.retain(|name, _| leases.contains_key(name));
        for (name, lease) in leases.range(member_prefix.clone()..) {
            if !name.starts_with(&member_prefix) {
                break;
            }
            if *name == own {
                continue;
            }
            let elector = self.others.entry(name.clone()).or_insert_with(|| {
                LeaderElector::new(self.client.clone(), self.config.lease(name.clone()))
            });
            let seen = elector.observe(lease);
            match (seen.holder, seen.expired) {
                (Some(holder), false) => {
                    // Only a replica's own membership Lease says where it serves: another
                    // Lease naming it as holder must not redirect its requests.
                    if *name == self.config.member_lease_of(&holder)
                        && let Some(address) = PeerAddress::of(lease)
                    {
                        peers.insert(holder.clone(), address);
                    }
                    members.insert(holder);
                }
                (_, true) => dead.extend(
                    lease
                        .metadata
                        .resource_version
                        .clone()
                        .map(|version| (name.clone(), version)),
                ),
                (None, false) => {}
            }
        }
        self.shards.set_peers(peers);
        (members, dead)
    }

    /// Deletes the membership Leases of replicas gone for a lease duration (killed ones never
    /// give theirs up), each only as it was seen: a Lease renewed since (its replica was only
    /// slow) has another resourceVersion and stays. Every replica may try; one succeeds.
    async fn forget_dead_members(&mut self, dead: Vec<(String, String)>) {
        for (name, version) in dead {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(version),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.api.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(lease = %name, "deleted the membership Lease of a replica gone for a lease duration");
                    self.others.remove(&name);
                }
                // Already deleted by another replica, or renewed since: nothing to do.
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                    self.others.remove(&name);
                }
                Err(error) => {
                    tracing::warn!(lease = %name, %error, "cannot delete a dead replica's membership Lease");
                }
            }
        }
    }

    async fn give_everything_up(&mut self) {
        for shard in 0..self.config.shards {
            self.shards.set(shard, None);
        }
        let withheld = lock(&self.shards.inner.withheld).clone();
        for shard in 0..self.config.shards {
            // Every tracked writer has finished before release starts; this is the last check.
            let _idle = self.shards.inner.in_flight[shard as usize]
                .clone()
                .write_owned()
                .await;
            if withheld.contains(&shard) {
                tracing::warn!(
                    shard,
                    "work on this shard gave up a write it had sent; leaving the shard's Lease to expire rather than giving it up while the write may still land"
                );
                continue;
            }
            // Answered for until its Lease is given up: see the module docs.
            let surrendered = self.electors[shard as usize].surrender().await;
            self.shards.set_leased(shard, None);
            if let Err(error) = surrendered {
                tracing::warn!(shard, %error, "cannot give a shard Lease up");
            }
        }
        if let Err(error) = self.member.surrender().await {
            tracing::warn!(%error, "cannot give the membership Lease up");
        }
        tracing::info!("gave every shard up");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(identity: &str) -> ShardConfig {
        ShardConfig {
            prefix: "arbor-gitsync".into(),
            namespace: "arbor-system".into(),
            identity: identity.into(),
            shards: 6,
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(2),
        }
    }

    #[test]
    fn lease_names_follow_the_component_and_make_any_identity_a_valid_name() {
        let config = config("Host_1:4242");
        assert_eq!(config.shard_lease(5), "arbor-gitsync-shard-5");
        assert_eq!(config.member_lease(), "arbor-gitsync-member-host-1-4242");
        assert_eq!(config.renew_deadline(), Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_single_replica_holds_every_shard_for_good() {
        let shards = Shards::all(3, "a", ShardMetrics::default(), CancellationToken::new());
        assert_eq!(shards.held(), BTreeSet::from([0, 1, 2]));
        assert!(!shards.holds(3));
        assert!(shards.guard(2).await.is_some());
    }

    /// Issue 22: once the replica begins to stop, work in flight reads its shard as no longer
    /// held (it starts no new write) and no new work is admitted, while the replica still
    /// answers for the shard until its Lease is given up; the held shards are not republished,
    /// so nothing forgets what the work recorded.
    #[tokio::test]
    async fn a_stopping_replica_works_on_no_shard_but_still_answers_for_it() {
        let stopping = CancellationToken::new();
        let shards = Shards::all(1, "a", ShardMetrics::default(), stopping.clone());
        let guard = shards.guard(0).await.expect("held before stopping");
        let mut changes = Box::pin(shards.changes());
        stopping.cancel();
        assert!(!guard.still_held());
        assert!(shards.guard(0).await.is_none());
        assert!(shards.answers_for(0));
        let changed = tokio::time::timeout(Duration::from_millis(100), changes.next()).await;
        assert!(
            changed.is_err(),
            "stopping was published as a change of the shards held"
        );
    }

    /// With one Lease for all the work (the component's), a write given up on the one shard
    /// withholds that Lease: the shutdown then releases nothing.
    #[tokio::test]
    async fn with_one_lease_a_given_up_write_withholds_the_components_lease() {
        let shutdown = Shutdown::new(Duration::from_secs(5));
        let shards = Shards::all(1, "a", ShardMetrics::default(), shutdown.token());
        let guard = shards.guard(0).await.expect("held");
        guard.withhold_release(&shutdown);
        drop(guard);
        shutdown.trigger();
        assert_eq!(shutdown.drain().await, crate::shutdown::Drained::Withheld);
    }

    #[tokio::test]
    async fn a_shard_is_not_held_past_the_renew_deadline() {
        let shards = Shards::new(
            2,
            "a",
            Some(Duration::from_millis(100)),
            ShardMetrics::default(),
            CancellationToken::new(),
        );
        assert!(shards.guard(0).await.is_none());
        shards.set(0, Some(Instant::now()));
        let guard = shards.guard(0).await.expect("held after a renewal");
        assert!(guard.still_held());
        tokio::time::timeout(Duration::from_secs(2), guard.lost())
            .await
            .expect("the deadline ends the hold");
        assert!(!guard.still_held());
        assert!(!shards.holds(0));
    }

    #[tokio::test]
    async fn a_shard_lost_and_gained_again_between_two_looks_still_reads_as_a_gain() {
        let shards = Shards::new(
            2,
            "a",
            Some(Duration::from_secs(60)),
            ShardMetrics::default(),
            CancellationToken::new(),
        );
        let mut gains = std::pin::pin!(shards.gains());
        shards.set(0, Some(Instant::now()));
        shards.set(0, None);
        shards.set(0, Some(Instant::now()));
        let gained = tokio::time::timeout(Duration::from_secs(1), gains.next()).await;
        assert_eq!(gained.ok().flatten(), Some(()));
        // Giving a shard up is no gain.
        shards.set(0, None);
        let gained = tokio::time::timeout(Duration::from_millis(100), gains.next()).await;
        assert!(gained.is_err(), "a loss read as a gain");
    }

    #[tokio::test]
    async fn a_shard_being_given_up_is_answered_for_until_its_lease_is_given_up() {
        let shards = Shards::new(
            1,
            "a",
            Some(Duration::from_secs(60)),
            ShardMetrics::default(),
            CancellationToken::new(),
        );
        assert!(!shards.answers_for(0));
        shards.set(0, Some(Instant::now()));
        shards.set_leased(0, Some(Instant::now()));
        // Given up: no new work, still answered for.
        shards.set(0, None);
        assert!(!shards.holds(0));
        assert!(shards.answers_for(0));
        shards.set_leased(0, None);
        assert!(!shards.answers_for(0));
    }

    #[tokio::test]
    async fn work_in_flight_on_a_shard_being_given_up_finishes_and_ends_when_its_lease_does() {
        let shards = Shards::new(
            1,
            "a",
            Some(Duration::from_secs(60)),
            ShardMetrics::default(),
            CancellationToken::new(),
        );
        shards.set(0, Some(Instant::now()));
        shards.set_leased(0, Some(Instant::now()));
        let guard = shards.guard(0).await.expect("held");
        // Given up for another replica: no new work, and the work in flight is not cut off.
        shards.set(0, None);
        assert!(shards.guard(0).await.is_none());
        let cut = tokio::time::timeout(Duration::from_millis(200), guard.lost()).await;
        assert!(
            cut.is_err(),
            "work in flight was cut off while the Lease was still renewed"
        );
        // Seen taken (or given up): lost at once.
        let lost = tokio::spawn({
            let shards = shards.clone();
            async move { shards.lost(0).await }
        });
        tokio::task::yield_now().await;
        shards.set_leased(0, None);
        tokio::time::timeout(Duration::from_secs(2), lost)
            .await
            .expect("the Lease given up ends the work")
            .expect("joined");
    }

    #[tokio::test]
    async fn a_shard_in_use_cannot_be_handed_over_until_its_guard_is_dropped() {
        let shards = Shards::new(
            1,
            "a",
            Some(Duration::from_secs(60)),
            ShardMetrics::default(),
            CancellationToken::new(),
        );
        shards.set(0, Some(Instant::now()));
        let guard = shards.guard(0).await.unwrap();
        let lock = shards.inner.in_flight[0].clone();
        assert!(lock.clone().try_write_owned().is_err());
        drop(guard);
        assert!(lock.try_write_owned().is_ok());
    }
}
