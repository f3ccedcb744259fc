//! Writing an Application's status by server-side apply on the status subresource.
//!
//! Two field managers write it. The controller (`arbor-observer`) owns the state, the
//! conditions, the observed generation and the last applied manifest, and sets the last
//! observed manifest after each apply from the API's answer. The observers
//! (`arbor-observer-watch`) own only the last observed manifest between applies. Each applies
//! exactly the fields it owns, with force, so neither removes the other's fields.

use arbor_api::condition::{ConditionUpdate, reasons, remove_condition, set_condition, types};
use arbor_api::{Application, ApplicationState, ApplicationStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::Resource;
use serde_json::{Value, json};

use crate::error::Error;

/// Field manager of the observers' status writes.
pub const OBSERVER_WATCH_FIELD_MANAGER: &str = "arbor-observer-watch";

/// Applies `status` (a JSON object of status fields) to Application `name` as `manager`, and
/// returns the Application as stored afterwards.
pub async fn apply_status(
    api: &Api<Application>,
    name: &str,
    manager: &str,
    status: Value,
) -> Result<Application, Error> {
    let body = json!({
        "apiVersion": Application::api_version(&()),
        "kind": Application::kind(&()),
        "metadata": {"name": name},
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|source| Error::Status {
        application: name.to_owned(),
        source: Box::new(source),
    })
}

/// How the controller sees an Application after handling it; turned into state and kstatus
/// conditions by [`ApplicationOutcome::apply_to`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplicationOutcome {
    /// Applied and observed as declared.
    Running,
    /// The objects are being created (first apply) or brought back to the declared state.
    Progressing { first_apply: bool },
    /// Objects could not be written; retried.
    Degraded { reason: String, message: String },
    /// The spec or schema must change first.
    Failed { reason: String, message: String },
    /// Deletion under way.
    Deleting,
}

impl ApplicationOutcome {
    pub fn state(&self) -> ApplicationState {
        match self {
            Self::Running => ApplicationState::Running,
            Self::Progressing { first_apply: true } => ApplicationState::Creating,
            Self::Progressing { first_apply: false } => ApplicationState::Reconciling,
            Self::Degraded { .. } => ApplicationState::Degraded,
            Self::Failed { .. } => ApplicationState::Failed,
            Self::Deleting => ApplicationState::Deleting,
        }
    }

    /// Sets the state and conditions of `status`; returns whether anything changed.
    pub fn apply_to(&self, status: &mut ApplicationStatus, generation: Option<i64>) -> bool {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let state = self.state();
        let mut changed = status.state != state;
        status.state = state;
        let conditions = &mut status.conditions;
        let mut set = |update: ConditionUpdate| {
            changed |= set_condition(conditions, update.observed(generation), now.clone());
        };
        match self {
            Self::Running => {
                set(ConditionUpdate::new(
                    types::READY,
                    true,
                    reasons::SUCCEEDED,
                    "every object is applied and observed as declared",
                ));
            }
            Self::Progressing { first_apply } => {
                let message = if *first_apply {
                    "creating the manifest's objects"
                } else {
                    "applying the manifest's objects again"
                };
                set(ConditionUpdate::new(
                    types::RECONCILING,
                    true,
                    reasons::PROGRESSING,
                    message,
                ));
            }
            Self::Degraded { reason, message } => {
                set(ConditionUpdate::new(
                    types::READY,
                    false,
                    reason,
                    message.clone(),
                ));
                set(ConditionUpdate::new(
                    types::RECONCILING,
                    true,
                    reason,
                    message.clone(),
                ));
            }
            Self::Failed { reason, message } => {
                set(ConditionUpdate::new(
                    types::READY,
                    false,
                    reason,
                    message.clone(),
                ));
                set(ConditionUpdate::new(
                    types::STALLED,
                    true,
                    reason,
                    message.clone(),
                ));
            }
            Self::Deleting => {
                set(ConditionUpdate::new(
                    types::READY,
                    false,
                    reasons::DELETING,
                    "the Application's objects are being deleted",
                ));
            }
        }
        let stale: &[&str] = match self {
            Self::Running | Self::Deleting => &[types::RECONCILING, types::STALLED],
            Self::Degraded { .. } | Self::Progressing { .. } => &[types::STALLED],
            Self::Failed { .. } => &[types::RECONCILING],
        };
        for type_ in stale {
            changed |= remove_condition(&mut status.conditions, type_);
        }
        changed
    }
}

/// The status as a JSON object for [`apply_status`].
pub fn to_json(application: &str, status: &ApplicationStatus) -> Result<Value, Error> {
    serde_json::to_value(status).map_err(|source| Error::Encode {
        what: format!("the status of Application {application}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_api::condition::{ConditionStatus, condition_status};

    #[test]
    fn failed_schema_is_stalled_and_not_ready() {
        let mut status = ApplicationStatus::default();
        let verdict = ApplicationOutcome::Failed {
            reason: reasons::INVALID_OBSERVER_SCHEMA.into(),
            message: "resource[0] ...".into(),
        };
        assert!(verdict.apply_to(&mut status, Some(2)));
        assert_eq!(status.state, ApplicationState::Failed);
        assert_eq!(
            condition_status(&status.conditions, types::STALLED),
            ConditionStatus::True
        );
        assert_eq!(
            condition_status(&status.conditions, types::READY),
            ConditionStatus::False
        );
        // The same verdict again writes nothing.
        assert!(!verdict.apply_to(&mut status, Some(2)));
    }

    #[test]
    fn running_clears_stalled_and_reconciling() {
        let mut status = ApplicationStatus::default();
        ApplicationOutcome::Failed {
            reason: "X".into(),
            message: "m".into(),
        }
        .apply_to(&mut status, Some(1));
        ApplicationOutcome::Degraded {
            reason: "Y".into(),
            message: "m".into(),
        }
        .apply_to(&mut status, Some(1));
        assert!(ApplicationOutcome::Running.apply_to(&mut status, Some(1)));
        assert_eq!(status.state, ApplicationState::Running);
        assert_eq!(
            condition_status(&status.conditions, types::STALLED),
            ConditionStatus::Unknown
        );
        assert_eq!(
            condition_status(&status.conditions, types::RECONCILING),
            ConditionStatus::Unknown
        );
        assert_eq!(
            condition_status(&status.conditions, types::READY),
            ConditionStatus::True
        );
    }
}
