//! A source's status after a round, and writing it.
//!
//! The status is written by server-side apply on the status subresource, and only when it
//! differs from the stored one in anything but `lastSyncTime`: a round that changed nothing
//! makes no write at all, so an idle cluster sees no traffic (and no watch events) from gitsync.
//! `lastSyncTime` is therefore the end of the last round that changed the status.

use std::collections::BTreeMap;

use arbor_api::condition::{find_condition, reasons, remove_condition, types};
use arbor_api::keys::{GITSYNC_FIELD_MANAGER, SourceRef};
use arbor_api::source::{GitSourceStatus, PruneWindowStatus, SourceError};
use arbor_api::{ClusterGitTrack, GitTrack};
use arbor_api::{ConditionUpdate, set_condition};
use arbor_runtime::decode::api_resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::ControllerError;
use super::notice::Notice;

/// How a round ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Everything planned was applied (some objects may have failed: see the errors).
    Synced,
    Suspended,
    /// A condition that needs the user: reason constant and message.
    Stalled {
        reason: &'static str,
        message: String,
    },
    /// A failure that may pass by itself (fetch): reason and message.
    Failed {
        reason: &'static str,
        message: String,
    },
}

/// What a round found, for the status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub discovered: usize,
    pub applied: usize,
    pub ignored: usize,
    pub in_sync: usize,
}

/// A round's contribution to the status.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundReport {
    pub outcome: Outcome,
    pub commit: Option<String>,
    /// `None` keeps the previous counters, ignored files and errors (the round did not get as
    /// far as planning).
    pub counters: Option<Counters>,
    pub ignored_files: BTreeMap<String, String>,
    pub errors: Vec<SourceError>,
    /// The mass-prune window to keep on the status; `None` keeps the stored one.
    pub prune_window: Option<PruneWindowStatus>,
    /// Declared objects the ownership matrix refused, each with the reason.
    pub refused: Vec<String>,
}

impl RoundReport {
    /// A round that stopped before planning.
    pub fn stopped(outcome: Outcome, errors: Vec<SourceError>) -> Self {
        Self {
            outcome,
            commit: None,
            counters: None,
            ignored_files: BTreeMap::new(),
            errors,
            prune_window: None,
            refused: Vec::new(),
        }
    }
}

/// The status after `report`, or `None` when it equals `previous` but for the time.
pub fn next_status(
    previous: &GitSourceStatus,
    report: &RoundReport,
    generation: Option<i64>,
    now: Time,
) -> Option<GitSourceStatus> {
    let mut next = previous.clone();
    next.observed_generation = generation;
    if let Some(commit) = &report.commit {
        next.observed_commit = Some(commit.clone());
    }
    if let Some(counters) = &report.counters {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        next.objects_discovered = count(counters.discovered);
        next.objects_applied = count(counters.applied);
        next.objects_ignored = count(counters.ignored);
        next.objects_in_sync = count(counters.in_sync);
        next.ignored_files = report.ignored_files.clone();
    }
    if let Some(window) = &report.prune_window {
        next.prune_window = Some(window.clone());
    }
    if report.counters.is_some() {
        next.errors = report.errors.clone();
    } else if !report.errors.is_empty() {
        // The management conflicts of the last round that planned stay: other replicas read
        // them to know the source still declares those objects ([`super::source_cache`]).
        let conflicts = previous
            .errors
            .iter()
            .filter(|error| error.code == super::error::MANAGEMENT_CONFLICT);
        next.errors = report.errors.iter().chain(conflicts).cloned().collect();
    }
    let conditions = &mut next.conditions;
    let failing = report
        .errors
        .iter()
        .find(|error| error.code != super::error::UNMANAGED_OBJECT);
    let refused = report.refused.first().map(|first| {
        format!(
            "{} declared object(s) refused by the ownership matrix, first: {first}",
            report.refused.len()
        )
    });
    if report.counters.is_some() {
        match &refused {
            Some(message) => {
                set_condition(
                    conditions,
                    ConditionUpdate::new(
                        types::DEGRADED,
                        true,
                        reasons::OWNERSHIP_FORBIDDEN,
                        message.clone(),
                    )
                    .observed(generation),
                    now.clone(),
                );
            }
            None => {
                remove_condition(conditions, types::DEGRADED);
            }
        }
    }
    let (ready, ready_reason, ready_message) = match &report.outcome {
        Outcome::Synced => match (failing, refused) {
            (None, Some(message)) => (false, reasons::OWNERSHIP_FORBIDDEN, message),
            (None, None) => (
                true,
                reasons::SUCCEEDED,
                format!(
                    "commit {} applied",
                    next.observed_commit.as_deref().unwrap_or("")
                ),
            ),
            (Some(error), _) => (
                false,
                if error.code == crate::apply::error::KIND_NOT_SERVED {
                    reasons::KIND_NOT_SERVED
                } else if error.code == super::error::MANAGEMENT_CONFLICT {
                    reasons::MANAGEMENT_CONFLICT
                } else {
                    reasons::APPLY_FAILED
                },
                format!(
                    "{} error(s), first: {}: {}",
                    report.errors.len(),
                    error.code,
                    error.message
                ),
            ),
        },
        Outcome::Suspended => (false, reasons::SUSPENDED, "spec.suspend is set".to_owned()),
        Outcome::Stalled { reason, message } | Outcome::Failed { reason, message } => {
            (false, *reason, message.clone())
        }
    };
    set_condition(
        conditions,
        ConditionUpdate::new(types::READY, ready, ready_reason, ready_message).observed(generation),
        now.clone(),
    );
    match &report.outcome {
        Outcome::Stalled { reason, message } => {
            set_condition(
                conditions,
                ConditionUpdate::new(types::STALLED, true, reason, message.clone())
                    .observed(generation),
                now.clone(),
            );
        }
        _ => {
            remove_condition(conditions, types::STALLED);
        }
    }
    remove_condition(conditions, types::RECONCILING);
    if next == *previous {
        return None;
    }
    next.last_sync_time = Some(now);
    Some(next)
}

