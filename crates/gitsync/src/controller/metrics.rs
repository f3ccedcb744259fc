//! Prometheus metrics of the gitsync controllers (registered under `arbor_gitsync_`).

use arbor_runtime::ShardMetrics;
use arbor_runtime::decode::DecodeFailures;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::registry::ObjectState;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ObjectLabels {
    pub source: String,
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabels {
    pub code: String,
}

/// The metrics, shared by every reconciler.
#[derive(Debug)]
pub struct Metrics {
    /// Declared objects by source and state.
    pub objects: Family<ObjectLabels, Gauge>,
    /// Duration of full sync rounds.
    pub sync_duration: Histogram,
    /// From a commit's time to the end of the round that applied it.
    pub commit_to_applied: Histogram,
    /// Errors by stable code.
    pub errors: Family<ErrorLabels, Counter>,
    /// Sources and tracking objects skipped because they do not decode.
    pub undecodable: DecodeFailures,
    /// Shards held and rounds started, per shard (`--shards`).
    pub shards: ShardMetrics,
    /// Drift corrections (gRPC `ReportDrift`) whose write had not been answered
    /// [`CORRECTION_STOP_PATIENCE`](crate::grpc::CORRECTION_STOP_PATIENCE) after the replica
    /// began to stop, and that were given up.
    pub drift_corrections_abandoned: Counter,
    /// Drift corrections (gRPC `ReportDrift`) that panicked; each was left to a full round of
    /// its source, asked for at once, and the rest of their report was still corrected.
    pub drift_corrections_panicked: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            objects: Family::default(),
            sync_duration: Histogram::new(exponential_buckets(0.005, 2.0, 16)),
            commit_to_applied: Histogram::new(exponential_buckets(0.05, 2.0, 16)),
            errors: Family::default(),
            undecodable: DecodeFailures::default(),
            shards: ShardMetrics::default(),
            drift_corrections_abandoned: Counter::default(),
            drift_corrections_panicked: Counter::default(),
        }
    }
}

/// The help of `drift_corrections_abandoned`, naming the patience the code uses.
fn abandoned_corrections_help() -> String {
    format!(
        "Drift re-applies whose write was not answered within {:?} of the replica beginning to \
         stop and that were given up (the write may still land; the Lease is left to expire)",
        crate::grpc::CORRECTION_STOP_PATIENCE
    )
}

impl Metrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "objects",
            "Declared objects by source and state",
            metrics.objects.clone(),
        );
        registry.register(
            "sync_duration_seconds",
            "Duration of full sync rounds",
            metrics.sync_duration.clone(),
        );
        registry.register(
            "commit_to_applied_seconds",
            "Time from a commit to the end of the round that applied it",
            metrics.commit_to_applied.clone(),
        );
        registry.register("errors", "Sync errors by code", metrics.errors.clone());
        registry.register(
            "drift_corrections_abandoned",
            abandoned_corrections_help(),
            metrics.drift_corrections_abandoned.clone(),
        );
        registry.register(
            "drift_corrections_panicked",
            "Drift re-applies that panicked; each was left to a full round of its source, asked \
             for at once, and the rest of their report was still corrected",
            metrics.drift_corrections_panicked.clone(),
        );
        Self {
            undecodable: DecodeFailures::register(registry),
            shards: ShardMetrics::register(
                registry,
                "shard_rounds",
                "Sync rounds started, by the shard of their source",
            ),
            ..metrics
        }
    }

    /// Sets the object counts of `source`.
    pub fn set_objects(&self, source: &str, counts: &[(ObjectState, usize)]) {
        for state in ObjectState::ALL {
            let count = counts
                .iter()
                .find(|(counted, _)| *counted == state)
                .map_or(0, |(_, count)| *count);
            self.objects
                .get_or_create(&ObjectLabels {
                    source: source.to_owned(),
                    state: state.as_str().to_owned(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    pub fn count_error(&self, code: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                code: code.to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The help text says the patience the re-applies are given, whatever it is set to.
    #[test]
    fn the_abandoned_corrections_help_names_the_patience_in_force() {
        let mut registry = Registry::with_prefix("arbor_gitsync");
        Metrics::register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        let help = text
            .lines()
            .find(|line| line.starts_with("# HELP arbor_gitsync_drift_corrections_abandoned"))
            .expect("the metric is registered");
        let patience = format!("{:?}", crate::grpc::CORRECTION_STOP_PATIENCE);
        assert!(help.contains(&patience), "{help}");
    }
}
