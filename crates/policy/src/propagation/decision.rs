//! The object-copy decision as a table over facts, with no objects involved.
//!
//! For one object name in one namespace, the facts are: whether the namespace has an upstream
//! (a parent or a template), whether the upstream holds a *source* of that name and with which
//! `<domain>/propagate` mode, and whether the namespace holds a *live* object of that name,
//! with its own mode, where its `<domain>/from` points, and whether it differs from the copy
//! the source would make. Rows are tried in order:
//!
//! | # | upstream | source | live object | decision |
//! |---|---|---|---|---|
//! | 1 | any | any | mode `update`, `from` names another namespace | **Delete** |
//! | 2 | none | any | absent | Leave: nothing to copy |
//! | 3 | none | any | no `from` | Leave: an original |
//! | 4 | none | any | `from` set, mode not `update` | Leave: kept, not `update` |
//! | 5 | yes | `create` / `update` | absent | **Create** |
//! | 6 | yes | `create` / `update` | no `from` | Leave: conflict, an original holds the name |
//! | 7 | yes | `create` / `update` | `from` another namespace, mode not `update` | Leave: conflict, a foreign copy holds the name |
//! | 8 | yes | `create` | `from` the upstream | Leave: `create` copies are never updated |
//! | 9 | yes | `update` | `from` the upstream, differs | **Update** |
//! | 10 | yes | `update` | `from` the upstream, same | Leave: up to date |
//! | 11 | yes | present, no mode | absent | Leave: nothing to copy |
//! | 12 | yes | present, no mode | `from` the upstream | Leave: the source exists but no longer propagates |
//! | 13 | yes | absent | absent | Leave: nothing to copy |
//! | 14 | yes | absent | mode `update`, `from` the upstream | **Delete** |
//! | 15 | yes | absent or no mode | no `from` | Leave: an original |
//! | 16 | yes | absent or no mode | `from` set, mode not `update` | Leave: kept, not `update` |
//!
//! Two invariants follow and are property-tested: only a source in mode `update` ever causes
//! an Update, and only a live object that is itself annotated `update` and carries `from` is
//! ever deleted. An object without `from` is an original, never a copy, so it is never
//! overwritten or deleted, even when its name collides with a source (rows 6, 15).
//!
//! # Same-name objects without `from` (rows 6 and 7)
//!
//! seeds/001 says a sub-namespace gets "copies ... if they are missing or different" and does
//! not say what an object of the same name that is no copy is. Accurate's own answer differs
//! by mode: for `create` it leaves any object of that name alone (as row 6 does); for `update`
//! it applies the copy over it, so the namespace's own object is replaced and gains `from`.
//! Arbor decides **Leave** for both modes: an object without `from` was not made by
//! propagation, and a controller never overwrites what it is not sure it owns (a Secret a team
//! created by hand would otherwise be silently replaced by its parent's). The decision is never
//! silent: the controller publishes a Warning Event `CopyBlocked` on the object in the way,
//! counts it in `arbor_hierarchy_errors{reason="CopyBlocked"}`, and `arborctl explain` (the
//! gRPC ExplainPropagation) names [`NAME_OCCUPIED_RULE`]. To let the copy in, delete the
//! object, or annotate it `<domain>/from=<upstream>` to adopt it as the copy.

use super::mode::PropagateMode;

/// The rule that leaves an object without `from` (or a foreign copy) in the way of a copy, as
/// explanations name it.
pub const NAME_OCCUPIED_RULE: &str = "arbor-policy copy decision rows 6-7: an object that is not a copy from the upstream is never overwritten";

/// The object of that name in the upstream namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFact {
    Absent,
    Present { mode: Option<PropagateMode> },
}

/// Where a live object's `<domain>/from` annotation points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromFact {
    /// No `from` (or an empty one): the object is an original.
    Missing,
    /// `from` names the namespace's upstream.
    Upstream,
    /// `from` names any other namespace, or the namespace has no upstream.
    Other,
}

/// The object of that name in the reconciled namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveFact {
    Absent,
    Present {
        mode: Option<PropagateMode>,
        from: FromFact,
        /// Whether it differs from the copy the source would make; only meaningful when the
        /// source is in mode `update`.
        differs: bool,
    },
}

/// Everything the decision depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyFacts {
    pub has_upstream: bool,
    pub source: SourceFact,
    pub live: LiveFact,
}

/// The decision without the objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDecision {
    Create,
    Update,
    Delete,
    Leave(LeaveReason),
}

/// Why nothing is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// Neither a propagating source nor a live object.
    NothingToCopy,
    /// The `update` copy equals what the source would make.
    UpToDate,
    /// The copy of a `create` source exists; such copies are never updated.
    CreateOnly,
    /// The source exists but is not annotated `create` or `update`; its copy stays.
    SourceNotPropagated,
    /// The live object has no `from`: it belongs to the namespace itself.
    Original,
    /// The source wants a copy, but an original of the same name holds the place.
    OccupiedByOriginal,
    /// The source wants a copy, but a copy from another namespace, not in mode `update`, holds
    /// the place.
    OccupiedByForeignCopy,
    /// A copy that is not in mode `update` outlived its source or upstream; it is kept.
    KeptNotUpdateMode,
}

impl LeaveReason {
    /// Whether the controller should report a conflict for this name.
    pub fn is_conflict(self) -> bool {
        matches!(self, Self::OccupiedByOriginal | Self::OccupiedByForeignCopy)
    }
}

