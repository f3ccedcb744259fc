//! Watching git-managed objects for changes to their content.

use std::collections::HashMap;

use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::GroupVersionKind;
use arbor_policy::sync::matches::SERVER_OWNED_METADATA;
use arbor_policy::sync::{CompareFields, compare};
use arbor_proto::v1::{DriftEvent, DriftKind};
use futures::StreamExt;
use kube::Api;
use kube::core::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use arbor_runtime::admin::ReadyGate;

use crate::convert::{self, object_ref};
use crate::metrics::Metrics;
use crate::resolve::Resolver;

/// One kind's watch of git-managed objects.
#[derive(Debug)]
pub struct KindWatch {
    pub resolver: Resolver,
    pub kind: GroupVersionKind,
    pub label: ManagementLabel,
    /// Opened once the watch has its initial list (or the kind is not served).
    pub listed: ReadyGate,
    /// Every replica watches every labelled object; with `--shards`, only the holder of an
    /// object's shard ([`reported_here`]) reports its drift, so gitsync hears of it once.
    pub shards: arbor_runtime::Shards,
}

/// Whether this replica reports `drift`: it holds the shard of the drifted object's identity
/// (group, kind, namespace and name, the same in every replica: a drift event names no uid).
pub fn reported_here(shards: &arbor_runtime::Shards, drift: &DriftEvent) -> bool {
    let Some(object) = &drift.object else {
        return true;
    };
    let identity = format!(
        "{}/{}/{}/{}",
        object.group, object.kind, object.namespace, object.name
    );
    shards.holds(shards.shard_of(&identity))
}

/// Watches the objects of the kind that carry the label and sends a drift event for every
/// change of their content, until `token` is cancelled or `events` is closed.
pub async fn watch_kind(
    watch: KindWatch,
    events: mpsc::Sender<DriftEvent>,
    metrics: Metrics,
    token: CancellationToken,
) {
    let KindWatch {
        resolver,
        kind,
        label,
        listed,
        shards,
    } = watch;
    let api_version = kind.api_version();
    let served = match resolver.served(&api_version, &kind.kind).await {
        Ok(served) => served,
        Err(error) => {
            tracing::warn!(%error, "drift of this kind is not watched");
            listed.open();
            return;
        }
    };
    let api: Api<DynamicObject> = Api::all_with(resolver.client(), &served.resource);
    let config = watcher::Config::default().labels(&format!("{}={}", label.key, label.value));
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut tracker = ContentTracker::new(api_version, kind.kind.into(), label);
    loop {
        let event = tokio::select! {
            () = token.cancelled() => return,
            event = stream.next() => match event {
                Some(Ok(event)) => {
                    if matches!(event, Event::InitDone) {
                        listed.open();
                    }
                    event
                }
                Some(Err(error)) => {
                    tracing::debug!(%error, "drift watch error; the watch restarts");
                    continue;
                }
                None => return,
            },
        };
        for drift in tracker.on_event(event) {
            if !reported_here(&shards, &drift) {
                continue;
            }
            metrics.drift("managed");
            if events.send(drift).await.is_err() {
                return;
            }
        }
    }
}

/// The last seen content of every watched object of one kind.
#[derive(Debug)]
pub struct ContentTracker {
    api_version: String,
    kind: String,
    label: ManagementLabel,
    contents: HashMap<(Option<String>, String), Value>,
}

impl ContentTracker {
    pub fn new(api_version: String, kind: String, label: ManagementLabel) -> Self {
        Self {
            api_version,
            kind,
            label,
            contents: HashMap::new(),
        }
    }

    /// The drift events `event` means: a changed content of an object seen before, or the
    /// deletion of one. Objects seen for the first time are recorded, not reported: a new
    /// object is not drift.
    pub fn on_event(&mut self, event: Event<DynamicObject>) -> Vec<DriftEvent> {
        match event {
            Event::Apply(object) | Event::InitApply(object) => {
                self.changed(&object).into_iter().collect()
            }
            Event::Delete(object) => {
                let key = (
                    object.metadata.namespace.clone(),
                    object.metadata.name.clone().unwrap_or_default(),
                );
                if self.contents.remove(&key).is_none() {
                    return Vec::new();
                }
                vec![convert::drift_event(
                    self.object_ref(&key),
                    DriftKind::Deleted,
                    Vec::new(),
                    String::new(),
                )]
            }
            Event::Init | Event::InitDone => Vec::new(),
        }
    }

