//! From a declared state to what this instance applies for one source: the ownership matrix
//! (seeds/002) decides each object's tracking object, or why it is ignored.
//!
//! CustomResourceDefinitions and Namespaces are the **foundation**: they are planned and applied
//! before everything else, because the kinds and namespaces of the other objects may depend on
//! them. [`Planner::plan`] takes which part to plan.

use std::sync::Arc;

use arbor_api::keys::{ArborKeys, Keys, SourceRef};
use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::{GroupKind, GroupVersionKind, Interned, ObjectKey};
use arbor_policy::ownership::{ObjectScope, TrackingObject, WatchScope};
use arbor_policy::sync::CompareFields;
use serde_json::Value;

use super::held_state::{HeldObject, HeldState};
use super::source_handle::SourceHandle;
use crate::apply::object::{Marks, applied_form};
use crate::apply::{ApplyError, Discovery};

const CRD_GROUP: &str = "apiextensions.k8s.io";
const CRD_KIND: &str = "CustomResourceDefinition";

/// Which declared objects to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// CustomResourceDefinitions and Namespaces.
    Foundation,
    /// Everything else.
    Rest,
}

impl Part {
    pub fn of(kind: &GroupKind) -> Self {
        let foundation = (kind.group == CRD_GROUP && kind.kind == CRD_KIND)
            || (kind.group.is_empty() && kind.kind == "Namespace");
        if foundation {
            Self::Foundation
        } else {
            Self::Rest
        }
    }
}

/// A declared object this instance applies.
#[derive(Debug, Clone)]
pub struct PlannedObject {
    /// The key with the namespace the object lands in.
    pub key: ObjectKey,
    pub gvk: GroupVersionKind,
    pub tracking: TrackingObject,
    /// The key of its declaration in the state it was planned from (without the namespace a
    /// GitTrack gives objects that name none). Its applied form is made when it is written
    /// ([`PlannedObject::applied_form`]), so a round holds a few at a time, not all.
    pub declared: ObjectKey,
    pub file: Interned,
    pub inherited_from: Option<String>,
    pub compare: CompareFields,
    pub compare_fields: Vec<String>,
}

impl PlannedObject {
    pub fn namespace(&self) -> Option<&str> {
        self.key.namespace.as_deref()
    }

    /// The object as `source` applies it, from `state`, the state it was planned from.
    pub fn applied_form(
        &self,
        state: &HeldState,
        keys: &Keys,
        label: &ManagementLabel,
        source: &SourceRef,
    ) -> Value {
        match state.objects.get(&self.declared) {
            Some(declared) => applied_form_for(keys, label, source, declared, self.namespace()),
            // Planned from this very state: not expected. An empty object is refused by the
            // API server with an error naming the object, never applied as something else.
            None => Value::Object(serde_json::Map::new()),
        }
    }
}

/// `declared` as `source` applies it: landing in `namespace`, with the management label and
/// the source and declared-in annotations.
pub fn applied_form_for(
    keys: &Keys,
    label: &ManagementLabel,
    source: &SourceRef,
    declared: &HeldObject,
    namespace: Option<&str>,
) -> Value {
    let source_annotation = keys.source_annotation();
    let declared_in_annotation = keys.declared_in_annotation();
    let source_value = source.to_string();
    let marks = Marks {
        label,
        source: (&source_annotation, &source_value),
        declared_in: (&declared_in_annotation, &declared.source.path),
    };
    applied_form(declared.object(), namespace, &marks)
}

/// A declared object that is not applied.
#[derive(Debug)]
pub struct Unapplied {
    pub key: ObjectKey,
    pub gvk: Option<GroupVersionKind>,
    pub file: Interned,
    pub declared: Arc<Value>,
    pub why: Why,
}

/// Why a declared object is not applied.
#[derive(Debug)]
pub enum Why {
    /// The ownership matrix refuses it (goes to `ignoredFiles`).
    Ignored(String),
    /// Its kind is not served, or discovery failed (an error with a code).
    Failed(ApplyError),
}

/// The plan for one part of a source.
#[derive(Debug, Default)]
pub struct Plan {
    pub objects: Vec<PlannedObject>,
    pub unapplied: Vec<Unapplied>,
}