/// The status while a round of `commit` runs: `Reconciling=True` with the progress, and, when
/// the commit or the generation is new, `Ready=False` until the round finishes (kstatus: Ready
/// is only ever the finished round of the current commit). The counters and `observedCommit`
/// stay those of the last finished round.
pub fn in_progress(
    previous: &GitSourceStatus,
    commit: &str,
    (done, total): (usize, usize),
    generation: Option<i64>,
    now: Time,
) -> GitSourceStatus {
    let mut next = previous.clone();
    set_condition(
        &mut next.conditions,
        ConditionUpdate::new(
            types::RECONCILING,
            true,
            reasons::PROGRESSING,
            format!("applying commit {commit}: {done}/{total} objects"),
        )
        .observed(generation),
        now.clone(),
    );
    let new_work = previous.observed_commit.as_deref() != Some(commit)
        || previous.observed_generation != generation;
    if new_work {
        set_condition(
            &mut next.conditions,
            ConditionUpdate::new(
                types::READY,
                false,
                reasons::PROGRESSING,
                format!(
                    "commit {commit} is being applied ({done}/{total} objects); the last \
                     finished round applied {}",
                    previous.observed_commit.as_deref().unwrap_or("nothing yet")
                ),
            )
            .observed(generation),
            now,
        );
    }
    next
}

/// What a round wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
}

