//! The running observers, one per Application, and what happened to each.
//!
//! The controller starts and stops observers here around its actions, as
//! [`observer_lifecycle`](arbor_policy::observe::observer_lifecycle) says. Each observer is a
//! task with its own cancellation token; stopping one cancels it and waits until it ended, so
//! that it can never write a status after the controller started changing the objects.
//!
//! Every start, stop and action is recorded in a short per-Application log, so tests (and
//! `ObserverService`) can check the lifecycle order; the observer's checks and drift are
//! counted beside it.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use arbor_policy::observe::ApplicationAction;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Entries kept per Application in the lifecycle log.
const LOG_CAPACITY: usize = 64;
/// Deleted Applications whose log is kept, so the end of their lifecycle can be read.
const RETIRED_CAPACITY: usize = 256;

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

#[derive(Debug, Default)]
struct Entry {
    task: Option<(CancellationToken, JoinHandle<()>)>,
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
}

#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<AppKey, Entry>,
    /// Deleted Applications, oldest first; their entries are dropped beyond the capacity.
    retired: VecDeque<AppKey>,
}

impl ObserverRegistry {
    pub fn new(metrics: Metrics) -> Self {
        Self {
            entries: Arc::default(),
            metrics,
        }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs `observer` as `key`'s observer; it must end when `token` is cancelled. An observer
    /// still registered for `key` is cancelled first.
    pub fn start(
        &self,
        key: &AppKey,
        token: CancellationToken,
        observer: impl Future<Output = ()> + Send + 'static,
    ) {
        let task = tokio::spawn(observer);
        let previous = {
            let mut entries = self.lock();
            let entry = entries.by_key.entry(key.clone()).or_default();
            entry.record(LifecycleEvent::ObserverStarted);
            entry.task.replace((token, task))
        };
        match previous {
            Some((token, task)) => {
                token.cancel();
                task.abort();
            }
            None => {
                self.metrics.observers_running.inc();
            }
        }
    }

    /// Stops `key`'s observer, if one runs, and waits until it ended.
    pub async fn stop(&self, key: &AppKey) {
        let task = {
            let mut entries = self.lock();
            let Some(entry) = entries.by_key.get_mut(key) else {
                return;
            };
            let task = entry.task.take();
            if task.is_some() {
                entry.record(LifecycleEvent::ObserverStopped);
            }
            task
        };
        if let Some((token, task)) = task {
            self.metrics.observers_running.dec();
            token.cancel();
            // A panicked or aborted observer has ended too.
            let _ = task.await;
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
                .is_some_and(|(_, task)| !task.is_finished())
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
                    .is_some_and(|(_, task)| !task.is_finished()),
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

    #[tokio::test]
    async fn stop_waits_for_the_observer_and_logs_the_order() {
        let registry = ObserverRegistry::new(Metrics::default());
        let key = AppKey::new("ns", "app");
        let token = CancellationToken::new();
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let observer = {
            let token = token.clone();
            let ended = ended.clone();
            async move {
                token.cancelled().await;
                ended.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        };
        registry.start(&key, token, observer);
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
}
