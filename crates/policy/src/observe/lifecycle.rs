//! When the controller stops and starts an application's observer.
//!
//! An observer must never watch resources while the controller changes them, or it would
//! report the controller's own writes as drift. So it is stopped before resources are
//! updated or deleted, and started only once they exist in their new form.

use super::compare::ResourceDelta;

/// What the controller does to an application's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApplicationAction {
    /// The resources are created for the first time.
    Create,
    /// The resources are brought back to the desired state (a user update or a
    /// reconciliation after drift).
    Update,
    /// The resources are deleted.
    Delete,
}

/// Whether the observer is stopped before an action and started after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverLifecycle {
    pub stopped_before: bool,
    pub started_after: bool,
}

/// The observer lifecycle around `action`.
pub fn observer_lifecycle(action: ApplicationAction) -> ObserverLifecycle {
    let (stopped_before, started_after) = match action {
        // There is no observer yet: nothing was created before.
        ApplicationAction::Create => (false, true),
        ApplicationAction::Update => (true, true),
        // Nothing is left to observe.
        ApplicationAction::Delete => (true, false),
    };
    ObserverLifecycle {
        stopped_before,
        started_after,
    }
}

/// What the controller knows about an application when it handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApplicationState {
    /// The application is being deleted.
    pub deleting: bool,
    /// Its resources were created before (it has a last applied manifest).
    pub created: bool,
    /// The user changed the spec since the last apply.
    pub spec_changed: bool,
}

impl ApplicationState {
    /// The action the controller takes, given what the observer reported (`delta`, the
    /// comparison of last applied and last observed); `None` when all is in order. A drift
    /// is reconciled with an update, so it stops and restarts the observer like one.
    pub fn next_action(&self, delta: &ResourceDelta) -> Option<ApplicationAction> {
        if self.deleting {
            return self.created.then_some(ApplicationAction::Delete);
        }
        if !self.created {
            return Some(ApplicationAction::Create);
        }
        (self.spec_changed || !delta.is_empty()).then_some(ApplicationAction::Update)
    }
}