/// Applies the table in the module documentation.
pub fn decide(facts: CopyFacts) -> CopyDecision {
    use LeaveReason::*;
    let CopyFacts {
        has_upstream,
        source,
        live,
    } = facts;
    let (live_mode, from, differs) = match live {
        LiveFact::Absent => {
            let wanted = matches!(source, SourceFact::Present { mode: Some(_) });
            return if has_upstream && wanted {
                CopyDecision::Create
            } else {
                CopyDecision::Leave(NothingToCopy)
            };
        }
        LiveFact::Present {
            mode,
            from,
            differs,
        } => (mode, from, differs),
    };
    let live_is_update = live_mode == Some(PropagateMode::Update);
    // Without an upstream no `from` can name it, whatever the caller classified.
    let from = match from {
        FromFact::Upstream if !has_upstream => FromFact::Other,
        from => from,
    };
    if live_is_update && from == FromFact::Other {
        return CopyDecision::Delete;
    }
    let source_mode = match source {
        SourceFact::Present { mode } if has_upstream => mode,
        _ => None,
    };
    match (source_mode, from) {
        (_, FromFact::Missing) if source_mode.is_some() => CopyDecision::Leave(OccupiedByOriginal),
        (_, FromFact::Missing) => CopyDecision::Leave(Original),
        (Some(_), FromFact::Other) => CopyDecision::Leave(OccupiedByForeignCopy),
        (Some(PropagateMode::Create), FromFact::Upstream) => CopyDecision::Leave(CreateOnly),
        (Some(PropagateMode::Update), FromFact::Upstream) if differs => CopyDecision::Update,
        (Some(PropagateMode::Update), FromFact::Upstream) => CopyDecision::Leave(UpToDate),
        (None, FromFact::Upstream) if source != SourceFact::Absent => {
            CopyDecision::Leave(SourceNotPropagated)
        }
        (None, FromFact::Upstream) if live_is_update => CopyDecision::Delete,
        (None, _) => CopyDecision::Leave(KeptNotUpdateMode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PropagateMode::*;

    fn live(mode: Option<PropagateMode>, from: FromFact, differs: bool) -> LiveFact {
        LiveFact::Present {
            mode,
            from,
            differs,
        }
    }

    fn present(mode: Option<PropagateMode>) -> SourceFact {
        SourceFact::Present { mode }
    }

    #[test]
    fn every_row_of_the_table() {
        use FromFact::*;
        use LeaveReason::*;
        let rows: &[(bool, SourceFact, LiveFact, CopyDecision)] = &[
            (
                true,
                present(Some(Update)),
                live(Some(Update), Other, false),
                CopyDecision::Delete,
            ),
            (
                false,
                SourceFact::Absent,
                live(Some(Update), Other, false),
                CopyDecision::Delete,
            ),
            (
                false,
                present(Some(Update)),
                LiveFact::Absent,
                CopyDecision::Leave(NothingToCopy),
            ),
            (
                false,
                SourceFact::Absent,
                live(Some(Update), Missing, false),
                CopyDecision::Leave(Original),
            ),
            (
                false,
                SourceFact::Absent,
                live(Some(Create), Other, false),
                CopyDecision::Leave(KeptNotUpdateMode),
            ),
            (
                true,
                present(Some(Create)),
                LiveFact::Absent,
                CopyDecision::Create,
            ),
            (
                true,
                present(Some(Update)),
                LiveFact::Absent,
                CopyDecision::Create,
            ),
            (
                true,
                present(Some(Update)),
                live(None, Missing, true),
                CopyDecision::Leave(OccupiedByOriginal),
            ),
            (
                true,
                present(Some(Create)),
                live(Some(Create), Other, true),
                CopyDecision::Leave(OccupiedByForeignCopy),
            ),
            (
                true,
                present(Some(Create)),
                live(Some(Create), Upstream, true),
                CopyDecision::Leave(CreateOnly),
            ),
            (
                true,
                present(Some(Update)),
                live(Some(Update), Upstream, true),
                CopyDecision::Update,
            ),
            (
                true,
                present(Some(Update)),
                live(Some(Create), Upstream, true),
                CopyDecision::Update,
            ),
            (
                true,
                present(Some(Update)),
                live(Some(Update), Upstream, false),
                CopyDecision::Leave(UpToDate),
            ),
            (
                true,
                present(None),
                LiveFact::Absent,
                CopyDecision::Leave(NothingToCopy),
            ),
            (
                true,
                present(None),
                live(Some(Update), Upstream, true),
                CopyDecision::Leave(SourceNotPropagated),
            ),
            (
                true,
                SourceFact::Absent,
                LiveFact::Absent,
                CopyDecision::Leave(NothingToCopy),
            ),
            (
                true,
                SourceFact::Absent,
                live(Some(Update), Upstream, false),
                CopyDecision::Delete,
            ),
            (
                true,
                SourceFact::Absent,
                live(Some(Update), Missing, false),
                CopyDecision::Leave(Original),
            ),
            (
                true,
                SourceFact::Absent,
                live(Some(Create), Upstream, false),
                CopyDecision::Leave(KeptNotUpdateMode),
            ),
        ];
        for (has_upstream, source, live, want) in rows {
            let facts = CopyFacts {
                has_upstream: *has_upstream,
                source: *source,
                live: *live,
            };
            assert_eq!(decide(facts), *want, "{facts:?}");
        }
    }

    #[test]
    fn only_occupied_places_are_conflicts() {
        assert!(LeaveReason::OccupiedByOriginal.is_conflict());
        assert!(LeaveReason::OccupiedByForeignCopy.is_conflict());
        assert!(!LeaveReason::CreateOnly.is_conflict());
        assert!(!LeaveReason::Original.is_conflict());
    }
}
