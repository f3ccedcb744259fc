//! The one place where gitsync tells people what happened: a log line at info (Normal) or warn
//! (Warning) and an Event on the object concerned, with the same reason and message, so that
//! what `kubectl get events` shows is also in the log and the other way round. Conditions are
//! written with the status ([`super::status`]); callers that change a condition announce the
//! change here.

use arbor_api::keys::SourceRef;
use arbor_policy::object::ObjectKey;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use super::Context;

/// The API version of the source kinds.
const API_VERSION: &str = "arbor.dev/v1alpha1";

/// Longest Event note the API server keeps.
const MAX_NOTE: usize = 1000;

/// Something that happened to an object, for the log and an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub warning: bool,
    /// The Event reason (UpperCamelCase).
    pub reason: String,
    /// The Event action (what gitsync was doing).
    pub action: &'static str,
    pub message: String,
}

impl Notice {
    pub fn normal(reason: &str, action: &'static str, message: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            action,
            message: message.into(),
        }
    }

    pub fn warning(reason: &str, action: &'static str, message: impl Into<String>) -> Self {
        Self {
            warning: true,
            ..Self::normal(reason, action, message)
        }
    }
}

/// The source `source` (with its uid), for Events about it.
pub fn regarding_source(source: &SourceRef, uid: &str) -> ObjectReference {
    let (kind, namespace, name) = match source {
        SourceRef::GitTrack { namespace, name } => ("GitTrack", Some(namespace.clone()), name),
        SourceRef::ClusterGitTrack { name } => ("ClusterGitTrack", None, name),
    };
    ObjectReference {
        api_version: Some(API_VERSION.to_owned()),
        kind: Some(kind.to_owned()),
        name: Some(name.clone()),
        namespace,
        uid: Some(uid.to_owned()).filter(|uid| !uid.is_empty()),
        ..ObjectReference::default()
    }
}

/// `Kind namespace/name` or `Kind name`, as people name an object.
pub fn describe(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(namespace) => format!("{} {namespace}/{}", key.group_kind.kind, key.name),
        None => format!("{} {}", key.group_kind.kind, key.name),
    }
}

/// Announces that `object` was deleted on behalf of `source`: `why` is the rule (the action
/// table's row) that allowed it.
pub async fn deleted(ctx: &Context, source: &SourceRef, uid: &str, object: &str, why: &str) {
    let notice = Notice::normal("Deleted", "Prune", format!("deleted {object}: {why}"));
    publish(
        ctx,
        &regarding_source(source, uid),
        &source.to_string(),
        &notice,
    )
    .await;
}

/// Logs `notice` about `subject` (as people name it, `GitTrack foo/apps`) and publishes it as
/// an Event regarding `regarding`. A failed Event is logged and does not stop the caller.
pub async fn publish(ctx: &Context, regarding: &ObjectReference, subject: &str, notice: &Notice) {
    if notice.warning {
        tracing::warn!(object = %subject, reason = %notice.reason, "{}", notice.message);
    } else {
        tracing::info!(object = %subject, reason = %notice.reason, "{}", notice.message);
    }
    let event = Event {
        type_: if notice.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: notice.reason.clone(),
        note: Some(notice.message.chars().take(MAX_NOTE).collect()),
        action: notice.action.into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, regarding).await {
        tracing::warn!(object = %subject, %error, "cannot publish an event");
    }
}
