//! Where drift prevention learns what git declares for an object.
//!
//! In a cluster that is arbor-gitsync's `SyncService.GetDeclared` ([`crate::gitsync_client`]); the
//! trait lets the decision code be exercised without a server.

use arbor_policy::sync::CompareFields;
use futures::future::BoxFuture;
use serde_json::Value;

/// The identity of the object asked about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectIdentity {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

/// What git declares for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Declared {
    /// No source declares the object.
    NotDeclared,
    Object {
        /// The object as gitsync applies it.
        object: Value,
        /// The fields that decide "Resource Matches".
        fields: CompareFields,
        /// The source that declares it, for messages, like `GitTrack/team-a/apps`.
        source: String,
        /// The repository file that declares it.
        file: String,
    },
}

/// The declared state could not be learned.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LookupError {
    #[error("arbor-gitsync did not answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("arbor-gitsync cannot be reached: {0}")]
    Unreachable(String),
    #[error("arbor-gitsync answered with an unreadable declaration: {0}")]
    BadAnswer(String),
}

/// A source of declared state.
pub trait DeclaredState: Send + Sync {
    fn declared<'a>(
        &'a self,
        object: &'a ObjectIdentity,
    ) -> BoxFuture<'a, Result<Declared, LookupError>>;
}
