//! GitTrack and ClusterGitTrack specs: repository URL, reference, subPath, poll interval and
//! the secret reference, validated by `arbor-api` (the same checks the controller reports in
//! its `Stalled` condition).
//!
//! The secret of a GitTrack is in the GitTrack's own namespace: its `secretRef` has only a
//! name. A `secretRef.namespace` naming another namespace would be dropped silently when the
//! object is read, and the user would believe the GitTrack reads a secret it never reads, so
//! it is refused here. A ClusterGitTrack's `secretRef` must name its namespace (arbor-api
//! requires the field).

use arbor_api::validation::{DisplayErrors, FieldError};
use arbor_api::{ClusterGitTrack, GitTrack, gittrack::GitSource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::shape::string_at;
use crate::review::ReviewInput;
use crate::verdict::Check;

/// Which source kind is under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    GitTrack,
    ClusterGitTrack,
}

impl SourceKind {
    fn name(self) -> &'static str {
        match self {
            Self::GitTrack => "GitTrack",
            Self::ClusterGitTrack => "ClusterGitTrack",
        }
    }

    fn rule(self) -> String {
        format!("arbor-api spec {}", self.name())
    }
}

/// Reviews a source about to be stored.
pub fn review(kind: SourceKind, input: &ReviewInput, object: &Value) -> Check {
    let errors = match kind {
        SourceKind::GitTrack => {
            let mut errors = validate::<GitTrack>(object);
            errors.extend(secret_outside_own_namespace(input, object));
            errors
        }
        SourceKind::ClusterGitTrack => validate::<ClusterGitTrack>(object),
    };
    let what = format!("{} {}", kind.name(), input.object_name());
    if errors.is_empty() {
        Check::allow(kind.rule(), format!("{what}: the spec is valid"))
    } else {
        Check::deny(kind.rule(), format!("{what}: {}", DisplayErrors(&errors)))
    }
}

fn validate<S: GitSource + DeserializeOwned>(object: &Value) -> Vec<FieldError> {
    match S::deserialize(object) {
        Ok(source) => source.validate().err().unwrap_or_default(),
        Err(error) => vec![FieldError::invalid("spec", error.to_string())],
    }
}

fn secret_outside_own_namespace(input: &ReviewInput, object: &Value) -> Option<FieldError> {
    const FIELD: &str = "spec.auth.secretRef.namespace";
    let own = string_at(object, &["metadata", "namespace"])
        .ok()
        .flatten()
        .or(input.namespace.as_deref())
        .unwrap_or_default();
    match string_at(object, &["spec", "auth", "secretRef", "namespace"]) {
        Ok(None) => None,
        Ok(Some(namespace)) if namespace == own => None,
        Ok(Some(namespace)) => Some(FieldError::forbidden(
            FIELD,
            format!(
                "a GitTrack reads its secret from its own namespace {own:?}, not {namespace:?}; \
                 use a ClusterGitTrack to read a secret from another namespace"
            ),
        )),
        Err(error) => Some(FieldError::invalid(FIELD, error.detail)),
    }
}
