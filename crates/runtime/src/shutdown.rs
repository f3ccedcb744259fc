//! Graceful shutdown.
//!
//! SIGTERM or SIGINT cancels one token that every watch and server loop selects on; tasks
//! started through [`Shutdown::spawn`] are then given a bounded grace period to finish what
//! they were doing (an apply half-way through a source, a Lease release) before the process
//! exits anyway, so that a stuck request can never keep a Pod in Terminating forever.
//!
//! What must outlast every writer, the Lease above all, runs in a second phase
//! ([`Shutdown::spawn_release`]): it is told to stop ([`Shutdown::release_token`]) only after
//! the tracked work has finished. A Lease released while a reconcile is still writing would
//! let a successor lead beside it, two writers on one object: the hazard client-go warns of
//! for `ReleaseOnCancel`. When the grace period runs out with work still in flight, nothing is
//! released: the Lease then expires on its own, after the process (and its writers) are gone;
//! the work left running is logged and counted ([`Shutdown::abandoned_work`]). Every
//! controller's reconciles run as such work, so this is the one bound on how long a stopping
//! replica waits for a write before it lets the Lease expire instead of handing it over.
//! The same holds when tracked work gave up, at a bound of its own, a write it had already sent
//! ([`Shutdown::withhold_release`]): the API server may still carry it out, so the Lease is
//! left to expire rather than handed over under it. Work on one shard of several (`--shards`)
//! withholds that shard's Lease alone ([`crate::shards::ShardGuard::withhold_release`]).
//!
//! Servers that answer questions about the work ([`Shutdown::spawn_server`], the gRPC server)
//! outlast both phases: they stop ([`Shutdown::serving_token`]) only once the Lease is
//! released, so that while the work stops and the Lease is handed over, the replica that still
//! holds it keeps answering for it, instead of leaving it with no one to answer until the
//! Lease changes hands.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How draining ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every tracked task finished within the grace period.
    Completed,
    /// The grace period ran out with tasks still running.
    TimedOut { still_running: usize },
    /// Every tracked task finished, but one gave up a write it had sent
    /// ([`Shutdown::withhold_release`]): nothing was released.
    Withheld,
}

/// The process-wide shutdown signal and the tasks that must finish before exit.
#[derive(Debug, Clone)]
pub struct Shutdown {
    token: CancellationToken,
    tasks: TaskTracker,
    grace: Duration,
    release: CancellationToken,
    releases: TaskTracker,
    serving: CancellationToken,
    servers: TaskTracker,
    /// Set by [`Shutdown::withhold_release`].
    withheld: Arc<AtomicBool>,
    /// Tracked tasks still running when the grace period ran out ([`Shutdown::abandoned_work`]).
    abandoned: Counter,
}

impl Shutdown {
    pub fn new(grace: Duration) -> Self {
        Self {
            token: CancellationToken::new(),
            tasks: TaskTracker::new(),
            grace,
            release: CancellationToken::new(),
            releases: TaskTracker::new(),
            serving: CancellationToken::new(),
            servers: TaskTracker::new(),
            withheld: Arc::default(),
            abandoned: Counter::default(),
        }
    }

    /// Cancelled when shutdown starts; loops select on `token().cancelled()`.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Starts shutdown, as a signal would.
    pub fn trigger(&self) {
        self.token.cancel();
    }

    /// Runs `task` as work that shutdown waits for.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// Tells shutdown that tracked work gave up a write it had already sent (a bound of its own
    /// ran out): the API server may still carry it out, so nothing is released, as when the
    /// grace period runs out, and the Lease expires on its own once this process is gone.
    pub fn withhold_release(&self) {
        self.withheld.store(true, Ordering::SeqCst);
    }

    /// How many tracked tasks (a reconcile, a re-apply) were still running when the grace
    /// period ran out, and were left to end with the process while its Lease expires; the
    /// component registers it as `arbor_<component>_shutdown_work_abandoned_total`.
    pub fn abandoned_work(&self) -> Counter {
        self.abandoned.clone()
    }

    /// Cancelled once the tracked work has finished: the signal for what must outlast every
    /// writer to let go (the Lease), never before.
    pub fn release_token(&self) -> CancellationToken {
        self.release.clone()
    }

