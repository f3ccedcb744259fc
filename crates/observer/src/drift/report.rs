//! Delivering drift events to arbor-gitsync (`SyncService.ReportDrift`).
//!
//! Events are sent in batches of what is waiting. When gitsync cannot be reached, or refuses
//! the batch (any error status: `Unavailable` from a replica that began to stop before it
//! corrected every event), the batch is kept, later events of the same object replace their
//! predecessor in it, and delivery is retried after a pause that doubles up to a ceiling, so a
//! gitsync that comes up late, or the next replica, still hears of every object that drifted
//! meanwhile.

use std::time::Duration;

use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{DriftEvent, ReportDriftRequest};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::drift::debounce::merge;
use crate::metrics::Metrics;

/// Exponential backoff between delivery attempts.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The pause after `failures` consecutive failures (at least one).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// Sends the events from `events` to gitsync until `events` closes or `token` is cancelled.
pub async fn report(
    mut client: SyncServiceClient<Channel>,
    mut events: mpsc::Receiver<DriftEvent>,
    backoff: Backoff,
    metrics: Metrics,
    token: CancellationToken,
) {
    let mut batch: Vec<DriftEvent> = Vec::new();
    let mut failures = 0u32;
    loop {
        if batch.is_empty() {
            tokio::select! {
                () = token.cancelled() => return,
                event = events.recv() => match event {
                    Some(event) => batch.push(event),
                    None => return,
                },
            }
        }
        while let Ok(event) = events.try_recv() {
            add(&mut batch, event);
        }
        let request = ReportDriftRequest {
            events: batch.clone(),
        };
        let outcome = tokio::select! {
            () = token.cancelled() => return,
            outcome = client.report_drift(request) => outcome,
        };
        match outcome {
            Ok(response) => {
                metrics.drift_reports_sent.inc_by(batch.len() as u64);
                let unknown = response.into_inner().unknown;
                if !unknown.is_empty() {
                    tracing::debug!(
                        count = unknown.len(),
                        "gitsync manages none of some reported objects"
                    );
                }
                batch.clear();
                failures = 0;
            }
            Err(status) => {
                failures += 1;
                metrics.drift_report_failures.inc();
                let delay = backoff.delay(failures);
                tracing::warn!(%status, retry_in = ?delay, events = batch.len(), "cannot report drift to gitsync");
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Adds `event` to `batch`, merged into an earlier event of the same object.
fn add(batch: &mut Vec<DriftEvent>, event: DriftEvent) {
    match batch.iter_mut().find(|held| held.object == event.object) {
        Some(held) => merge(held, event),
        None => batch.push(event),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(1), Duration::from_millis(100));
        assert_eq!(backoff.delay(2), Duration::from_millis(200));
        assert_eq!(backoff.delay(4), Duration::from_millis(800));
        assert_eq!(backoff.delay(40), Duration::from_secs(5));
    }
}
