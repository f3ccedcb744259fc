//! The running observers, one per Application, and what happened to each.
//!
//! The controller starts and stops observers here around its actions, as
//! [`observer_lifecycle`](arbor_policy::observe::observer_lifecycle) says. Each observer is a
//! task with its own cancellation token; stopping one, or starting another in its place,
//! cancels it and waits until it ended, so that it can never write a status after the
//! controller started changing the objects, nor after the observer that replaced it.
//!
//! Every observer's token is a child of the replica's shutdown token: once the replica begins
//! to stop (or loses its Lease), every observer is cancelled at once and sends no further
//! write, while the controller's reconciles in flight are still being waited for; no observer
//! starts from then on. An observer aborted with a write in flight withholds the release of
//! the Lease ([`Shutdown::withhold_release`]): that write may still land.
//!
//! With `--shards`, each observer belongs to its Application's shard. An observer starts only
//! while this replica holds that shard, and once the shard is no longer held (taken by another
//! replica, given up to one, or not renewed within the renew deadline) its observers are
//! stopped together, at the change of the held shards ([`ObserverRegistry::follow_shards`]),
//! without waiting for the controller to reach each Application. Each observer also checks the
//! shard right before every write it sends ([`crate::observer`]), so none is sent for a shard
//! left between two looks.
//!
//! Every start, stop and action is recorded in a short per-Application log, so tests (and
//! `ObserverService`) can check the lifecycle order; the observer's checks and drift are
//! counted beside it.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use arbor_policy::observe::ApplicationAction;
use arbor_runtime::{Shards, Shutdown};
use futures::StreamExt as _;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Entries kept per Application in the lifecycle log.
const LOG_CAPACITY: usize = 64;
/// Deleted Applications whose log is kept, so the end of their lifecycle can be read.
const RETIRED_CAPACITY: usize = 256;
/// How long an observer being stopped may take to end: one status write (the client's own
/// timeouts bound it too, but far later).
const END_PATIENCE: Duration = Duration::from_secs(10);

/// An Application, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppKey {
    pub namespace: String,
    pub name: String,
}

impl AppKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One entry of an Application's lifecycle log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleEvent {
    /// The controller began an action on the Application's objects.
    ActionStarted(ApplicationAction),
    /// The action was carried out.
    ActionDone(ApplicationAction),
    ObserverStarted,
    ObserverStopped,
}

/// What is known about one Application's observer.
#[derive(Debug, Clone, Default)]
pub struct ObserverStats {
    pub running: bool,
    /// Checks of the live objects the observer made (watch events and periodic checks).
    pub checks: u64,
    /// Drift seen since the controller started.
    pub drift_count: u64,
    pub last_observed: Option<SystemTime>,
    pub log: Vec<LifecycleEvent>,
}

/// A running observer: its task, what cancels it, and the shard of its Application.
#[derive(Debug)]
struct ObserverTask {
    token: CancellationToken,
    handle: JoinHandle<()>,
    shard: u32,
}

#[derive(Debug, Default)]
struct Entry {
    task: Option<ObserverTask>,
    checks: u64,
    drift_count: u64,
    drift_seen: Option<Instant>,
    last_observed: Option<SystemTime>,
    log: VecDeque<LifecycleEvent>,
}

impl Entry {
    fn record(&mut self, event: LifecycleEvent) {
        if self.log.len() == LOG_CAPACITY {
            self.log.pop_front();
        }
        self.log.push_back(event);
    }
}

/// The observers of every Application this controller handles; cheap to clone.
#[derive(Debug, Clone)]
pub struct ObserverRegistry {
    entries: Arc<Mutex<Entries>>,
    metrics: Metrics,
    /// The replica's shutdown: its token is every observer's parent.
    shutdown: Shutdown,
}

#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<AppKey, Entry>,
    /// Deleted Applications, oldest first; their entries are dropped beyond the capacity.
    retired: VecDeque<AppKey>,
}

