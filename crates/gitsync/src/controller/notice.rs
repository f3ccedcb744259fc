//! The one place where gitsync tells people what happened: a log line at info (Normal) or warn
//! (Warning) and an Event on the object concerned, with the same reason and message, so that
//! what `kubectl get events` shows is also in the log and the other way round. Conditions are
//! written with the status ([`super::status`]); callers that change a condition announce the
//! change here.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use super::Context;

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
