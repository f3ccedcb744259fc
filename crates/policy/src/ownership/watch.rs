//! The Controller Reconcile Matrices of seeds/002: which GitTracks, GitTrackObjects,
//! ClusterGitTracks and ClusterGitTrackObjects one instance watches.
//!
//! Each flag contributes a [`WatchSet`]: [`ClusterGitTrackMode::watches`] is the seed's rows
//! A/B/C, [`GitTrackMode::watches`] its rows 1/2/3 (and nothing when Disabled). An instance
//! watches the union of both, which [`WatchScope::from_flags`] builds.
//!
//! The two contributions never compete for the same objects, because a GitTrackObject is
//! watched on behalf of its owner: row A's GitTrackObjects are those **owned by
//! ClusterGitTracks** (in every namespace, since a ClusterGitTrack's namespaced objects may be in
//! any namespace), rows 1-3's are those **owned by GitTracks** (in the `--namespace`, if given).
//! So [`WatchSet`] keeps the two owners apart.
//!
//! Combinations the seed rules out are refused with a [`FlagError`]:
//! - `--namespace` with `--gittrack-mode=Disabled`: the seed says `--namespace` is "for use with
//!   --gittrack-mode=enabled";
//! - `--namespace` with any `--clustergittrack-mode` but `Disabled`, as Faros refuses it
//!   (`ValidateFlags`: "Cannot use gittrack-mode enabled with namespace and clustergittrack-mode
//!   enabled"). `--namespace` restricts the instance "to only managing GitTracks and
//!   GitTrackObjects from within the given namespace" (seeds/002, rows 2/3), while row A makes
//!   it manage ClusterGitTracks' GitTrackObjects in every namespace and row B still makes it
//!   manage ClusterGitTracks, which are cluster-wide sources. Neither can be honoured silently.
//!   As in Faros, the default (`IncludeNamespaced`) does not change when `--namespace` is
//!   given: a namespaced instance states `--clustergittrack-mode=Disabled`, so a flag never
//!   means something else because another flag is present, and the refusal says which flag to
//!   set;
//! - both modes Disabled (row C with no GitTrack row): an instance that watches nothing is a
//!   misconfiguration.

use super::matrix::Owner;
use super::modes::{ClusterGitTrackMode, FlagError, GitTrackMode, NamespaceRestriction};

/// The namespaces in which a namespaced kind is watched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NamespaceScope {
    Nowhere,
    AllNamespaces,
    Only(String),
}

impl NamespaceScope {
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::Nowhere => false,
            Self::AllNamespaces => true,
            Self::Only(only) => only == namespace,
        }
    }
}

/// One column of the reconcile matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Watched<'a> {
    GitTrack { namespace: &'a str },
    GitTrackObject { namespace: &'a str },
    ClusterGitTrack,
    ClusterGitTrackObject,
}

/// What an instance (or one flag's contribution to it) watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchSet {
    pub gittracks: NamespaceScope,
    /// GitTrackObjects owned by GitTracks.
    pub gittrack_objects_of_gittracks: NamespaceScope,
    /// GitTrackObjects owned by ClusterGitTracks, in every namespace.
    pub gittrack_objects_of_cluster_gittracks: bool,
    pub cluster_gittracks: bool,
    pub cluster_gittrack_objects: bool,
}

impl WatchSet {
    /// Whether the column `resource` is watched.
    pub fn watches(&self, resource: Watched<'_>) -> bool {
        match resource {
            Watched::GitTrack { namespace } => self.gittracks.contains(namespace),
            Watched::GitTrackObject { namespace } => {
                self.gittrack_objects_of_cluster_gittracks
                    || self.gittrack_objects_of_gittracks.contains(namespace)
            }
            Watched::ClusterGitTrack => self.cluster_gittracks,
            Watched::ClusterGitTrackObject => self.cluster_gittrack_objects,
        }
    }

    /// Where the GitTrackObject watch must look, whoever owns them.
    pub fn gittrack_objects(&self) -> NamespaceScope {
        if self.gittrack_objects_of_cluster_gittracks {
            NamespaceScope::AllNamespaces
        } else {
            self.gittrack_objects_of_gittracks.clone()
        }
    }

