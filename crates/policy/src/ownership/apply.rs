//! May this instance apply a declared object on behalf of its source?
//!
//! gitsync asks this for every object a GitTrack or ClusterGitTrack declares. The object becomes
//! a GitTrackObject in its namespace when its kind is namespaced, or a ClusterGitTrackObject when
//! it is cluster-scoped (the API server's discovery says which; the file cannot). A namespaced
//! object without `metadata.namespace` takes the namespace of its GitTrack, as `kubectl apply -n`
//! would; a ClusterGitTrack has no namespace to give. Then the ownership matrix decides. An
//! object refused here is not applied and is reported in the source's `ignoredFiles` with the
//! [`IgnoreReason`].

use std::fmt;

use serde_json::Value;

use super::matrix::{Owner, OwnershipVerdict, TrackingObject, may_own};
use super::watch::WatchScope;
use crate::object;

/// Whether a declared object's kind is namespaced, and the namespace it declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObjectScope {
    Namespaced { namespace: Option<String> },
    Cluster,
}

impl ObjectScope {
    /// The scope of `declared`, given whether discovery says its kind is namespaced. A namespace
    /// on a cluster-scoped object is ignored, as the API server ignores it.
    pub fn of(declared: &Value, kind_is_namespaced: bool) -> Self {
        Self::declared_in(object::namespace(declared), kind_is_namespaced)
    }

    /// The scope of an object declared with `metadata.namespace` `namespace` (read as
    /// [`object::namespace`] reads it), given whether its kind is namespaced.
    pub fn declared_in(namespace: Option<&str>, kind_is_namespaced: bool) -> Self {
        if kind_is_namespaced {
            Self::Namespaced {
                namespace: namespace.map(str::to_owned),
            }
        } else {
            Self::Cluster
        }
    }
}

/// Why a declared object is not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoreReason {
    /// This instance does not reconcile the object's source.
    OwnerNotWatched { owner: Owner },
    /// A ClusterGitTrack declares a namespaced object without a namespace.
    NamespaceRequired,
    /// The ownership matrix forbids the owner to own the tracking object.
    Forbidden {
        owner: Owner,
        tracking: TrackingObject,
        verdict: OwnershipVerdict,
    },
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OwnerNotWatched { owner } => {
                write!(f, "this instance does not manage the {owner}")
            }
            Self::NamespaceRequired => f.write_str(
                "the object is namespaced but sets no metadata.namespace, and a ClusterGitTrack \
                 has no namespace to default to",
            ),
            Self::Forbidden {
                owner,
                tracking,
                verdict,
            } => write!(
                f,
                "a {owner} may not own a {tracking}: {}",
                verdict.reason()
            ),
        }
    }
}

impl WatchScope {
    /// The tracking object `owner` would create for an object of `scope`, if this instance may
    /// apply it.
    pub fn may_apply(
        &self,
        owner: &Owner,
        scope: &ObjectScope,
    ) -> Result<TrackingObject, IgnoreReason> {
        if !self.watches().watches_owner(owner) {
            return Err(IgnoreReason::OwnerNotWatched {
                owner: owner.clone(),
            });
        }
        let tracking = match (scope, owner) {
            (ObjectScope::Cluster, _) => TrackingObject::ClusterGitTrackObject,
            (
                ObjectScope::Namespaced {
                    namespace: Some(namespace),
                },
                _,
            )
            | (ObjectScope::Namespaced { namespace: None }, Owner::GitTrack { namespace }) => {
                TrackingObject::GitTrackObject {
                    namespace: namespace.as_str().into(),
                }
            }
            (ObjectScope::Namespaced { namespace: None }, Owner::ClusterGitTrack) => {
                return Err(IgnoreReason::NamespaceRequired);
            }
        };
        let verdict = may_own(owner, &tracking, self.cluster_gittrack_mode());
        if verdict.allowed() {
            Ok(tracking)
        } else {
            Err(IgnoreReason::Forbidden {
                owner: owner.clone(),
                tracking,
                verdict,
            })
        }
    }
}
