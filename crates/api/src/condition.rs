//! Status conditions, kstatus style.
//!
//! Every Arbor resource reports `Ready`, and while work is under way `Reconciling`; a resource
//! that cannot make progress without a change from its user reports `Stalled`. Tools that
//! understand kstatus (kubectl wait, Flux, Argo CD health checks) read these without knowing
//! Arbor. Domain conditions (`ObjectInSync`, `Conflict`) add detail beside them.
//!
//! Conditions are stored as the upstream `metav1.Condition`. [`set_condition`] is the only
//! writer the controllers need: it keeps `lastTransitionTime` while the status stays the same
//! and reports whether anything changed, so a controller can skip a status write that would
//! only bump a timestamp (such writes trigger watch events and reconcile loops).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub mod types {
    /// The resource's desired state is in effect.
    pub const READY: &str = "Ready";
    /// The controller is working towards the desired state (kstatus: abnormal-true).
    pub const RECONCILING: &str = "Reconciling";
    /// The controller cannot make progress until the resource or its environment changes
    /// (kstatus: abnormal-true).
    pub const STALLED: &str = "Stalled";
    /// GitTrackObject / ClusterGitTrackObject: the cluster object matches the declaration.
    pub const OBJECT_IN_SYNC: &str = "ObjectInSync";
    /// SubNamespace: the namespace to create exists and belongs to someone else.
    pub const CONFLICT: &str = "Conflict";
    /// GitTrack / ClusterGitTrack: the round finished, but some declared objects were refused
    /// (the ownership matrix); the others are applied.
    pub const DEGRADED: &str = "Degraded";
}

/// Reasons: CamelCase, stable, for machines; the message carries the detail for people.
pub mod reasons {
    /// Ready: everything declared is applied.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Reconciling: a new generation or a new commit is being processed.
    pub const PROGRESSING: &str = "Progressing";
    /// The source is suspended (`spec.suspend`).
    pub const SUSPENDED: &str = "Suspended";
    /// Fetching the repository failed (network, authentication, unknown reference).
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// The tree could not be parsed; the last good state is kept and nothing is deleted.
    pub const PARSE_FAILED: &str = "ParseFailed";
    /// The spec is invalid (see the message for the field).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The referenced authentication secret is missing or lacks a key.
    pub const SECRET_INVALID: &str = "SecretInvalid";
    /// Some objects could not be applied; the others were.
    pub const APPLY_FAILED: &str = "ApplyFailed";
    /// A round would prune more than the allowed fraction; it waits for the allow annotation.
    pub const MASS_PRUNE_BLOCKED: &str = "MassPruneBlocked";
    /// The cluster does not serve a declared kind.
    pub const KIND_NOT_SERVED: &str = "KindNotServed";
    /// ObjectInSync true: the cluster object matches the declaration.
    pub const IN_SYNC: &str = "InSync";
    /// ObjectInSync false: the cluster object differs from the declaration.
    pub const DRIFTED: &str = "Drifted";
    /// ObjectInSync false: the cluster object lacks the management label, so Arbor leaves it.
    pub const UNMANAGED: &str = "Unmanaged";
    /// ObjectInSync false: the object is declared and not on the cluster (creating it failed).
    pub const NOT_ON_CLUSTER: &str = "NotOnCluster";
    /// ObjectInSync false: the source declares no Sync for the object's kind, so Arbor leaves it.
    pub const SYNC_NOT_DECLARED: &str = "SyncNotDeclared";
    /// The ownership matrix forbids this owner for this object.
    pub const OWNERSHIP_FORBIDDEN: &str = "OwnershipForbidden";
    /// Conflict: a namespace of that name exists with another parent or none.
    pub const NAMESPACE_CONFLICT: &str = "NamespaceConflict";
    /// Stalled: the namespace tree contains a cycle through this namespace.
    pub const CYCLE_DETECTED: &str = "CycleDetected";
    /// Application: the observer saw the cluster differ from the last applied manifest.
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    /// Application, Stalled: the observer schema is refused (the message names each path).
    pub const INVALID_OBSERVER_SCHEMA: &str = "InvalidObserverSchema";
    /// Ready false: the resource is being deleted and its objects with it.
    pub const DELETING: &str = "Deleting";
    /// Source being deleted with `deletionPolicy: Delete`, Stalled: deleting everything it
    /// applied is more than the mass-prune guard allows; it waits for the allow annotation.
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
    /// Source, Ready false: another source manages an object it declares, so it does not apply
    /// it (the message names both).
    pub const MANAGEMENT_CONFLICT: &str = "ManagementConflict";
    /// SubNamespace, Ready: its namespace exists as a child of the SubNamespace's namespace.
    pub const NAMESPACE_IN_PLACE: &str = "NamespaceInPlace";
}

