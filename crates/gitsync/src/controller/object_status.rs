//! The `ObjectInSync` condition of GitTrackObjects and ClusterGitTrackObjects.
//!
//! After a round has acted on an object, its tracking object says whether the live object now
//! matches git: `True` (`InSync`, one message however it came to match) when the action table
//! left it matching (row 1, or a create or update that succeeded), `False` with the row's reason otherwise: `Unmanaged` (exists without
//! the management label, row 3), `Drifted` (the update failed), `NotOnCluster` (the create
//! failed), `SyncNotDeclared` (row 8), or `ApplyFailed` for a failure before the table could
//! decide. The message carries the table's words and the error.
//!
//! The condition is written by server-side apply on the status subresource, and only when it
//! says something the tracking object does not already say. A tracking object exists because a
//! round created it for an object it then applied, so one without the condition reads as in
//! sync: a new object costs two writes (itself and its tracking object, which the API server
//! cannot create with a status), not three. The condition is therefore written when something
//! went wrong (`False`), when it changes from what is stored (back to `True` after a failure,
//! from one failure to another), and never when it would repeat what is stored: a round over
//! an unchanged repository writes nothing.

use arbor_api::condition::{
    ConditionStatus, ConditionUpdate, find_condition, reasons, set_condition, types,
};
use arbor_api::{ClusterGitTrackObject, GitTrackObject};
use arbor_policy::ownership::TrackingObject;
use arbor_policy::sync::{Action, Decision, Row};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use serde_json::json;

use super::Context;
use super::error::ControllerError;
use super::status::apply_status;

const IN_SYNC_MESSAGE: &str = "the object on the cluster matches git";

