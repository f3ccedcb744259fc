//! The Resource Ownership Matrix of seeds/002: which GitTrack or ClusterGitTrack may own which
//! GitTrackObject or ClusterGitTrackObject, for the instance's `--clustergittrack-mode`.
//!
//! | owner | ClusterGitTrack mode | GitTrackObject in the owner's namespace | GitTrackObject in another namespace | ClusterGitTrackObject |
//! |---|---|---|---|---|
//! | GitTrack | N/A | Y | N (Cross namespace never allowed) | N (GitTrack can never own cluster-scoped resource) |
//! | ClusterGitTrack | ExcludeNamespaced | N | N | Y (ClusterGitTracks can always own CGTO) |
//! | ClusterGitTrack | IncludeNamespaced | Y | Y | Y (ClusterGitTracks can always own CGTO) |
//! | ClusterGitTrack | Disabled (not in the seed) | N | N | Y (ClusterGitTracks can always own CGTO) |
//!
//! The seed has no row for a ClusterGitTrack under `--clustergittrack-mode=Disabled`. Arbor keeps
//! "always" for ClusterGitTrackObjects and refuses namespaced objects, because only
//! IncludeNamespaced allows ClusterGitTracks to manage namespaced resources.

use std::fmt;

use super::modes::ClusterGitTrackMode;

/// The owner of a (Cluster)GitTrackObject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    GitTrack { namespace: String },
    ClusterGitTrack,
}

impl Owner {
    pub fn gittrack(namespace: impl Into<String>) -> Self {
        Self::GitTrack {
            namespace: namespace.into(),
        }
    }
}

/// The tracking object a declared object becomes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TrackingObject {
    /// For a namespaced object, in the object's namespace.
    GitTrackObject {
        namespace: crate::interned::Interned,
    },
    /// For a cluster-scoped object.
    ClusterGitTrackObject,
}

impl TrackingObject {
    pub fn gittrack_object(namespace: impl Into<crate::interned::Interned>) -> Self {
        Self::GitTrackObject {
            namespace: namespace.into(),
        }
    }
}

/// A row of the matrix: the owner, and for a ClusterGitTrack the instance's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixRow {
    GitTrack,
    ClusterGitTrackExcludeNamespaced,
    ClusterGitTrackIncludeNamespaced,
    /// Not in the seed's matrix; see the module docs.
    ClusterGitTrackDisabled,
}

/// The cell of the matrix that answered, with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnershipRule {
    /// A GitTrack owns GitTrackObjects in its own namespace.
    SameNamespace,
    CrossNamespaceNeverAllowed,
    GitTrackCanNeverOwnClusterScoped,
    ClusterGitTracksCanAlwaysOwnClusterGitTrackObjects,
    IncludeNamespacedAllowsNamespaced,
    ExcludeNamespacedDisallowsNamespaced,
    DisabledDisallowsNamespaced,
}

/// The matrix's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnershipVerdict {
    pub row: MatrixRow,
    pub rule: OwnershipRule,
}

impl OwnershipRule {
    pub fn allowed(self) -> bool {
        matches!(
            self,
            Self::SameNamespace
                | Self::ClusterGitTracksCanAlwaysOwnClusterGitTrackObjects
                | Self::IncludeNamespacedAllowsNamespaced
        )
    }

    /// The reason, in the seed's words where the seed gives them.
    pub fn reason(self) -> &'static str {
        match self {
            Self::SameNamespace => "a GitTrack owns GitTrackObjects in its own namespace",
            Self::CrossNamespaceNeverAllowed => "Cross namespace never allowed",
            Self::GitTrackCanNeverOwnClusterScoped => {
                "GitTrack can never own cluster-scoped resource"
            }
            Self::ClusterGitTracksCanAlwaysOwnClusterGitTrackObjects => {
                "ClusterGitTracks can always own CGTO"
            }
            Self::IncludeNamespacedAllowsNamespaced => {
                "IncludeNamespaced: ClusterGitTracks are allowed to manage namespaced resources"
            }
            Self::ExcludeNamespacedDisallowsNamespaced => {
                "ExcludeNamespaced: ClusterGitTracks are disallowed from managing namespaced \
                 resources"
            }
            Self::DisabledDisallowsNamespaced => {
                "Disabled: ClusterGitTracks are not managed, so they manage no namespaced \
                 resources"
            }
        }
    }
}

impl OwnershipVerdict {
    pub fn allowed(self) -> bool {
        self.rule.allowed()
    }

    pub fn reason(self) -> &'static str {
        self.rule.reason()
    }
}

impl fmt::Display for MatrixRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::GitTrack => "GitTrack",
            Self::ClusterGitTrackExcludeNamespaced => "ClusterGitTrack, ExcludeNamespaced",
            Self::ClusterGitTrackIncludeNamespaced => "ClusterGitTrack, IncludeNamespaced",
            Self::ClusterGitTrackDisabled => "ClusterGitTrack, Disabled",
        })
    }
}

impl fmt::Display for OwnershipVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let answer = if self.allowed() { "Y" } else { "N" };
        write!(f, "{answer} ({}) [{}]", self.reason(), self.row)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GitTrack { namespace } => write!(f, "GitTrack in namespace {namespace}"),
            Self::ClusterGitTrack => f.write_str("ClusterGitTrack"),
        }
    }
}

impl fmt::Display for TrackingObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GitTrackObject { namespace } => {
                write!(f, "GitTrackObject in namespace {namespace}")
            }
            Self::ClusterGitTrackObject => f.write_str("ClusterGitTrackObject"),
        }
    }
}

/// May `owner` own `owned`, on an instance whose ClusterGitTrack mode is `mode`?
pub fn may_own(
    owner: &Owner,
    owned: &TrackingObject,
    mode: ClusterGitTrackMode,
) -> OwnershipVerdict {
    use OwnershipRule as Rule;
    let row = match (owner, mode) {
        (Owner::GitTrack { .. }, _) => MatrixRow::GitTrack,
        (Owner::ClusterGitTrack, ClusterGitTrackMode::ExcludeNamespaced) => {
            MatrixRow::ClusterGitTrackExcludeNamespaced
        }
        (Owner::ClusterGitTrack, ClusterGitTrackMode::IncludeNamespaced) => {
            MatrixRow::ClusterGitTrackIncludeNamespaced
        }
        (Owner::ClusterGitTrack, ClusterGitTrackMode::Disabled) => {
            MatrixRow::ClusterGitTrackDisabled
        }
    };
    let rule = match (owner, owned) {
        (Owner::GitTrack { namespace: owner }, TrackingObject::GitTrackObject { namespace }) => {
            if owner == namespace {
                Rule::SameNamespace
            } else {
                Rule::CrossNamespaceNeverAllowed
            }
        }
        (Owner::GitTrack { .. }, TrackingObject::ClusterGitTrackObject) => {
            Rule::GitTrackCanNeverOwnClusterScoped
        }
        (Owner::ClusterGitTrack, TrackingObject::ClusterGitTrackObject) => {
            Rule::ClusterGitTracksCanAlwaysOwnClusterGitTrackObjects
        }
        (Owner::ClusterGitTrack, TrackingObject::GitTrackObject { .. }) => match mode {
            ClusterGitTrackMode::IncludeNamespaced => Rule::IncludeNamespacedAllowsNamespaced,
            ClusterGitTrackMode::ExcludeNamespaced => Rule::ExcludeNamespacedDisallowsNamespaced,
            ClusterGitTrackMode::Disabled => Rule::DisabledDisallowsNamespaced,
        },
    };
    OwnershipVerdict { row, rule }
}
