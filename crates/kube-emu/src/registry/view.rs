//! Kinds served from another kind's storage, as kube-apiserver serves `events.k8s.io/v1` Events
//! from the same storage as core `v1` Events: one object, two shapes. An Event written through
//! either API is read, listed and watched through both, with one name, uid and resourceVersion.
//!
//! The fields that differ are renamed on the way in and out, with kube-apiserver's conversion
//! (`k8s.io/kubernetes/pkg/apis/events/v1` to and from the internal Event, whose core `v1`
//! encoding is the stored shape): `regarding` is `involvedObject`, `note` is `message`,
//! `reportingController` is `reportingComponent`, and the `deprecated*` fields are the core
//! Event's `source`, `firstTimestamp`, `lastTimestamp` and `count`. The rest (`eventTime`,
//! `series`, `action`, `reason`, `type`, `related`, `reportingInstance`) has one name in both.

use serde_json::{Map, Value};

use super::ResourceId;

/// Which conversion a view applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// `events.k8s.io/v1` Event over the core `v1` Event.
    Events,
}

/// A kind whose objects live in another kind's storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageView {
    /// The kind whose storage holds the objects.
    pub storage: ResourceId,
    pub conversion: Conversion,
}

/// `(view field, stored field)` of an `events.k8s.io/v1` Event.
const EVENT_RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// The field selectors `events.k8s.io/v1` accepts, with the stored field each one reads
/// (kube-apiserver's field label conversion for the group).
pub const EVENT_FIELD_LABELS: [(&str, &str); 10] = [
    ("regarding.kind", "involvedObject.kind"),
    ("regarding.namespace", "involvedObject.namespace"),
    ("regarding.name", "involvedObject.name"),
    ("regarding.uid", "involvedObject.uid"),
    ("regarding.apiVersion", "involvedObject.apiVersion"),
    (
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("regarding.fieldPath", "involvedObject.fieldPath"),
    ("reportingController", "reportingComponent"),
    ("reason", "reason"),
    ("type", "type"),
];

/// Moves each `(from, to)` field; a field already under a `to` name is not the shape's own
/// (a core `message` sent to events.k8s.io is an unknown field there) and gives way.
fn rename(object: &mut Value, renames: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let mut moved = Map::new();
    for (from, to) in renames {
        map.remove(to);
        if let Some(value) = map.remove(from) {
            moved.insert(to.to_owned(), value);
        }
    }
    map.extend(moved);
}

impl StorageView {
    /// A body written through the view, in the stored shape.
    pub fn to_storage(&self, mut object: Value) -> Value {
        match self.conversion {
            Conversion::Events => rename(&mut object, EVENT_RENAMES.into_iter()),
        }
        object
    }

    /// A stored object in the view's shape (apiVersion and kind are the caller's).
    pub fn to_view(&self, mut object: Value) -> Value {
        match self.conversion {
            Conversion::Events => rename(
                &mut object,
                EVENT_RENAMES
                    .into_iter()
                    .map(|(view, stored)| (stored, view)),
            ),
        }
        object
    }

    /// A field selector of the view, in the stored object's field names: the labels the view
    /// accepts are translated, any other is kept and refused later as unknown.
    pub fn storage_field_selector(&self, selector: &str) -> String {
        let labels: &[(&str, &str)] = match self.conversion {
            Conversion::Events => &EVENT_FIELD_LABELS,
        };
        selector
            .split(',')
            .map(|requirement| {
                let split = requirement.find(['=', '!']).unwrap_or(requirement.len());
                let (label, rest) = requirement.split_at(split);
                let label = label.trim();
                match labels.iter().find(|(view, _)| *view == label) {
                    Some((_, stored)) => format!("{stored}{rest}"),
                    None => requirement.to_owned(),
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn events() -> StorageView {
        StorageView {
            storage: ResourceId::new("", "events"),
            conversion: Conversion::Events,
        }
    }

    #[test]
    fn an_events_k8s_io_event_is_stored_as_a_core_event_and_read_back_unchanged() {
        let view = json!({
            "metadata": {"name": "web.1"},
            "regarding": {"kind": "Pod", "name": "web"},
            "note": "pulled", "reason": "Pulled", "type": "Normal", "action": "Pull",
            "reportingController": "kubelet", "reportingInstance": "node-1",
            "deprecatedCount": 3, "deprecatedSource": {"component": "kubelet"},
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
            "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
        });
        let stored = events().to_storage(view.clone());
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["message"], "pulled");
        assert_eq!(stored["reportingComponent"], "kubelet");
        assert_eq!(stored["count"], 3);
        assert_eq!(stored["source"]["component"], "kubelet");
        assert_eq!(stored["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(stored["series"]["count"], 2);
        assert!(stored.get("note").is_none() && stored.get("regarding").is_none());
        assert_eq!(events().to_view(stored), view);
    }

    #[test]
    fn a_core_field_sent_to_the_view_is_not_taken_for_its_own() {
        let stored = events().to_storage(json!({"message": "stray", "note": "kept"}));
        assert_eq!(stored, json!({"message": "kept"}));
        let stored = events().to_storage(json!({"message": "stray"}));
        assert_eq!(stored, json!({}));
    }

    #[test]
    fn field_selectors_of_the_view_read_the_stored_fields() {
        assert_eq!(
            events().storage_field_selector(
                "regarding.name=web,reportingController!=kubelet,type==Normal"
            ),
            "involvedObject.name=web,reportingComponent!=kubelet,type==Normal"
        );
        assert_eq!(events().storage_field_selector(""), "");
    }
}
