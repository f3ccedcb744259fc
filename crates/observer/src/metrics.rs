//! The observer's Prometheus metrics, under `arbor_observer_`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Where drift was seen.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftLabels {
    /// `application` (an Application's object) or `managed` (a git-managed object).
    pub source: String,
}

/// Handles to every metric; cheap to clone.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub drift_detected: Family<DriftLabels, Counter>,
    pub heal_latency: Histogram,
    pub observers_running: Gauge,
    pub observers_aborted: Counter,
    pub drift_reports_sent: Counter,
    pub drift_report_failures: Counter,
    pub reconcile_errors: Counter,
    pub reconciles_in_flight: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            drift_detected: Family::default(),
            // 1 ms to about 33 s.
            heal_latency: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            observers_running: Gauge::default(),
            observers_aborted: Counter::default(),
            drift_reports_sent: Counter::default(),
            drift_report_failures: Counter::default(),
            reconcile_errors: Counter::default(),
            reconciles_in_flight: Gauge::default(),
        }
    }
}

impl Metrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "drift_detected",
            "Drift seen, by source (application or managed)",
            metrics.drift_detected.clone(),
        );
        registry.register(
            "heal_latency_seconds",
            "From the observer seeing an Application's drift to the controller re-applying it",
            metrics.heal_latency.clone(),
        );
        registry.register(
            "observers_running",
            "Application observers running now",
            metrics.observers_running.clone(),
        );
        registry.register(
            "observers_aborted",
            "Observers that had not ended 10 s after being stopped or replaced and were aborted \
             (a status write they had in flight may land late)",
            metrics.observers_aborted.clone(),
        );
        registry.register(
            "drift_reports_sent",
            "Drift events of git-managed objects delivered to arbor-gitsync",
            metrics.drift_reports_sent.clone(),
        );
        registry.register(
            "drift_report_failures",
            "Failed attempts to deliver drift events to arbor-gitsync",
            metrics.drift_report_failures.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Application reconciliations that failed and were retried",
            metrics.reconcile_errors.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Application reconciles running now (at most --max-concurrent-reconciles)",
            metrics.reconciles_in_flight.clone(),
        );
        metrics
    }

    pub fn drift(&self, source: &str) {
        self.drift_detected
            .get_or_create(&DriftLabels {
                source: source.to_owned(),
            })
            .inc();
    }
}
