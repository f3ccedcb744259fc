//! The controller's metrics, registered in the `hierarchy` sub-registry (so they appear as
//! `arbor_hierarchy_*`): copies written by action, reconcile duration, errors by reason.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `create`, `update` or `delete`.
    pub action: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcilerLabels {
    /// `namespace` or `subnamespace`.
    pub reconciler: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub reason: String,
}

/// Handles to every metric; cheap to clone.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub propagated_objects: Family<ActionLabels, Counter>,
    pub reconcile_duration: Family<ReconcilerLabels, Histogram>,
    pub reconciles: Counter,
    pub errors: Family<ErrorLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            propagated_objects: Family::default(),
            reconcile_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 14))
            }),
            reconciles: Counter::default(),
            errors: Family::default(),
        }
    }
}

impl Metrics {
    /// Creates the metrics and registers them in `registry` (the `hierarchy` sub-registry).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "propagated_objects",
            "Copies of propagated objects written, by action",
            metrics.propagated_objects.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile, by reconciler",
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "reconciles",
            "Namespace reconciles completed",
            metrics.reconciles.clone(),
        );
        registry.register(
            "errors",
            "Reconcile errors, by reason",
            metrics.errors.clone(),
        );
        metrics
    }

    pub fn copy_written(&self, action: &str) {
        self.propagated_objects
            .get_or_create(&ActionLabels {
                action: action.to_owned(),
            })
            .inc();
    }

    pub fn error(&self, reason: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn observe(&self, reconciler: &str, seconds: f64) {
        self.reconcile_duration
            .get_or_create(&ReconcilerLabels {
                reconciler: reconciler.to_owned(),
            })
            .observe(seconds);
    }
}