    /// Whether the instance reconciles the sources of `owner`.
    pub fn watches_owner(&self, owner: &Owner) -> bool {
        match owner {
            Owner::GitTrack { namespace } => self.gittracks.contains(namespace),
            Owner::ClusterGitTrack => self.cluster_gittracks,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::nothing()
    }

    fn nothing() -> Self {
        Self {
            gittracks: NamespaceScope::Nowhere,
            gittrack_objects_of_gittracks: NamespaceScope::Nowhere,
            gittrack_objects_of_cluster_gittracks: false,
            cluster_gittracks: false,
            cluster_gittrack_objects: false,
        }
    }
}

impl ClusterGitTrackMode {
    /// Rows A (IncludeNamespaced), B (ExcludeNamespaced) and C (Disabled) of the ClusterGitTrack
    /// reconcile matrix.
    pub fn watches(self) -> WatchSet {
        let cluster_scoped = self != Self::Disabled;
        WatchSet {
            gittrack_objects_of_cluster_gittracks: self == Self::IncludeNamespaced,
            cluster_gittracks: cluster_scoped,
            cluster_gittrack_objects: cluster_scoped,
            ..WatchSet::nothing()
        }
    }
}

impl GitTrackMode {
    /// Rows 1 (Enabled, `""`), 2 and 3 (Enabled, one namespace) of the GitTrack reconcile
    /// matrix; Disabled watches nothing.
    pub fn watches(self, namespace: &NamespaceRestriction) -> WatchSet {
        let scope = match (self, namespace) {
            (Self::Disabled, _) => NamespaceScope::Nowhere,
            (Self::Enabled, NamespaceRestriction::AllNamespaces) => NamespaceScope::AllNamespaces,
            (Self::Enabled, NamespaceRestriction::Only(only)) => NamespaceScope::Only(only.clone()),
        };
        WatchSet {
            gittracks: scope.clone(),
            gittrack_objects_of_gittracks: scope,
            ..WatchSet::nothing()
        }
    }
}

/// What this instance watches and the ClusterGitTrack mode it judges ownership by, from a
/// combination of flags that the seed allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchScope {
    gittrack_mode: GitTrackMode,
    cluster_gittrack_mode: ClusterGitTrackMode,
    namespace: NamespaceRestriction,
    watches: WatchSet,
}

impl WatchScope {
    /// Combines the three flags (see the module docs for what is refused and why).
    pub fn from_flags(
        gittrack_mode: GitTrackMode,
        cluster_gittrack_mode: ClusterGitTrackMode,
        namespace: NamespaceRestriction,
    ) -> Result<Self, FlagError> {
        if let NamespaceRestriction::Only(only) = &namespace {
            if gittrack_mode == GitTrackMode::Disabled {
                return Err(FlagError::NamespaceWithoutGitTracks {
                    namespace: only.clone(),
                });
            }
            if cluster_gittrack_mode != ClusterGitTrackMode::Disabled {
                return Err(FlagError::NamespaceWithClusterGitTracks {
                    namespace: only.clone(),
                    mode: cluster_gittrack_mode,
                });
            }
        }
        let from_gittracks = gittrack_mode.watches(&namespace);
        let from_cluster_gittracks = cluster_gittrack_mode.watches();
        let watches = WatchSet {
            gittracks: from_gittracks.gittracks,
            gittrack_objects_of_gittracks: from_gittracks.gittrack_objects_of_gittracks,
            ..from_cluster_gittracks
        };
        if watches.is_empty() {
            return Err(FlagError::NothingWatched);
        }
        Ok(Self {
            gittrack_mode,
            cluster_gittrack_mode,
            namespace,
            watches,
        })
    }

    pub fn watches(&self) -> &WatchSet {
        &self.watches
    }

    pub fn gittrack_mode(&self) -> GitTrackMode {
        self.gittrack_mode
    }

    pub fn cluster_gittrack_mode(&self) -> ClusterGitTrackMode {
        self.cluster_gittrack_mode
    }

    pub fn namespace(&self) -> &NamespaceRestriction {
        &self.namespace
    }
}