/// How acting on one object ended, as far as its condition is concerned.
#[derive(Debug, Clone, Copy)]
pub enum Attempt<'a> {
    /// The table decided and its action (if any) succeeded.
    Done(Decision),
    /// The table decided, and carrying out its action failed.
    ActionFailed(Decision, &'a str),
    /// A failure before the table could decide (tracking object, discovery, read).
    Failed(&'a str),
}

/// The `ObjectInSync` condition after `attempt`.
pub fn in_sync_condition(attempt: Attempt<'_>) -> ConditionUpdate {
    let condition = |in_sync: bool, reason: &str, message: String| {
        ConditionUpdate::new(types::OBJECT_IN_SYNC, in_sync, reason, message)
    };
    match attempt {
        Attempt::Done(decision) => match decision.row {
            Row::DeclaredButUnmanaged => {
                condition(false, reasons::UNMANAGED, decision.row.reason().to_owned())
            }
            Row::SyncNotDeclared => condition(
                false,
                reasons::SYNC_NOT_DECLARED,
                decision.row.reason().to_owned(),
            ),
            // One message for every way to match (it matched, or was created or updated to),
            // so that repairing an object does not change its condition.
            _ => condition(true, reasons::IN_SYNC, IN_SYNC_MESSAGE.to_owned()),
        },
        Attempt::ActionFailed(decision, error) => {
            let reason = match decision.action {
                Action::Create => reasons::NOT_ON_CLUSTER,
                Action::Update => reasons::DRIFTED,
                Action::Delete | Action::NoAction => reasons::APPLY_FAILED,
            };
            condition(
                false,
                reason,
                format!(
                    "{}; {} failed: {error}",
                    decision.row.reason(),
                    decision.action
                ),
            )
        }
        Attempt::Failed(error) => condition(false, reasons::APPLY_FAILED, error.to_owned()),
    }
}

/// The conditions to store after `update` on a tracking object whose stored conditions are
/// `stored`, or `None` when `update` says nothing the tracking object does not already say:
/// it is `ObjectInSync=True` and the tracking object has no `ObjectInSync` condition (it reads
/// as in sync), or it repeats the stored condition.
pub fn conditions_to_write(
    stored: &[Condition],
    update: ConditionUpdate,
    now: Time,
) -> Option<Vec<Condition>> {
    if update.status == ConditionStatus::True
        && find_condition(stored, types::OBJECT_IN_SYNC).is_none()
    {
        return None;
    }
    let mut conditions = stored.to_vec();
    set_condition(&mut conditions, update, now).then_some(conditions)
}

/// Sets `update` on the tracking object `name` whose stored conditions are `stored`; writes
/// only when [`conditions_to_write`] says it tells something new. Returns whether it wrote.
pub async fn record(
    ctx: &Context,
    tracking: &TrackingObject,
    name: &str,
    stored: &[Condition],
    update: ConditionUpdate,
) -> Result<bool, ControllerError> {
    let Some(conditions) = conditions_to_write(stored, update, Time(Timestamp::now())) else {
        return Ok(false);
    };
    let status = json!({ "conditions": conditions });
    let (namespace, version) = match tracking {
        TrackingObject::GitTrackObject { namespace } => {
            let api: Api<GitTrackObject> = Api::namespaced(ctx.client.clone(), namespace);
            let written = apply_status(&api, name, Some(namespace), status).await;
            (
                Some(namespace.as_str()),
                written.map(|object| object.metadata.resource_version),
            )
        }
        TrackingObject::ClusterGitTrackObject => {
            let api: Api<ClusterGitTrackObject> = Api::all(ctx.client.clone());
            let written = apply_status(&api, name, None, status).await;
            (None, written.map(|object| object.metadata.resource_version))
        }
    };
    let version =
        version.map_err(|source| ControllerError::kube("write the condition of", name, source))?;
    ctx.tracking.wrote(namespace, name, version.as_deref());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(row: Row) -> Decision {
        Decision::from(row)
    }

    #[test]
    fn a_matching_or_repaired_object_is_in_sync() {
        for row in [
            Row::ManagedAndMatching,
            Row::ManagedAndDrifted,
            Row::DeclaredNotOnCluster,
        ] {
            let condition = in_sync_condition(Attempt::Done(decision(row)));
            assert_eq!(condition.status, ConditionStatus::True, "{row:?}");
            assert_eq!(condition.reason, reasons::IN_SYNC);
            assert_eq!(
                condition.message, IN_SYNC_MESSAGE,
                "a repair changes no condition"
            );
        }
    }

    #[test]
    fn an_object_without_the_management_label_is_unmanaged() {
        let condition = in_sync_condition(Attempt::Done(decision(Row::DeclaredButUnmanaged)));
        assert_eq!(condition.status, ConditionStatus::False);
        assert_eq!(condition.reason, reasons::UNMANAGED);
        assert!(condition.message.contains("without the management label"));
    }

    #[test]
    fn a_failed_update_is_drifted_and_a_failed_create_not_on_the_cluster() {
        let drifted = in_sync_condition(Attempt::ActionFailed(
            decision(Row::ManagedAndDrifted),
            "boom",
        ));
        assert_eq!(
            (drifted.status, drifted.reason.as_str()),
            (ConditionStatus::False, reasons::DRIFTED)
        );
        assert!(drifted.message.ends_with("failed: boom"));
        let missing = in_sync_condition(Attempt::ActionFailed(
            decision(Row::DeclaredNotOnCluster),
            "boom",
        ));
        assert_eq!(missing.reason, reasons::NOT_ON_CLUSTER);
    }

    fn stored(update: ConditionUpdate) -> Vec<Condition> {
        conditions_to_write(&[], update, Time(Timestamp::UNIX_EPOCH)).unwrap_or_default()
    }

    #[test]
    fn in_sync_is_written_only_over_a_condition_that_says_otherwise() {
        let in_sync = || in_sync_condition(Attempt::Done(decision(Row::DeclaredNotOnCluster)));
        let now = Time(Timestamp::UNIX_EPOCH);
        assert_eq!(
            conditions_to_write(&[], in_sync(), now.clone()),
            None,
            "a tracking object without the condition already reads as in sync"
        );
        let drifted = stored(in_sync_condition(Attempt::ActionFailed(
            decision(Row::ManagedAndDrifted),
            "boom",
        )));
        assert_eq!(drifted.len(), 1, "a failure is always written");
        let repaired = conditions_to_write(&drifted, in_sync(), now.clone())
            .expect("the return to in sync is written over the failure");
        assert_eq!(repaired[0].status, "True");
        assert_eq!(
            conditions_to_write(&repaired, in_sync(), now.clone()),
            None,
            "a stored InSync is not written again"
        );
        let failed_again = in_sync_condition(Attempt::ActionFailed(
            decision(Row::ManagedAndDrifted),
            "boom",
        ));
        assert_eq!(conditions_to_write(&drifted, failed_again, now), None);
    }

    #[test]
    fn a_failure_before_the_table_decides_is_apply_failed() {
        let condition = in_sync_condition(Attempt::Failed("kind not served"));
        assert_eq!(
            (condition.status, condition.reason.as_str()),
            (ConditionStatus::False, reasons::APPLY_FAILED)
        );
    }
}