/// The three values of a condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Reads a stored status; anything but `True` / `False` counts as `Unknown`.
    pub fn parse(status: &str) -> Self {
        match status {
            "True" => Self::True,
            "False" => Self::False,
            _ => Self::Unknown,
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// A condition as a controller wants it to be; [`set_condition`] supplies the transition time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub type_: String,
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
    pub observed_generation: Option<i64>,
}

impl ConditionUpdate {
    pub fn new(
        type_: &str,
        status: impl Into<ConditionStatus>,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.to_owned(),
            status: status.into(),
            reason: reason.to_owned(),
            message: message.into(),
            observed_generation: None,
        }
    }

    /// Records the `metadata.generation` this condition was computed from.
    pub fn observed(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }

    fn into_condition(self, last_transition_time: Time) -> Condition {
        Condition {
            type_: self.type_,
            status: self.status.as_str().to_owned(),
            reason: self.reason,
            message: self.message,
            observed_generation: self.observed_generation,
            last_transition_time,
        }
    }
}

/// A stored condition as an update: its own `lastTransitionTime` is then ignored.
impl From<Condition> for ConditionUpdate {
    fn from(condition: Condition) -> Self {
        Self {
            status: ConditionStatus::parse(&condition.status),
            type_: condition.type_,
            reason: condition.reason,
            message: condition.message,
            observed_generation: condition.observed_generation,
        }
    }
}

/// Sets the condition of `new`'s type and returns whether `conditions` changed.
///
/// A new type is appended with `now` as its transition time. An existing one keeps its
/// `lastTransitionTime` while the status is unchanged (only reason, message or generation are
/// updated), and gets `now` when the status flips. When nothing differs, nothing is written.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    new: impl Into<ConditionUpdate>,
    now: Time,
) -> bool {
    let new = new.into();
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new.into_condition(now));
        return true;
    };
    let transition_time = if existing.status != new.status.as_str() {
        now
    } else {
        existing.last_transition_time.clone()
    };
    let updated = new.into_condition(transition_time);
    if *existing == updated {
        return false;
    }
    *existing = updated;
    true
}

/// Removes the condition of `type_`; returns whether one was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The status of the condition of `type_`; `Unknown` when absent.
pub fn condition_status(conditions: &[Condition], type_: &str) -> ConditionStatus {
    find_condition(conditions, type_).map_or(ConditionStatus::Unknown, |c| {
        ConditionStatus::parse(&c.status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn ready(status: bool, reason: &str, message: &str) -> ConditionUpdate {
        ConditionUpdate::new(types::READY, status, reason, message)
    }

    #[test]
    fn new_condition_is_appended_with_now() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            ready(true, reasons::SUCCEEDED, "ok"),
            at(10)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn identical_condition_changes_nothing() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            ready(true, reasons::SUCCEEDED, "ok"),
            at(10),
        );
        let before = conditions.clone();
        assert!(!set_condition(
            &mut conditions,
            ready(true, reasons::SUCCEEDED, "ok"),
            at(20)
        ));
        assert_eq!(conditions, before);
    }

    #[test]
    fn same_status_new_message_keeps_transition_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            ready(false, reasons::FETCH_FAILED, "a"),
            at(10),
        );
        assert!(set_condition(
            &mut conditions,
            ready(false, reasons::PARSE_FAILED, "b"),
            at(20)
        ));
        assert_eq!(conditions[0].reason, reasons::PARSE_FAILED);
        assert_eq!(conditions[0].message, "b");
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn status_flip_sets_transition_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            ready(false, reasons::PROGRESSING, ""),
            at(10),
        );
        assert!(set_condition(
            &mut conditions,
            ready(true, reasons::SUCCEEDED, ""),
            at(20)
        ));
        assert_eq!(conditions[0].last_transition_time, at(20));
        assert_eq!(
            condition_status(&conditions, types::READY),
            ConditionStatus::True
        );
    }

    #[test]
    fn new_generation_alone_is_a_change() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            ready(true, reasons::SUCCEEDED, "").observed(Some(1)),
            at(10),
        );
        assert!(set_condition(
            &mut conditions,
            ready(true, reasons::SUCCEEDED, "").observed(Some(2)),
            at(20)
        ));
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn other_types_are_left_alone() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, ready(true, reasons::SUCCEEDED, ""), at(10));
        let stalled = ConditionUpdate::new(types::STALLED, true, reasons::INVALID_SPEC, "x");
        set_condition(&mut conditions, stalled, at(20));
        assert_eq!(conditions.len(), 2);
        assert_eq!(
            find_condition(&conditions, types::READY)
                .unwrap()
                .last_transition_time,
            at(10)
        );
        assert!(remove_condition(&mut conditions, types::STALLED));
        assert!(!remove_condition(&mut conditions, types::STALLED));
        assert_eq!(
            condition_status(&conditions, types::STALLED),
            ConditionStatus::Unknown
        );
    }

    #[test]
    fn stored_condition_can_be_set_again_keeping_its_time() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, ready(true, reasons::SUCCEEDED, ""), at(10));
        let copy = conditions[0].clone();
        assert!(!set_condition(&mut conditions, copy, at(30)));
    }
}