impl ObserverRegistry {
    pub fn new(metrics: Metrics, shutdown: Shutdown) -> Self {
        Self {
            entries: Arc::default(),
            metrics,
            shutdown,
        }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs `observer(token)` as the observer of `key`, an Application of shard `shard` of
    /// `shards`; it must end when `token` is cancelled, which it is when the observer is
    /// stopped, its shard is left or the replica begins to stop. An observer still registered
    /// for `key` is cancelled first and waited for (`end`): a status write it has in
    /// flight lands before the new observer can write, never after. No observer starts for a
    /// shard this replica does not hold, which it holds none of once it is stopping.
    pub async fn start<F>(
        &self,
        key: &AppKey,
        (shards, shard): (&Shards, u32),
        observer: impl FnOnce(CancellationToken) -> F,
    ) where
        F: Future<Output = ()> + Send + 'static,
    {
        // Taken out under the lock and waited for without it: the other Applications'
        // observers are started, stopped and counted meanwhile. Counted as `stop` counts, when
        // a task goes out of or into the entry, never across an await: a caller dropped while
        // it waits (a reconcile whose shard was lost) leaves the count right.
        let previous = self.take_task(key);
        if let Some(previous) = previous {
            self.end(key, previous).await;
        }
        let displaced = {
            let mut entries = self.lock();
            // Asked under the lock that `stop_shards_left` takes after each change of the held
            // shards: an observer either starts before that sweep, which then stops it, or
            // finds its shard already left and does not start.
            if !shards.holds(shard) {
                return;
            }
            let token = self.shutdown.token().child_token();
            let handle = tokio::spawn(observer(token.clone()));
            let entry = entries.by_key.entry(key.clone()).or_default();
            entry.record(LifecycleEvent::ObserverStarted);
            let displaced = entry.task.replace(ObserverTask {
                token,
                handle,
                shard,
            });
            self.metrics.observers_running.inc();
            if displaced.is_some() {
                self.metrics.observers_running.dec();
            }
            displaced
        };
        // Started meanwhile by another caller (the controller never reconciles one
        // Application twice at once): that one ends, this one takes its place.
        if let Some(displaced) = displaced {
            self.end(key, displaced).await;
        }
    }

    /// Takes `key`'s observer task out of its entry, and out of the count.
    fn take_task(&self, key: &AppKey) -> Option<ObserverTask> {
        let task = self
            .lock()
            .by_key
            .get_mut(key)
            .and_then(|entry| entry.task.take());
        if task.is_some() {
            self.metrics.observers_running.dec();
        }
        task
    }

    /// Takes `entry`'s observer out as stopped (in its log, out of the count) when one runs and
    /// `stops` says so.
    fn take_stopped(
        &self,
        entry: &mut Entry,
        stops: impl FnOnce(&ObserverTask) -> bool,
    ) -> Option<ObserverTask> {
        let task = entry.task.take_if(|task| stops(task))?;
        entry.record(LifecycleEvent::ObserverStopped);
        self.metrics.observers_running.dec();
        Some(task)
    }

    /// Stops `key`'s observer, if one runs, and waits until it ended (`end`).
    pub async fn stop(&self, key: &AppKey) {
        let task = {
            let mut entries = self.lock();
            let Some(entry) = entries.by_key.get_mut(key) else {
                return;
            };
            self.take_stopped(entry, |_| true)
        };
        if let Some(task) = task {
            self.end(key, task).await;
        }
    }

    /// Cancels an observer and waits until it ended: it ends at its next step, after the
    /// status write it has in flight (kube-apiserver carries out a request whose client went
    /// away, so aborting it would not stop the write, only let it land late); a read in flight
    /// is dropped at once, and no write is sent once cancelled ([`crate::observer`]). An
    /// observer that has not ended after [`END_PATIENCE`] is aborted, logged and counted
    /// (`arbor_observer_observers_aborted_total`), and the Lease is not released at shutdown
    /// ([`Shutdown::withhold_release`]): its write may land after another replica took over.
    async fn end(&self, key: &AppKey, task: ObserverTask) {
        let ObserverTask {
            token, mut handle, ..
        } = task;
        token.cancel();
        // A panicked or aborted observer has ended too.
        if tokio::time::timeout(END_PATIENCE, &mut handle)
            .await
            .is_err()
        {
            self.metrics.observers_aborted.inc();
            tracing::warn!(application = %key, patience = ?END_PATIENCE, "an observer did not end in time and was aborted; a status write it had in flight may still land");
            handle.abort();
            self.shutdown.withhold_release();
        }
    }

    /// Stops the observers of every shard of `shards` this replica no longer holds, all
    /// cancelled at once and then waited for (`end`), and returns how many.
    pub async fn stop_shards_left(&self, shards: &Shards) -> usize {
        let left: Vec<(AppKey, ObserverTask)> = {
            let mut entries = self.lock();
            let mut left = Vec::new();
            for (key, entry) in &mut entries.by_key {
                let Some(task) = self.take_stopped(entry, |task| !shards.holds(task.shard)) else {
                    continue;
                };
                task.token.cancel();
                left.push((key.clone(), task));
            }
            left
        };
        let stopped = left.len();
        futures::future::join_all(left.into_iter().map(|(key, task)| async move {
            self.end(&key, task).await;
        }))
        .await;
        stopped
    }

    /// Until `stop` is cancelled: after every change of the shards held, stops the observers
    /// of the shards left ([`Self::stop_shards_left`]). A shard seen taken or given up is
    /// announced at once, one not renewed in time within a renew interval; until then its
    /// observers send no write anyway (each checks the shard before it writes).
    pub async fn follow_shards(self, shards: Shards, stop: CancellationToken) {
        let mut changes = std::pin::pin!(shards.changes());
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                change = changes.next() => {
                    if change.is_none() {
                        return;
                    }
                    let stopped = self.stop_shards_left(&shards).await;
                    if stopped > 0 {
                        tracing::info!(stopped, held = ?shards.held(), "stopped the observers of the shards this replica no longer holds");
                    }
                }
            }
        }
    }

    /// Stops every observer (at shutdown).
    pub async fn stop_all(&self) {
        let keys: Vec<AppKey> = self.lock().by_key.keys().cloned().collect();
        for key in keys {
            self.stop(&key).await;
        }
    }

    /// `key`'s Application is gone: its log is kept for a while, then forgotten. An entry
    /// that has an observer again (the Application was created anew) is kept.
    pub fn retire(&self, key: &AppKey) {
        let mut entries = self.lock();
        entries.retired.retain(|retired| retired != key);
        entries.retired.push_back(key.clone());
        while entries.retired.len() > RETIRED_CAPACITY {
            let Some(oldest) = entries.retired.pop_front() else {
                break;
            };
            if entries
                .by_key
                .get(&oldest)
                .is_some_and(|entry| entry.task.is_none())
            {
                entries.by_key.remove(&oldest);
            }
        }
    }

    pub fn is_running(&self, key: &AppKey) -> bool {
        self.lock().by_key.get(key).is_some_and(|entry| {
            entry
                .task
                .as_ref()
                .is_some_and(|task| !task.handle.is_finished())
        })
    }

    pub fn record(&self, key: &AppKey, event: LifecycleEvent) {
        self.lock()
            .by_key
            .entry(key.clone())
            .or_default()
            .record(event);
    }

    /// The observer of `key` looked at the live objects.
    pub fn checked(&self, key: &AppKey) {
        let mut entries = self.lock();
        let entry = entries.by_key.entry(key.clone()).or_default();
        entry.checks += 1;
        entry.last_observed = Some(SystemTime::now());
    }

    /// The observer of `key` saw drift: counted, and remembered for the heal latency.
    pub fn drifted(&self, key: &AppKey) {
        let mut entries = self.lock();
        let entry = entries.by_key.entry(key.clone()).or_default();
        entry.drift_count += 1;
        entry.drift_seen.get_or_insert_with(Instant::now);
        self.metrics.drift("application");
    }

    /// The controller re-applied `key`: the drift seen before, if any, is healed.
    pub fn healed(&self, key: &AppKey) {
        let seen = self
            .lock()
            .by_key
            .get_mut(key)
            .and_then(|entry| entry.drift_seen.take());
        if let Some(seen) = seen {
            self.metrics
                .heal_latency
                .observe(seen.elapsed().as_secs_f64());
        }
    }

    pub fn stats(&self, key: &AppKey) -> ObserverStats {
        self.lock()
            .by_key
            .get(key)
            .map(|entry| ObserverStats {
                running: entry
                    .task
                    .as_ref()
                    .is_some_and(|task| !task.handle.is_finished()),
                checks: entry.checks,
                drift_count: entry.drift_count,
                last_observed: entry.last_observed,
                log: entry.log.iter().copied().collect(),
            })
            .unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_runtime::shutdown::Drained;

    fn registry() -> ObserverRegistry {
        ObserverRegistry::new(Metrics::default(), Shutdown::new(Duration::from_secs(5)))
    }

    /// One shard, held until `stopping` is cancelled (the replica begins to stop).
    fn one_shard_until(stopping: CancellationToken) -> Shards {
        Shards::all(1, "test", arbor_runtime::ShardMetrics::default(), stopping)
    }

    fn one_shard() -> Shards {
        one_shard_until(CancellationToken::new())
    }

    #[tokio::test]
    async fn stop_waits_for_the_observer_and_logs_the_order() {
        let registry = registry();
        let key = AppKey::new("ns", "app");
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let observer = {
            let ended = ended.clone();
            |token: CancellationToken| async move {
                token.cancelled().await;
                ended.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        };
        registry.start(&key, (&one_shard(), 0), observer).await;
        assert!(registry.is_running(&key));
        assert_eq!(registry.metrics().observers_running.get(), 1);
        registry.stop(&key).await;
        assert!(ended.load(std::sync::atomic::Ordering::SeqCst));
        assert!(!registry.is_running(&key));
        assert_eq!(registry.metrics().observers_running.get(), 0);
        assert_eq!(
            registry.stats(&key).log,
            [
                LifecycleEvent::ObserverStarted,
                LifecycleEvent::ObserverStopped
            ]
        );
        // Stopping again changes nothing.
        registry.stop(&key).await;
        assert_eq!(registry.stats(&key).log.len(), 2);
    }

    /// An observer replaced while its status write is in flight: the new one starts only once
    /// that write is done.
    #[tokio::test]
    async fn a_replaced_observer_finishes_its_write_before_the_next_one_starts() {
        let registry = registry();
        let key = AppKey::new("ns", "app");
        let writes = Arc::new(Mutex::new(Vec::new()));
        let (write_answered, answer) = tokio::sync::oneshot::channel::<()>();
        let (writing, write_sent) = tokio::sync::oneshot::channel::<()>();
        let old = {
            let writes = writes.clone();
            |_| async move {
                // In flight: cancellation is looked at only between writes, as the observer does.
                let _ = writing.send(());
                let _ = answer.await;
                writes.lock().unwrap().push("old");
            }
        };
        registry.start(&key, (&one_shard(), 0), old).await;
        write_sent.await.expect("the old observer writes");
        let replacing = {
            let registry = registry.clone();
            let key = key.clone();
            let writes = writes.clone();
            tokio::spawn(async move {
                let new = |_| async move {
                    writes.lock().unwrap().push("new");
                };
                registry.start(&key, (&one_shard(), 0), new).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            writes.lock().unwrap().is_empty(),
            "the new observer ran first"
        );
        write_answered.send(()).expect("the old observer waits");
        replacing.await.expect("started");
        for _ in 0..100 {
            if writes.lock().unwrap().len() == 2 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(*writes.lock().unwrap(), ["old", "new"]);
        assert_eq!(registry.metrics().observers_running.get(), 1);
    }

    /// A start dropped while it waits for the observer it replaces (a reconcile whose shard
    /// was lost) leaves the count of running observers right: the replaced one was taken out
    /// of it, and the new one never went in. It used to stay one too high.
    #[tokio::test]
    async fn a_start_dropped_while_it_waits_for_the_replaced_observer_keeps_the_count() {
        let registry = registry();
        let key = AppKey::new("ns", "app");
        let (writing, write_sent) = tokio::sync::oneshot::channel::<()>();
        let (_answer, answered) = tokio::sync::oneshot::channel::<()>();
        let held = |_| async move {
            // A write in flight that is never answered while the test runs.
            let _ = writing.send(());
            let _ = answered.await;
        };
        registry.start(&key, (&one_shard(), 0), held).await;
        write_sent.await.expect("the observer writes");
        assert_eq!(registry.metrics().observers_running.get(), 1);
        let replacing = {
            let registry = registry.clone();
            let key = key.clone();
            tokio::spawn(async move {
                registry.start(&key, (&one_shard(), 0), |_| async {}).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !replacing.is_finished(),
            "the start waits for the held write"
        );
        replacing.abort();
        assert!(replacing.await.is_err_and(|error| error.is_cancelled()));
        assert_eq!(registry.metrics().observers_running.get(), 0);
        assert!(!registry.is_running(&key));
        registry
            .start(
                &key,
                (&one_shard(), 0),
                |token: CancellationToken| async move {
                    token.cancelled().await;
                },
            )
            .await;
        assert_eq!(registry.metrics().observers_running.get(), 1);
        registry.stop(&key).await;
        assert_eq!(registry.metrics().observers_running.get(), 0);
    }

    /// Issue 22 (review of the rounds change): the replica beginning to stop cancels every
    /// observer at once, before anyone stops them one by one, and no observer starts after.
    #[tokio::test]
    async fn a_stopping_replica_cancels_its_observers_and_starts_none() {
        let shutdown = Shutdown::new(Duration::from_secs(5));
        let registry = ObserverRegistry::new(Metrics::default(), shutdown.clone());
        let shards = one_shard_until(shutdown.token());
        let key = AppKey::new("ns", "app");
        let (ended, cancelled) = tokio::sync::oneshot::channel::<()>();
        registry
            .start(&key, (&shards, 0), |token: CancellationToken| async move {
                token.cancelled().await;
                let _ = ended.send(());
            })
            .await;
        shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(5), cancelled)
            .await
            .expect("the observer was cancelled when the stop began")
            .expect("the observer ended");

        let other = AppKey::new("ns", "other");
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = started.clone();
        registry
            .start(&other, (&shards, 0), move |_| async move {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            })
            .await;
        tokio::task::yield_now().await;
        assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
        assert!(!registry.is_running(&other));
        assert!(
            !registry
                .stats(&other)
                .log
                .contains(&LifecycleEvent::ObserverStarted)
        );
    }

    /// Issue 22 (review of the rounds change): an observer aborted with its write in flight
    /// (it did not end within the patience) leaves the Lease unreleased: the write may land
    /// after the next leader started. Takes the patience, 10 s.
    #[tokio::test]
    async fn an_observer_aborted_with_a_write_in_flight_withholds_the_lease_release() {
        let shutdown = Shutdown::new(Duration::from_secs(60));
        let registry = ObserverRegistry::new(Metrics::default(), shutdown.clone());
        let shards = one_shard_until(shutdown.token());
        let key = AppKey::new("ns", "app");
        let (writing, write_sent) = tokio::sync::oneshot::channel::<()>();
        let (_answer, answered) = tokio::sync::oneshot::channel::<()>();
        registry
            .start(&key, (&shards, 0), |_| async move {
                let _ = writing.send(());
                let _ = answered.await;
            })
            .await;
        write_sent.await.expect("the observer writes");
        shutdown.trigger();
        let stopping = {
            let registry = registry.clone();
            shutdown.spawn(async move { registry.stop_all().await })
        };
        assert_eq!(shutdown.drain().await, Drained::Withheld);
        assert!(stopping.is_finished());
        assert_eq!(registry.metrics().observers_aborted.get(), 1);
    }
}
