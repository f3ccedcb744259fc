//! The object-copy decision on real objects: reading the facts of [`super::decision`] from a
//! source and a live object, and producing the object to create or apply.
//!
//! Two ways in, matching the two directions the controller reconciles from:
//! - [`plan_namespace_copies`]: one namespace, all objects of a watched kind in it and in its
//!   upstream (a namespace was created, relabelled, or the controller started);
//! - [`plan_fan_out`]: one source object, all namespaces whose upstream holds it (the source
//!   was created, changed or deleted).
//!
//! Both skip nothing on their own: a namespace on or below a cycle must be left out by the
//! caller (see [`super::cycles`]).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::object::{self, GroupKind, ObjectKey};

use super::config::PropagationRules;
use super::copy::{CopyError, build_copy, copy_differs};
use super::decision::{
    CopyDecision, CopyFacts, FromFact, LeaveReason, LiveFact, SourceFact, decide,
};
use super::mode::PropagateMode;
use super::tree::{NamespaceTree, TreeError};

/// What to do with one object name in one namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyAction {
    /// Create this copy.
    Create(Value),
    /// Apply this copy over the live object.
    Update(Value),
    /// Delete the live object.
    Delete,
    Leave(LeaveReason),
}

/// One decision with the object it is about.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCopy {
    pub namespace: String,
    pub group_kind: GroupKind,
    pub name: String,
    pub action: CopyAction,
}

/// Why a plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error(transparent)]
    Copy(#[from] CopyError),
}

/// Decides for one name in `namespace`, whose upstream is `upstream` (`None` for a namespace
/// without parent or template); `source` is the object of that name in the upstream, `live`
/// the object of that name in `namespace`.
pub fn decide_copy(
    rules: &PropagationRules,
    upstream: Option<&str>,
    namespace: &str,
    source: Option<&Value>,
    live: Option<&Value>,
) -> Result<CopyAction, CopyError> {
    let keys = &rules.keys;
    let source_mode = source.and_then(|s| PropagateMode::of(keys, s));
    // The copy the source would make, wherever a source can propagate.
    let desired = match (upstream, source, source_mode) {
        (Some(_), Some(source), Some(_)) => Some(build_copy(rules, source, namespace)?),
        _ => None,
    };
    let live_fact = live.map_or(LiveFact::Absent, |live| LiveFact::Present {
        mode: PropagateMode::of(keys, live),
        from: match object::annotation(live, &keys.from_annotation).filter(|f| !f.is_empty()) {
            None => FromFact::Missing,
            Some(from) if Some(from) == upstream => FromFact::Upstream,
            Some(_) => FromFact::Other,
        },
        differs: desired
            .as_ref()
            .is_some_and(|desired| copy_differs(desired, live)),
    });
    let facts = CopyFacts {
        has_upstream: upstream.is_some(),
        source: match source {
            None => SourceFact::Absent,
            Some(_) => SourceFact::Present { mode: source_mode },
        },
        live: live_fact,
    };
    let desired = || desired.expect("the table creates and updates only from a propagating source");
    Ok(match decide(facts) {
        CopyDecision::Create => CopyAction::Create(desired()),
        CopyDecision::Update => CopyAction::Update(desired()),
        CopyDecision::Delete => CopyAction::Delete,
        CopyDecision::Leave(reason) => CopyAction::Leave(reason),
    })
}

/// The object of one name in the upstream and in the namespace.
type SourceAndLive<'a> = (Option<&'a Value>, Option<&'a Value>);

/// Decides for every object in `namespace_objects` (the objects of `namespace`) and every
/// object in `upstream_objects` (the objects of its upstream), paired by kind and name.
pub fn plan_namespace_copies(
    rules: &PropagationRules,
    tree: &NamespaceTree,
    namespace: &str,
    upstream_objects: &[Value],
    namespace_objects: &[Value],
) -> Result<Vec<PlannedCopy>, PlanError> {
    let role = tree
        .role(namespace)
        .ok_or_else(|| TreeError::UnknownNamespace(namespace.to_owned()))?;
    let upstream = role.upstream().map(|u| u.name());
    let mut pairs: BTreeMap<(GroupKind, String), SourceAndLive> = BTreeMap::new();
    // Without an upstream there is no source, whatever the caller passed.
    let sources = if upstream.is_some() {
        upstream_objects
    } else {
        &[]
    };
    for source in sources {
        pairs.entry(identity(source)?).or_default().0 = Some(source);
    }
    for live in namespace_objects {
        pairs.entry(identity(live)?).or_default().1 = Some(live);
    }
    pairs
        .into_iter()
        .map(|((group_kind, name), (source, live))| {
            Ok(PlannedCopy {
                namespace: namespace.to_owned(),
                group_kind,
                name,
                action: decide_copy(rules, upstream, namespace, source, live)?,
            })
        })
        .collect()
}

/// Decides, for the object `name` of kind `group_kind` in `source_namespace` (`source`, absent
/// once deleted), what happens in every namespace whose upstream is `source_namespace`;
/// `live_in` looks up the object of that name in such a namespace.
pub fn plan_fan_out<'a>(
    rules: &PropagationRules,
    tree: &NamespaceTree,
    source_namespace: &str,
    group_kind: &GroupKind,
    name: &str,
    source: Option<&Value>,
    live_in: impl Fn(&str) -> Option<&'a Value>,
) -> Result<Vec<PlannedCopy>, PlanError> {
    if !tree.contains(source_namespace) {
        return Err(TreeError::UnknownNamespace(source_namespace.to_owned()).into());
    }
    tree.children(source_namespace)
        .into_iter()
        .map(|child| {
            Ok(PlannedCopy {
                namespace: child.to_owned(),
                group_kind: group_kind.clone(),
                name: name.to_owned(),
                action: decide_copy(rules, Some(source_namespace), child, source, live_in(child))?,
            })
        })
        .collect()
}

fn identity(object: &Value) -> Result<(GroupKind, String), CopyError> {
    ObjectKey::of(object)
        .map(|key| (key.group_kind, key.name.to_string()))
        .map_err(|missing| CopyError {
            object: format!(
                "object in namespace {}",
                object::namespace(object).unwrap_or("(none)")
            ),
            reason: missing.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use crate::propagation::namespace::NamespaceState;
    use serde_json::json;

    #[test]
    fn planning_for_an_unknown_namespace_or_a_nameless_object_fails_with_its_name() {
        let keys = Keys::default();
        let rules = PropagationRules::empty(&keys);
        let tree = NamespaceTree::new(
            &keys,
            [NamespaceState::new("a").with_label(&keys.template_label, "t")],
        );
        assert_eq!(
            plan_namespace_copies(&rules, &tree, "nope", &[], &[]),
            Err(PlanError::Tree(TreeError::UnknownNamespace("nope".into())))
        );
        let nameless =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "t"}});
        let err = plan_namespace_copies(&rules, &tree, "a", &[nameless], &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot copy object in namespace t: object has no metadata.name"
        );
    }

    #[test]
    fn sources_are_ignored_for_a_namespace_without_upstream() {
        let keys = Keys::default();
        let rules = PropagationRules::empty(&keys);
        let tree = NamespaceTree::new(&keys, [NamespaceState::new("a")]);
        let source = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "t", "annotations": {"arbor.dev/propagate": "update"}}});
        assert_eq!(
            plan_namespace_copies(&rules, &tree, "a", &[source], &[]).unwrap(),
            []
        );
    }
}