    fn changed(&mut self, object: &DynamicObject) -> Option<DriftEvent> {
        let key = (
            object.metadata.namespace.clone(),
            object.metadata.name.clone().unwrap_or_default(),
        );
        let whole = serde_json::to_value(object).ok()?;
        let content = content(&whole);
        let previous = self.contents.insert(key.clone(), content.clone())?;
        if previous == content {
            return None;
        }
        let mut fields: Vec<String> = compare(
            &previous,
            &content,
            &CompareFields::AllDeclared,
            &self.label,
        )
        .paths()
        .chain(
            compare(
                &content,
                &previous,
                &CompareFields::AllDeclared,
                &self.label,
            )
            .paths(),
        )
        .map(convert::field_name)
        .collect();
        fields.sort();
        fields.dedup();
        Some(convert::drift_event(
            self.object_ref(&key),
            DriftKind::Modified,
            fields,
            whole.to_string(),
        ))
    }

    fn object_ref(
        &self,
        (namespace, name): &(Option<String>, String),
    ) -> arbor_proto::v1::ObjectRef {
        object_ref(&self.api_version, &self.kind, namespace.as_deref(), name)
    }
}

/// What a person or a tool may change in an object: everything but `status` and the metadata
/// the server writes (resourceVersion, generation, managedFields, ...).
pub fn content(object: &Value) -> Value {
    let Value::Object(fields) = object else {
        return object.clone();
    };
    let mut content: Map<String, Value> = fields
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "status" | "metadata"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if let Some(Value::Object(metadata)) = fields.get("metadata") {
        let kept: Map<String, Value> = metadata
            .iter()
            .filter(|(key, _)| !SERVER_OWNED_METADATA.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        content.insert("metadata".into(), Value::Object(kept));
    }
    Value::Object(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(data: &str, resource_version: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team", "resourceVersion": resource_version,
                "labels": {"arbor.dev/managed": "enabled"}},
            "data": {"mode": data},
        }))
        .unwrap()
    }

    fn tracker() -> ContentTracker {
        ContentTracker::new("v1".into(), "ConfigMap".into(), ManagementLabel::arbor())
    }

    #[test]
    fn first_sight_is_not_drift_but_a_content_change_is() {
        let mut tracker = tracker();
        assert!(
            tracker
                .on_event(Event::InitApply(config_map("a", "1")))
                .is_empty()
        );
        let drift = tracker.on_event(Event::Apply(config_map("b", "2")));
        assert_eq!(drift.len(), 1);
        assert_eq!(drift[0].changed_fields, ["data.mode"]);
        assert_eq!(drift[0].kind, DriftKind::Modified as i32);
        let object = drift[0].object.as_ref().unwrap();
        assert_eq!(
            (object.kind.as_str(), object.namespace.as_str()),
            ("ConfigMap", "team")
        );
    }

    #[test]
    fn server_metadata_and_status_changes_are_not_drift() {
        let mut tracker = tracker();
        tracker.on_event(Event::Apply(config_map("a", "1")));
        assert!(
            tracker
                .on_event(Event::Apply(config_map("a", "7")))
                .is_empty()
        );
    }

    #[test]
    fn deletion_of_a_known_object_is_drift() {
        let mut tracker = tracker();
        tracker.on_event(Event::Apply(config_map("a", "1")));
        let drift = tracker.on_event(Event::Delete(config_map("a", "2")));
        assert_eq!(drift[0].kind, DriftKind::Deleted as i32);
        assert!(
            tracker
                .on_event(Event::Delete(config_map("a", "3")))
                .is_empty()
        );
    }
}