    /// Runs `task` as the second phase of shutdown: it should end soon after
    /// [`Shutdown::release_token`] is cancelled, and the drain waits for it.
    pub fn spawn_release<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.releases.spawn(task)
    }

    /// Cancelled last, once the releases have finished (or the grace period ran out on the
    /// work): the signal for servers to stop answering.
    pub fn serving_token(&self) -> CancellationToken {
        self.serving.clone()
    }

    /// Runs `task`, a server that should stop soon after [`Shutdown::serving_token`] is
    /// cancelled, as shutdown's last phase: the drain waits for it after the releases.
    pub fn spawn_server<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.servers.spawn(task)
    }

    /// Triggers shutdown on the first SIGTERM or SIGINT.
    pub fn trigger_on_signals(&self) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let token = self.token.clone();
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
                () = token.cancelled() => return,
            };
            tracing::info!(signal = name, "shutting down");
            token.cancel();
        });
        Ok(())
    }

    /// Waits for shutdown to start, then for tracked tasks, at most the grace period; then,
    /// only if they all finished and none gave up a write ([`Shutdown::withhold_release`]),
    /// releases (the second phase), again at most the grace period;
    /// then stops the servers (at most the grace period again when the work finished).
    pub async fn drain(&self) -> Drained {
        let drained = self.drain_work().await;
        self.serving.cancel();
        self.servers.close();
        if !matches!(drained, Drained::TimedOut { .. })
            && tokio::time::timeout(self.grace, self.servers.wait())
                .await
                .is_err()
        {
            tracing::warn!(grace = ?self.grace, "the servers did not stop within the grace period");
        }
        drained
    }

    async fn drain_work(&self) -> Drained {
        self.token.cancelled().await;
        self.tasks.close();
        if tokio::time::timeout(self.grace, self.tasks.wait())
            .await
            .is_err()
        {
            let still_running = self.tasks.len();
            self.abandoned
                .inc_by(u64::try_from(still_running).unwrap_or(u64::MAX));
            tracing::warn!(still_running, grace = ?self.grace, "grace period over; exiting with work in flight, leaving the Lease to expire rather than releasing it under a running writer");
            return Drained::TimedOut { still_running };
        }
        if self.withheld.load(Ordering::SeqCst) {
            tracing::warn!(
                "work gave up a write it had sent; leaving the Lease to expire rather than releasing it while the write may still land"
            );
            return Drained::Withheld;
        }
        self.release.cancel();
        self.releases.close();
        if tokio::time::timeout(self.grace, self.releases.wait())
            .await
            .is_err()
        {
            tracing::warn!(grace = ?self.grace, "releasing did not finish within the grace period");
        }
        Drained::Completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tracked work that outlives the signal, such as finishing an apply; the flag says it
    /// finished.
    fn spawn_slow_writer(shutdown: &Shutdown) -> Arc<AtomicBool> {
        let finished = Arc::new(AtomicBool::new(false));
        let token = shutdown.token();
        let flag = finished.clone();
        shutdown.spawn(async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
        });
        finished
    }

    #[tokio::test]
    async fn in_flight_work_finishes_before_drain_returns() {
        let shutdown = Shutdown::new(Duration::from_secs(30));
        let finished = spawn_slow_writer(&shutdown);
        shutdown.trigger();
        assert_eq!(shutdown.drain().await, Drained::Completed);
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn releases_wait_until_every_tracked_task_has_finished() {
        let shutdown = Shutdown::new(Duration::from_secs(30));
        let writer_done = spawn_slow_writer(&shutdown);
        let released_after_writer = Arc::new(AtomicBool::new(false));
        let release = shutdown.release_token();
        let (done, seen) = (writer_done.clone(), released_after_writer.clone());
        shutdown.spawn_release(async move {
            release.cancelled().await;
            seen.store(done.load(Ordering::SeqCst), Ordering::SeqCst);
        });
        shutdown.trigger();
        assert_eq!(shutdown.drain().await, Drained::Completed);
        assert!(released_after_writer.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn servers_stop_only_after_the_releases() {
        let shutdown = Shutdown::new(Duration::from_secs(30));
        let released = Arc::new(AtomicBool::new(false));
        let (release, flag) = (shutdown.release_token(), released.clone());
        shutdown.spawn_release(async move {
            release.cancelled().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
        });
        let served_through_release = Arc::new(AtomicBool::new(false));
        let (serving, done, seen) = (
            shutdown.serving_token(),
            released.clone(),
            served_through_release.clone(),
        );
        shutdown.spawn_server(async move {
            serving.cancelled().await;
            seen.store(done.load(Ordering::SeqCst), Ordering::SeqCst);
        });
        shutdown.trigger();
        assert!(!shutdown.serving_token().is_cancelled());
        assert_eq!(shutdown.drain().await, Drained::Completed);
        assert!(served_through_release.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn nothing_is_released_while_stuck_work_still_runs() {
        let shutdown = Shutdown::new(Duration::from_millis(50));
        shutdown.spawn(std::future::pending::<()>());
        shutdown.trigger();
        assert_eq!(
            shutdown.drain().await,
            Drained::TimedOut { still_running: 1 }
        );
        assert!(!shutdown.release_token().is_cancelled());
        assert_eq!(
            shutdown.abandoned_work().get(),
            1,
            "the stuck task is counted"
        );
    }

    #[tokio::test]
    async fn nothing_is_released_once_work_gave_up_a_write_it_had_sent() {
        let shutdown = Shutdown::new(Duration::from_secs(30));
        let (token, giving_up) = (shutdown.token(), shutdown.clone());
        shutdown.spawn(async move {
            token.cancelled().await;
            giving_up.withhold_release();
        });
        shutdown.trigger();
        assert_eq!(shutdown.drain().await, Drained::Withheld);
        assert!(!shutdown.release_token().is_cancelled());
        assert!(shutdown.serving_token().is_cancelled());
    }

    #[tokio::test]
    async fn stuck_work_is_abandoned_after_the_grace_period() {
        let shutdown = Shutdown::new(Duration::from_millis(50));
        shutdown.spawn(std::future::pending::<()>());
        shutdown.trigger();
        assert_eq!(
            shutdown.drain().await,
            Drained::TimedOut { still_running: 1 }
        );
    }
}
