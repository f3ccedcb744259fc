//! What the reconcilers share: the compiled rules, the index, the writer, events, metrics and
//! the signal that the caches have synced.

use std::collections::BTreeSet;
use std::sync::Mutex;

use arbor_api::condition::reasons;
use arbor_policy::object;
use arbor_policy::propagation::{CycleReport, PropagationRules};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder};
use serde_json::Value;
use tokio::sync::watch;

use crate::index::Index;
use crate::metrics::Metrics;
use crate::owners::OwnerReader;
use crate::watch::{Triggers, send_triggers};
use crate::writer::Writer;

/// Shared by every reconcile.
pub struct Context {
    pub rules: PropagationRules,
    pub index: Index,
    pub writer: Writer,
    pub recorder: Recorder,
    pub metrics: Metrics,
    /// Owners of kinds not watched, for `propagate-generated`.
    pub owners: OwnerReader,
    /// Where SubNamespaces are served under the key domain.
    pub sub_namespaces: ApiResource,
    triggers: Triggers,
    synced: watch::Receiver<bool>,
    /// Cycles already announced with events, so that an unchanged tree writes nothing.
    reported_cycles: Mutex<BTreeSet<Vec<String>>>,
    /// Objects (by uid) already reported as blocking a copy.
    reported_blocks: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rules: PropagationRules,
        index: Index,
        writer: Writer,
        recorder: Recorder,
        metrics: Metrics,
        sub_namespaces: ApiResource,
        triggers: Triggers,
        synced: watch::Receiver<bool>,
    ) -> Self {
        Self {
            owners: OwnerReader::new(writer.client().clone()),
            rules,
            index,
            writer,
            recorder,
            metrics,
            sub_namespaces,
            triggers,
            synced,
            reported_cycles: Mutex::new(BTreeSet::new()),
            reported_blocks: Mutex::new(BTreeSet::new()),
        }
    }

    /// Waits until every watch has listed once: before that, a missing source may only be
    /// missing from the cache, and deciding on it could delete a copy that must stay.
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        // An error means the watch tasks ended (shutdown); the reconcile then finds nothing.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// Records an object this controller just wrote in place of `replaced` (the object the
    /// write was planned from, `None` when there was none), before its watch event arrives: a
    /// reconcile triggered meanwhile then sees it in place instead of writing it again. The
    /// namespaces it touches are triggered as the watch event would have. Unless the watch
    /// has already said something newer of it ([`Index::apply_written`]).
    pub fn observe_written(&self, object: Value, replaced: Option<&Value>) {
        let replaced = replaced.and_then(|r| object::str_at(r, &["metadata", "resourceVersion"]));
        send_triggers(&self.triggers, self.index.apply_written(object, replaced));
    }

    /// Records an object this controller just deleted (see [`Context::observe_written`]).
    pub fn observe_deleted(&self, object: &Value) {
        send_triggers(&self.triggers, self.index.delete_written(object));
    }

    /// Publishes an event, logging (never failing the reconcile) when that is not possible.
    pub async fn publish(
        &self,
        reference: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, reference).await {
            tracing::warn!(%error, reason, object = ?reference.name, "cannot publish event");
        }
    }

    /// Announces `cycle` once (an event on each member), until it is resolved.
    pub async fn report_cycle(&self, cycle: &[String], report: &CycleReport) {
        let fresh = {
            let mut reported = self
                .reported_cycles
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            reported.retain(|known| report.cycles.contains(known));
            reported.insert(cycle.to_vec())
        };
        if !fresh {
            return;
        }
        let mut path = cycle.to_vec();
        path.push(cycle[0].clone());
        let note = format!(
            "namespace cycle {}: propagation is halted in these namespaces and below them",
            path.join(" -> ")
        );
        tracing::warn!(cycle = %path.join(" -> "), "cycle detected; propagation halted");
        self.metrics.error(reasons::CYCLE_DETECTED);
        for member in cycle {
            self.publish(
                &namespace_reference(member),
                true,
                reasons::CYCLE_DETECTED,
                "HaltPropagation",
                note.clone(),
            )
            .await;
        }
    }

    /// Whether the object with `uid` is reported as blocking a copy for the first time.
    pub fn first_block_report(&self, uid: &str) -> bool {
        self.reported_blocks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.to_owned())
    }

    /// Forgets announced cycles that are gone, so a cycle formed again is announced again.
    pub fn forget_resolved_cycles(&self, report: &CycleReport) {
        self.reported_cycles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|known| report.cycles.contains(known));
    }
}

/// A reference to namespace `name`, for events about it.
pub fn namespace_reference(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Namespace".into()),
        name: Some(name.to_owned()),
        ..ObjectReference::default()
    }
}