/// What planning needs besides the state.
#[derive(Debug, Clone, Copy)]
pub struct Planner<'a> {
    pub discovery: &'a Discovery,
    pub scope: &'a WatchScope,
    pub keys: &'a Keys,
    pub label: &'a arbor_policy::keys::ManagementLabel,
}

impl Planner<'_> {
    /// Plans the objects of `part` that `state` declares for `handle`.
    pub async fn plan(&self, handle: &SourceHandle, state: &HeldState, part: Part) -> Plan {
        // Sized once: grown by doubling, a plan of every object of a large source held up to
        // twice its size while the round applied it.
        let in_part = state
            .objects
            .keys()
            .filter(|key| Part::of(&key.group_kind) == part)
            .count();
        let mut plan = Plan {
            objects: Vec::with_capacity(in_part),
            unapplied: Vec::new(),
        };
        for (key, declared) in &state.objects {
            if Part::of(&key.group_kind) != part {
                continue;
            }
            let unapplied = |gvk: Option<GroupVersionKind>, why| Unapplied {
                key: key.clone(),
                gvk,
                file: declared.source.path.clone(),
                declared: Arc::new(declared.object()),
                why,
            };
            // The layout checked every object's identity; a failure here is not expected.
            let Some(object_gvk) = declared.gvk.clone() else {
                continue;
            };
            let namespaced = match self.discovery.served(&object_gvk).await {
                Ok(served) => served.namespaced,
                Err(error) => {
                    plan.unapplied
                        .push(unapplied(Some(object_gvk), Why::Failed(error)));
                    continue;
                }
            };
            let scope = ObjectScope::declared_in(declared.namespace.as_deref(), namespaced);
            let tracking = match self.scope.may_apply(&handle.owner, &scope) {
                Ok(tracking) => tracking,
                Err(reason) => {
                    plan.unapplied.push(unapplied(
                        Some(object_gvk),
                        Why::Ignored(format!("{key}: {reason}")),
                    ));
                    continue;
                }
            };
            let namespace = match &tracking {
                TrackingObject::GitTrackObject { namespace } => Some(namespace.clone()),
                TrackingObject::ClusterGitTrackObject => None,
            };
            let compare_fields = state
                .kinds
                .get(&key.group_kind)
                .map(|kind| kind.compare_fields.clone())
                .unwrap_or_default();
            plan.objects.push(PlannedObject {
                key: ObjectKey {
                    namespace: namespace.clone(),
                    ..key.clone()
                },
                declared: key.clone(),
                gvk: object_gvk,
                tracking,
                file: declared.source.path.clone(),
                inherited_from: declared.inherited_from.clone(),
                compare: CompareFields::parse(&compare_fields).unwrap_or_default(),
                compare_fields,
            });
        }
        plan
    }
}

/// The kinds a CustomResourceDefinition (`declared`) declares, one per served version.
pub fn crd_kinds(declared: &Value) -> Vec<GroupVersionKind> {
    let spec = &declared["spec"];
    let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str()) else {
        return Vec::new();
    };
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|version| version["served"].as_bool().unwrap_or(true))
        .filter_map(|version| version["name"].as_str())
        .map(|version| GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        })
        .collect()
}

/// Whether `kind` is the CustomResourceDefinition kind.
pub fn is_crd(kind: &GroupKind) -> bool {
    kind.group == CRD_GROUP && kind.kind == CRD_KIND
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crds_and_namespaces_are_the_foundation() {
        assert_eq!(Part::of(&GroupKind::new("", "Namespace")), Part::Foundation);
        assert_eq!(
            Part::of(&GroupKind::new(CRD_GROUP, CRD_KIND)),
            Part::Foundation
        );
        assert_eq!(Part::of(&GroupKind::new("", "ConfigMap")), Part::Rest);
    }

    #[test]
    fn crd_kinds_are_its_served_versions() {
        let declared = json!({"spec": {
            "group": "example.com", "names": {"kind": "Widget"},
            "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}],
        }});
        let kinds = crd_kinds(&declared);
        assert_eq!(kinds.len(), 1);
        assert_eq!(
            (kinds[0].version.as_str(), kinds[0].kind.as_str()),
            ("v1", "Widget")
        );
    }
}
