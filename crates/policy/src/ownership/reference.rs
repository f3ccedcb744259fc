//! Which Arbor source an ownerReference names.
//!
//! An ownerReference names its owner by `apiVersion` and `kind`. A `GitTrack` of another API
//! group is another project's object, so a reference is Arbor's only when both the group and
//! the kind are Arbor's. The webhook (which owners an object names) and gitsync (which source
//! holds a tracking object) both ask here, so they never disagree on whose object it is.
//!
//! [`TrackingHolder::of`] splits a source's view of the tracking objects by their controller
//! reference: its own (its inventory), held by another controller (an object it declares too
//! is a management conflict), or nobody's (left over; a source declaring the object adopts
//! it).

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

/// One ownerReference of a tracking object, as far as who holds it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    pub uid: &'a str,
    /// `controller: true`.
    pub controller: bool,
}

/// Who holds a tracking object, seen from one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackingHolder {
    /// The source is its controller: part of the source's inventory.
    Ours,
    /// Another controller holds it: another source, or another project's controller. The API
    /// server allows one controller per object, so it cannot be adopted, and the object it
    /// tracks is not the source's to write (seeds/000 "one object, one manager").
    Another,
    /// No controller: a left-over the source adopts when it declares the object.
    Unowned,
}

impl TrackingHolder {
    /// From the tracking object's `owner_references`, for the source with uid `source_uid`.
    /// A reference that is not the controller makes no holder, even when it names the source.
    pub fn of<'a>(
        owner_references: impl IntoIterator<Item = OwnerRef<'a>>,
        source_uid: &str,
    ) -> Self {
        let mut holder = Self::Unowned;
        for reference in owner_references {
            if !reference.controller {
                continue;
            }
            if reference.uid == source_uid {
                return Self::Ours;
            }
            holder = Self::Another;
        }
        holder
    }
}
