//! Graceful shutdown.
//!
//! SIGTERM or SIGINT cancels one token that every watch and server loop selects on; tasks
//! started through [`Shutdown::spawn`] are then given a bounded grace period to finish what
//! they were doing (an apply half-way through a source, a Lease release) before the process
//! exits anyway, so that a stuck request can never keep a Pod in Terminating forever.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How draining ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every tracked task finished within the grace period.
    Completed,
    /// The grace period ran out with tasks still running.
    TimedOut { still_running: usize },
}

/// The process-wide shutdown signal and the tasks that must finish before exit.
#[derive(Debug, Clone)]
pub struct Shutdown {
    token: CancellationToken,
    tasks: TaskTracker,
    grace: Duration,
}

impl Shutdown {
    pub fn new(grace: Duration) -> Self {
        Self {
            token: CancellationToken::new(),
            tasks: TaskTracker::new(),
            grace,
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

    /// Waits for shutdown to start, then for tracked tasks, at most the grace period.
    pub async fn drain(&self) -> Drained {
        self.token.cancelled().await;
        self.tasks.close();
        match tokio::time::timeout(self.grace, self.tasks.wait()).await {
            Ok(()) => Drained::Completed,
            Err(_) => {
                let still_running = self.tasks.len();
                tracing::warn!(still_running, grace = ?self.grace, "grace period over; exiting with work in flight");
                Drained::TimedOut { still_running }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn in_flight_work_finishes_before_drain_returns() {
        let shutdown = Shutdown::new(Duration::from_secs(30));
        let finished = Arc::new(AtomicBool::new(false));
        let token = shutdown.token();
        let flag = finished.clone();
        shutdown.spawn(async move {
            token.cancelled().await;
            // Work that outlives the signal, such as finishing an apply.
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
        });
        shutdown.trigger();
        assert_eq!(shutdown.drain().await, Drained::Completed);
        assert!(finished.load(Ordering::SeqCst));
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
