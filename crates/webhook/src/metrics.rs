//! The webhook's metrics: decisions by rule and result, and how long they took.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::review_outcome::ReviewOutcome;

/// Labels of one decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `admission` or `review` (gRPC).
    pub via: &'static str,
    /// The deciding rule id.
    pub rule: String,
    /// `allowed` or `denied`.
    pub result: &'static str,
}

/// Labels of a decision's latency.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub via: &'static str,
}

/// Handles to the registered metrics; cheap to clone.
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    decisions: Family<DecisionLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        Self {
            decisions: Family::default(),
            // 50µs .. ~3s: a tree rule takes microseconds, a drift lookup up to its timeout.
            latency: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_05, 3.0, 11))
            }),
        }
    }
}

impl WebhookMetrics {
    /// Creates the metrics and registers them in `registry` (the component's sub-registry).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "decisions",
            "Admission and Review decisions, by deciding rule and result",
            metrics.decisions.clone(),
        );
        registry.register(
            "decision_duration_seconds",
            "Time to decide one review",
            metrics.latency.clone(),
        );
        metrics
    }

    pub fn record(&self, via: &'static str, verdict: &ReviewOutcome, took: Duration) {
        let (rule, allowed) = verdict.deciding_rule();
        self.decisions
            .get_or_create(&DecisionLabels {
                via,
                rule: rule.to_owned(),
                result: if allowed { "allowed" } else { "denied" },
            })
            .inc();
        self.latency
            .get_or_create(&LatencyLabels { via })
            .observe(took.as_secs_f64());
    }

    /// The count of decisions with these labels, for tests.
    pub fn decisions(&self, via: &'static str, rule: &str, allowed: bool) -> u64 {
        self.decisions
            .get_or_create(&DecisionLabels {
                via,
                rule: rule.to_owned(),
                result: if allowed { "allowed" } else { "denied" },
            })
            .get()
    }
}