/// What to announce (log line and Event) when a round moved the status from `previous` to
/// `next`: every change of the Ready condition (a Warning while not Ready, but for a suspended
/// source), and every round that wrote something.
pub fn notices(
    previous: &GitSourceStatus,
    next: &GitSourceStatus,
    report: &RoundReport,
    changes: Changes,
) -> Vec<Notice> {
    let mut notices = Vec::new();
    let commit = report
        .commit
        .as_deref()
        .or(next.observed_commit.as_deref())
        .unwrap_or("");
    if changes.created + changes.updated + changes.deleted > 0 {
        notices.push(Notice::normal(
            "Synced",
            "Sync",
            format!(
                "commit {commit}: {} created, {} updated, {} pruned",
                changes.created, changes.updated, changes.deleted
            ),
        ));
    }
    let ready = |status: &GitSourceStatus| {
        find_condition(&status.conditions, types::READY)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    if let Some((status, reason, message)) = ready(next)
        && ready(previous).as_ref() != Some(&(status.clone(), reason.clone(), message.clone()))
    {
        let notice = if status == "True" || reason == reasons::SUSPENDED {
            Notice::normal(&reason, "Sync", message)
        } else {
            Notice::warning(&reason, "Sync", message)
        };
        // A successful round that wrote something is already announced by "Synced".
        if notice.warning || notices.is_empty() {
            notices.push(notice);
        }
    }
    notices
}

/// The API of `source`'s kind as dynamic objects (in its namespace for a GitTrack), with the
/// resource to write its status through.
pub fn source_api(client: &kube::Client, source: &SourceRef) -> (Api<DynamicObject>, ApiResource) {
    match source {
        SourceRef::GitTrack { namespace, .. } => {
            let resource = api_resource::<GitTrack>();
            (
                Api::namespaced_with(client.clone(), namespace, &resource),
                resource,
            )
        }
        SourceRef::ClusterGitTrack { .. } => {
            let resource = api_resource::<ClusterGitTrack>();
            (Api::all_with(client.clone(), &resource), resource)
        }
    }
}

/// Writes `status` onto the source `name` by server-side apply. `api` is the source kind's
/// API as dynamic objects, so a source whose spec does not decode still gets its status.
pub async fn write(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
    status: &GitSourceStatus,
) -> Result<(), ControllerError> {
    apply_status_as(
        api,
        (&resource.api_version, &resource.kind),
        name,
        None,
        json!(status),
    )
    .await
    .map(drop)
    .map_err(|source| ControllerError::kube("write status of", name, source))
}

/// Server-side applies `status` on the status subresource of the object `name` (in
/// `namespace` for namespaced kinds), under gitsync's field manager, forced: gitsync is the only
/// writer of these statuses.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    namespace: Option<&str>,
    status: Value,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    apply_status_as(
        api,
        (&K::api_version(&()), &K::kind(&())),
        name,
        namespace,
        status,
    )
    .await
}

async fn apply_status_as<K>(
    api: &Api<K>,
    (api_version, kind): (&str, &str),
    name: &str,
    namespace: Option<&str>,
    status: Value,
) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut metadata = json!({ "name": name });
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    let patch = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(GITSYNC_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn synced(commit: &str) -> RoundReport {
        RoundReport {
            outcome: Outcome::Synced,
            commit: Some(commit.into()),
            counters: Some(Counters {
                discovered: 2,
                applied: 2,
                ignored: 0,
                in_sync: 2,
            }),
            ignored_files: BTreeMap::new(),
            errors: Vec::new(),
            prune_window: None,
            refused: Vec::new(),
        }
    }

    #[test]
    fn an_unchanged_round_writes_no_status() {
        let first =
            next_status(&GitSourceStatus::default(), &synced("abc"), Some(1), at(1)).unwrap();
        assert_eq!(next_status(&first, &synced("abc"), Some(1), at(2)), None);
    }

    #[test]
    fn a_blocked_prune_is_stalled_and_not_ready() {
        let report = RoundReport::stopped(
            Outcome::Stalled {
                reason: reasons::MASS_PRUNE_BLOCKED,
                message: "too much".into(),
            },
            Vec::new(),
        );
        let status = next_status(&GitSourceStatus::default(), &report, None, at(1)).unwrap();
        assert_eq!(
            find_condition(&status.conditions, types::READY)
                .unwrap()
                .status,
            "False"
        );
        assert_eq!(
            find_condition(&status.conditions, types::STALLED)
                .unwrap()
                .reason,
            reasons::MASS_PRUNE_BLOCKED
        );
    }

    #[test]
    fn a_round_stopped_before_planning_keeps_the_management_conflicts_of_the_last_plan() {
        let error = |code: &str, object: Option<&str>| SourceError {
            code: code.into(),
            file: None,
            object: object.map(str::to_owned),
            message: "m".into(),
        };
        let conflict = error(
            crate::controller::error::MANAGEMENT_CONFLICT,
            Some("ConfigMap foo/shared"),
        );
        let planned = RoundReport {
            errors: vec![conflict.clone()],
            ..synced("abc")
        };
        let first = next_status(&GitSourceStatus::default(), &planned, Some(1), at(1)).unwrap();
        let fetch_failed = RoundReport::stopped(
            Outcome::Failed {
                reason: reasons::FETCH_FAILED,
                message: "unreachable".into(),
            },
            vec![error("ARB1001", None)],
        );
        let failed = next_status(&first, &fetch_failed, Some(1), at(2)).unwrap();
        assert_eq!(failed.errors, [error("ARB1001", None), conflict]);
        // The next round that plans says again what it declares.
        let clean = next_status(&failed, &synced("abc"), Some(1), at(3)).unwrap();
        assert!(clean.errors.is_empty());
    }
}
