//! GitTrack and ClusterGitTrack specs: repository URL, reference, subPath, poll interval and
//! the secret reference, validated by `arbor-api` (the same checks the controller reports in
//! its `Stalled` condition).
//!
//! The secret of a GitTrack is in the GitTrack's own namespace, and a ClusterGitTrack's
//! `secretRef` must name its namespace; both rules are arbor-api's, so a GitTrack whose
//! `secretRef` names a namespace is refused by the same validation the controller runs.

use arbor_api::validation::{DisplayErrors, FieldError};
use arbor_api::{ClusterGitTrack, GitTrack, gittrack::GitSource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::review::ReviewInput;
use crate::review_outcome::Check;

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
        SourceKind::GitTrack => validate::<GitTrack>(object),
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
