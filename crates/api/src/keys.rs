//! Well-known names: finalizers, field managers and Arbor's own annotations.
//!
//! The hierarchy keys and the management label are configurable and come from
//! [`arbor_policy::keys`], re-exported here. Arbor's own annotations live under the same
//! configurable domain (use [`ArborKeys`] on a [`Keys`]); the `*_ANNOTATION` constants are their
//! values under the default domain. Finalizers and field managers are not configurable: they
//! name Arbor's controllers, not keys a user or another system writes.

pub use arbor_policy::keys::{
    ACCURATE_DOMAIN, DEFAULT_DOMAIN, INNU_DOMAIN, InvalidDomain, Keys, ManagementLabel,
};

use std::fmt;
use std::str::FromStr;

/// Finalizer gitsync puts on (Cluster)GitTrackObjects, so deletion goes through the action
/// table instead of garbage collection.
pub const GITSYNC_FINALIZER: &str = "arbor.dev/gitsync";
/// Finalizer the hierarchy controller puts on SubNamespaces, to delete the sub-namespace.
pub const HIERARCHY_FINALIZER: &str = "arbor.dev/hierarchy";
/// Finalizer the observer controller puts on Applications, to stop the observer and delete the
/// applied objects.
pub const OBSERVER_FINALIZER: &str = "arbor.dev/observer";

/// Server-side apply field manager of arbor-gitsync.
pub const GITSYNC_FIELD_MANAGER: &str = "arbor-gitsync";
/// Server-side apply field manager of arbor-hierarchy.
pub const HIERARCHY_FIELD_MANAGER: &str = "arbor-hierarchy";
/// Server-side apply field manager of arbor-observer.
pub const OBSERVER_FIELD_MANAGER: &str = "arbor-observer";

/// Name (under the key domain) of the annotation on a source that allows one round to prune
/// more than `--max-prune-fraction` of its objects, or every namespace.
pub const ALLOW_MASS_PRUNE: &str = "allow-mass-prune";
/// Name of the annotation on an applied object naming its source (see [`SourceRef`]).
pub const SOURCE: &str = "source";
/// Name of the annotation on an applied object naming the repository file that declares it.
pub const DECLARED_IN: &str = "declared-in";

/// [`ALLOW_MASS_PRUNE`] under the default domain.
pub const ALLOW_MASS_PRUNE_ANNOTATION: &str = "arbor.dev/allow-mass-prune";
/// [`SOURCE`] under the default domain.
pub const SOURCE_ANNOTATION: &str = "arbor.dev/source";
/// [`DECLARED_IN`] under the default domain.
pub const DECLARED_IN_ANNOTATION: &str = "arbor.dev/declared-in";

/// Arbor's own annotation keys under a configured domain.
pub trait ArborKeys {
    fn allow_mass_prune_annotation(&self) -> String;
    fn source_annotation(&self) -> String;
    fn declared_in_annotation(&self) -> String;
}

impl ArborKeys for Keys {
    fn allow_mass_prune_annotation(&self) -> String {
        self.custom(ALLOW_MASS_PRUNE)
    }

    fn source_annotation(&self) -> String {
        self.custom(SOURCE)
    }

    fn declared_in_annotation(&self) -> String {
        self.custom(DECLARED_IN)
    }
}

/// The source that declares an object: the value of the source annotation.
///
/// Written `GitTrack/<namespace>/<name>` or `ClusterGitTrack/<name>`, so one string names the
/// source unambiguously across both kinds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceRef {
    GitTrack { namespace: String, name: String },
    ClusterGitTrack { name: String },
}

/// Why a source annotation value cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid source reference {value:?}: expected GitTrack/<namespace>/<name> or ClusterGitTrack/<name>"
)]
pub struct InvalidSourceRef {
    pub value: String,
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GitTrack { namespace, name } => write!(f, "GitTrack/{namespace}/{name}"),
            Self::ClusterGitTrack { name } => write!(f, "ClusterGitTrack/{name}"),
        }
    }
}

impl FromStr for SourceRef {
    type Err = InvalidSourceRef;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidSourceRef {
            value: value.to_owned(),
        };
        let parts: Vec<&str> = value.split('/').collect();
        if parts.iter().any(|part| part.is_empty()) {
            return Err(invalid());
        }
        match parts.as_slice() {
            ["GitTrack", namespace, name] => Ok(Self::GitTrack {
                namespace: (*namespace).to_owned(),
                name: (*name).to_owned(),
            }),
            ["ClusterGitTrack", name] => Ok(Self::ClusterGitTrack {
                name: (*name).to_owned(),
            }),
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_domain_annotations_match_the_constants() {
        let keys = Keys::default();
        assert_eq!(
            keys.allow_mass_prune_annotation(),
            ALLOW_MASS_PRUNE_ANNOTATION
        );
        assert_eq!(keys.source_annotation(), SOURCE_ANNOTATION);
        assert_eq!(keys.declared_in_annotation(), DECLARED_IN_ANNOTATION);
    }

    #[test]
    fn own_annotations_follow_the_configured_domain() {
        let keys = Keys::for_domain(ACCURATE_DOMAIN).unwrap();
        assert_eq!(keys.source_annotation(), "accurate.cybozu.com/source");
    }

    #[test]
    fn source_refs_round_trip() {
        for source in [
            SourceRef::GitTrack {
                namespace: "team-a".into(),
                name: "apps".into(),
            },
            SourceRef::ClusterGitTrack {
                name: "platform".into(),
            },
        ] {
            assert_eq!(source.to_string().parse::<SourceRef>().unwrap(), source);
        }
    }

    #[test]
    fn malformed_source_refs_are_refused() {
        for bad in [
            "",
            "GitTrack/apps",
            "ClusterGitTrack/a/b",
            "GitTrack//x",
            "Other/x",
        ] {
            assert!(bad.parse::<SourceRef>().is_err(), "{bad:?} accepted");
        }
    }
}
