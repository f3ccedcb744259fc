//! Which Arbor source an ownerReference names.
//!
//! An ownerReference names its owner by `apiVersion` and `kind`. A `GitTrack` of another API
//! group is another project's object, so a reference is Arbor's only when both the group and
//! the kind are Arbor's. The webhook (which owners an object names) and gitsync (which source
//! holds a tracking object) both ask here, so they never disagree on whose object it is.

/// The two kinds of Arbor source that own tracking objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwningSourceKind {
    GitTrack,
    ClusterGitTrack,
}

impl OwningSourceKind {
    /// The source kind an ownerReference with `api_version` and `kind` names, when it is in
    /// `arbor_group` (any version); `None` for every other owner, core objects included
    /// (their `apiVersion` has no group part).
    pub fn named_by(arbor_group: &str, api_version: &str, kind: &str) -> Option<Self> {
        let (group, _version) = api_version.split_once('/')?;
        if group != arbor_group {
            return None;
        }
        match kind {
            "GitTrack" => Some(Self::GitTrack),
            "ClusterGitTrack" => Some(Self::ClusterGitTrack),
            _ => None,
        }
    }
}
