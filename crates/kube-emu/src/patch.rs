//! Patching and server-side apply, as kube-apiserver does them, on plain JSON objects.
//!
//! The server core hands this module the stored object and the request body; it gets back the
//! new object. Four patch types exist ([`PatchType`]): JSON patch and JSON merge patch are
//! schema-free; strategic merge patch and apply need to know how each list merges, which
//! [`ListSemantics`] describes (a table for built-in kinds, the CRD schema for custom resources).
//!
//! Ownership is recorded in `metadata.managedFields` like kube-apiserver records it: each manager
//! (name, operation, subresource, and for updates the API version) owns a *field set*, encoded as
//! FieldsV1. [`apply`] sets the applier's set to exactly what it applied, refuses to change fields
//! other managers own (a [`PatchError::Conflict`]) unless forced, and removes fields the applier
//! stopped applying when nobody else owns them. [`record_update`] gives the writer of any other
//! write the fields it changed.
//!
//! Everything here is synchronous and pure: no I/O, no clock (the caller passes the time).

mod apply;
mod builtin;
mod conflict;
mod content_type;
mod decode;
mod fieldset;
mod json_patch;
mod managed;
mod merge;
mod merge_patch;
mod openapi;
mod owned;
mod path;
mod schema;
mod strategic;
mod typed;
mod update;

use serde_json::Value;

pub use apply::apply;
pub use content_type::PatchType;
pub use fieldset::FieldSet;
pub use merge_patch::{diff as merge_patch_diff, merge_patch};
pub use path::PathElement;
pub use schema::ListSemantics;
pub use update::record_update;

/// What the request says about who writes and how.
#[derive(Debug, Clone)]
pub struct WriteContext {
    /// `?fieldManager=`, defaulted by the server core from the User-Agent like kube-apiserver.
    pub field_manager: String,
    /// `?force=true` (apply only): take conflicting fields from their managers.
    pub force: bool,
    /// `Some("status")` for writes to `/status`.
    pub subresource: Option<String>,
    /// RFC 3339 timestamp for managedFields entries.
    pub now: String,
    /// group/version of the request, for `managedFields[].apiVersion`.
    pub api_version: String,
}

/// Why a patch or apply was refused; each variant maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// 400 BadRequest: undecodable body.
    #[error("{0}")]
    BadRequest(String),
    /// 422 Invalid: a JSON patch `test` op failed, a path was not found, a list element lacks
    /// its key, etc.
    #[error("{0}")]
    Invalid(String),
    /// 409 Conflict from apply, worded like kube-apiserver's.
    #[error("{message}")]
    Conflict {
        /// The whole message (`Apply failed with 1 conflict: ...`).
        message: String,
        /// One entry per conflicting field.
        conflicts: Vec<FieldConflict>,
    },
    /// 415: patch type not supported for this resource (strategic merge on a custom resource).
    #[error("{0}")]
    UnsupportedMediaType(String),
}

/// One field an apply would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The manager owning the field.
    pub manager: String,
    /// The field, printed like `.spec.replicas` or `.spec.containers[name="app"].image`.
    pub field: String,
}

/// A non-apply patch of `live` (the stored object). Returns the patched object. Does not touch
/// managedFields (call [`record_update`] afterwards). Server-side apply goes through [`apply`].
pub fn patch(
    live: &Value,
    patch_type: PatchType,
    body: &[u8],
    lists: &ListSemantics,
) -> Result<Value, PatchError> {
    let patched = match patch_type {
        PatchType::Json => json_patch::json_patch(live, body)?,
        PatchType::Merge => {
            let patch = decode::json_body(body, "merge patch")?;
            if !patch.is_object() {
                return Err(PatchError::BadRequest(format!(
                    "merge patch must be a JSON object, found {patch}"
                )));
            }
            merge_patch(live, &patch)
        }
        PatchType::StrategicMerge if !lists.strategic_merge => {
            return Err(PatchError::UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml"
                    .to_owned(),
            ));
        }
        PatchType::StrategicMerge => strategic::strategic_merge(
            live,
            &decode::json_body(body, "strategic merge patch")?,
            &lists.root,
        )?,
        PatchType::Apply => {
            return Err(PatchError::BadRequest(
                "an apply patch needs the field manager: use patch::apply".to_owned(),
            ));
        }
    };
    if !patched.is_object() {
        return Err(PatchError::Invalid(format!(
            "the patched object must be a JSON object, found {patched}"
        )));
    }
    Ok(patched)
}
