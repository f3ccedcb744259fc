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

/// Reviews a source about to be stored. An UPDATE that leaves the spec as it was is allowed
/// whatever today's rules say of it (as kube-apiserver ratchets validation of unchanged
/// fields): a source stored under older, looser rules can still take metadata changes, above
/// all gitsync's removal of its finalizer when it is deleted.
pub fn review(kind: SourceKind, input: &ReviewInput, object: &Value) -> Check {
    let what = format!("{} {}", kind.name(), input.object_name());
    let old_spec = input.old_object.as_ref().map(|old| &old["spec"]);
    if old_spec.is_some_and(|old| *old == object["spec"]) {
        return Check::allow(kind.rule(), format!("{what}: the spec is unchanged"));
    }
    let errors = match kind {
        SourceKind::GitTrack => validate::<GitTrack>(object),
        SourceKind::ClusterGitTrack => validate::<ClusterGitTrack>(object),
    };
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
