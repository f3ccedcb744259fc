//! The plan of one sync round: from what git declares, what the source tracks and what the
//! cluster holds, what the round applies, deletes, sweeps, leaves alone, and what stops it.
//!
//! ## Model
//!
//! gitsync observes (it fetches and parses the source, lists its tracking objects and the live
//! objects of the declared kinds), asks [`plan`], and carries the answer out. `arborctl diff`
//! (`SyncService.Preview`) asks the same function about a revision or a directory that is not
//! applied yet, so the preview and the round cannot disagree.
//!
//! - [`declares`]: a GitTrack's objects without a namespace land in the GitTrack's namespace,
//!   so a tracking object for `team-a/settings` is explained by a declaration of `settings`
//!   without a namespace.
//! - [`RoundPlan::apply`]: each declared object with the row of seeds/000's table that applies
//!   to it against the live object (create, update with the differing fields, no action);
//!   [`RoundPlan::unmanaged`]: declared objects on the cluster without the management label
//!   (row 3) and unlabelled objects of a declared kind that nothing declares (row 6).
//! - [`RoundPlan::delete`]: tracked objects no declaration explains any more (their tracking
//!   objects are deleted and the finalizer applies the table, row 5).
//! - [`RoundPlan::sweep`]: labelled objects of a declared kind in the source's reach that
//!   neither a declaration nor a tracking object explains, made by another source of this one
//!   (seeds/000's `secret-admin`, row 5). An object another source's annotation names is never
//!   swept.
//! - [`RoundPlan::prune`]: whether the round may delete at all. Never after a failed parse
//!   (the last good commit stays applied and nothing is deleted), never with `prune: false`,
//!   and otherwise only within the mass-prune budget ([`PruneBudget::check`]).
//! - [`state_to_sync`]: which declared state a round syncs; a commit that does not parse
//!   never replaces the last good state.
//! - [`finalize`]: what the finalizer of one tracking object does when it is deleted, from
//!   where its source stands ([`SourceStanding::of`] its metadata: the same uid, being deleted,
//!   holding gitsync's finalizer).
//!
//! ## Rules and their tests
//!
//! | rule | unit test (here) | through the running controller |
//! |---|---|---|
//! | namespace-less objects land in the GitTrack's namespace | `namespace_less_objects_land_in_the_gittracks_namespace` | `controller_ownership.rs`: `gittrack_applies_only_its_namespace_and_lists_cluster_scoped_and_cross_namespace_objects_as_ignored`; e2e `e2e_diff.rs` (a flat GitTrack's files without namespaces) |
//! | seeds/000 row 5: a tracked object removed from git is deleted | `row_5_a_tracked_object_no_longer_declared_is_deleted` | `controller_pruning.rs`: `row_5_flat_source_deletes_the_last_object_of_a_kind_removed_from_git`; `controller_table.rs`: `example_quota_viewer_is_created_then_removed_when_deleted_from_git` |
//! | seeds/000 `secret-admin`: a labelled object nothing explains is swept (row 5) | `row_5_a_labelled_object_nothing_explains_is_swept` | `controller_table.rs`: `example_secret_admin_is_kept_until_labelled_then_deleted` |
//! | row 6: an unlabelled object is left alone, never swept | `row_6_an_unlabelled_object_is_left_and_reported_unmanaged` | `controller_table.rs`: `example_pod_accountant_not_in_git_is_not_deleted_or_altered`; e2e `arborctl_diff_previews_create_update_delete_unmanaged_and_the_prune_guard` |
//! | another source's object is never swept | `an_object_another_source_annotates_is_never_swept` | `controller_pruning.rs`: `pruning_or_deleting_one_source_keeps_an_object_another_declares` |
//! | a commit that does not parse keeps the last good state | `tests/sync_last_good_state.rs` | `controller_safety.rs`: `a_commit_that_does_not_parse_keeps_the_last_good_state_and_deletes_nothing` |
//! | a decision that may delete, made from the cached sources, is made again from a fresh LIST ([`Freshness::to_confirm`]) | `tests/sync_fresh_sources.rs` | `controller_shards.rs`: `a_deletion_is_confirmed_with_a_fresh_list_of_the_sources` |
//! | no deletion after a failed parse | `no_deletion_after_a_failed_parse` | `controller_safety.rs`: `a_commit_that_does_not_parse_keeps_the_last_good_state_and_deletes_nothing` |
//! | `prune: false` deletes nothing | `prune_disabled_deletes_nothing` | `controller_pruning.rs`: `prune_false_leaves_an_object_removed_from_git_on_the_cluster` |
//! | the mass-prune guard stops a round | `the_mass_prune_guard_blocks_the_round` | `controller_pruning.rs`: `mass_prune_guard_counts_every_round_of_the_window_across_a_restart`; `controller_safety.rs`: `a_round_that_deletes_every_namespace_is_blocked`; e2e `arborctl_diff_*` (the preview names the guard) |
//! | rows 1–4 for declared objects | `rows_1_to_4_decide_each_declared_object` | `controller_table.rs`; e2e `arborctl_diff_previews_create_update_delete_unmanaged_and_the_prune_guard` |
//! | finalizer: the source's deletion decides, a living source's round comes first where its declarations are unknown (after a restart or a shard hand-over), a hand-deleted declared object is recreated, another declaring source takes it (known from this replica's rounds or from that source's status, whichever replica ran it), nothing is deleted while the other sources cannot be seen, a tracking object no source owns is let go and its object left, `Orphan` releases, otherwise the table (row 5 or 8) | `finalizer_*`, `another_source_declares_by_either_record_and_never_while_being_deleted`, `whether_another_source_declares_is_unknown_until_the_sources_are_seen`, `a_sources_standing_follows_its_uid_deletion_and_finalizer` | `controller_shards.rs`: `an_object_a_source_of_another_replica_declares_is_released_not_deleted`; `controller_safety.rs`: `a_tracking_object_left_without_an_owner_is_let_go_and_its_object_kept`; `controller_pruning.rs`: `deleting_a_source_orphans_by_default`, `pruning_or_deleting_one_source_keeps_an_object_another_declares`; `controller_table.rs`: `row_8_object_whose_sync_is_removed_is_left_on_the_cluster`; `controller_safety.rs`: `deletion_policy_orphan_leaves_every_object_when_the_source_is_deleted`, `a_tracking_object_deleted_while_gitsync_was_down_never_takes_a_declared_object_with_it` |
//!
//! A round decides its declared objects one by one as it writes them (their live objects are
//! read again after CustomResourceDefinitions and Namespaces are applied), with the same table
//! ([`decide`]); a preview decides them all in the plan ([`RoundInput::declared`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::Value;

use super::action::{Decision, Row, Situation, decide};
use super::label::Control;
use super::matches::CompareFields;
use super::prune::{PruneBudget, PruneCount, PruneVerdict, PruneWindow, is_namespace};
use crate::keys::ManagementLabel;
use crate::layout::{DeclaredObject, DeclaredState};
use crate::object::{self, ObjectKey};
use crate::ownership::{ObjectScope, Owner, WatchScope};

/// What the fetch of a round loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitLoad {
    /// The commit already known to be good: nothing was parsed again.
    Unchanged,
    /// A commit that parses.
    Parsed,
    /// A commit that does not parse.
    ParseFailed,
}

/// Which declared state a round syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateToSync {
    /// The state just parsed, which becomes the last good state.
    New,
    /// The last good state, as before.
    LastGood,
    /// The last good state, with the new commit's parse errors reported; the round deletes
    /// nothing ([`PruneInput::parse_failed`]).
    LastGoodDespiteErrors,
    /// No round: nothing new, and no good state known.
    Nothing,
    /// Stall with the parse errors: the commit does not parse and no good state is known, so
    /// nothing is applied.
    StallNothingGood,
}

/// Which state a round syncs, from what it `loaded` and whether a last good state is known:
/// a commit that does not parse never replaces the last good state.
pub fn state_to_sync(loaded: CommitLoad, last_good_known: bool) -> StateToSync {
    match (loaded, last_good_known) {
        (CommitLoad::Parsed, _) => StateToSync::New,
        (CommitLoad::Unchanged, true) => StateToSync::LastGood,
        (CommitLoad::Unchanged, false) => StateToSync::Nothing,
        (CommitLoad::ParseFailed, true) => StateToSync::LastGoodDespiteErrors,
        (CommitLoad::ParseFailed, false) => StateToSync::StallNothingGood,
    }
}

/// Whether `state` declares the object of `key`. `home` is a GitTrack's namespace: its objects
/// declared without a namespace land there.
pub fn declares<O>(state: &DeclaredState<O>, home: Option<&str>, key: &ObjectKey) -> bool {
    if state.objects.contains_key(key) {
        return true;
    }
    key.namespace.is_some()
        && key.namespace.as_deref() == home
        && state.objects.contains_key(&ObjectKey {
            namespace: None,
            ..key.clone()
        })
}

/// The source a round is for.
#[derive(Debug, Clone, Copy)]
pub struct SourceInfo<'a> {
    /// Its place in the ownership matrix.
    pub owner: &'a Owner,
    /// The value of the source annotation its objects carry (`GitTrack/ns/name`).
    pub reference: &'a str,
    /// A GitTrack's namespace.
    pub namespace: Option<&'a str>,
}

/// The instance's rules a plan applies.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub scope: &'a WatchScope,
    pub label: &'a ManagementLabel,
    /// The annotation naming the source that applied an object.
    pub source_annotation: &'a str,
}

/// One object of the source's inventory (a tracking object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedObject {
    pub key: ObjectKey,
    /// Its tracking object is being deleted already (its finalizer is at work).
    pub deleting: bool,
}

/// One live object of a declared kind.
#[derive(Debug, Clone, Copy)]
pub struct LiveObject<'a> {
    pub key: &'a ObjectKey,
    pub object: &'a Value,
    /// Whether its kind is namespaced.
    pub namespaced: bool,
}

/// One declared object as it would be applied.
#[derive(Debug, Clone, Copy)]
pub struct DeclaredInput<'a> {
    /// The key with the namespace the object lands in.
    pub key: &'a ObjectKey,
    /// The applied form.
    pub desired: &'a Value,
    pub compare: &'a CompareFields,
}

/// What decides whether the round may delete.
#[derive(Debug, Clone, Copy)]
pub struct PruneInput {
    /// `spec.prune`.
    pub enabled: bool,
    /// The latest commit did not parse: the round works from the last good one.
    pub parse_failed: bool,
    pub budget: PruneBudget,
    /// The window stored on the source's status.
    pub previous: Option<PruneWindow>,
    /// The allow-mass-prune annotation.
    pub allowed: bool,
    pub now: SystemTime,
}

/// Everything a round's plan is made from.
#[derive(Debug, Clone, Copy)]
pub struct RoundInput<'a, O = DeclaredObject> {
    pub state: &'a DeclaredState<O>,
    pub source: SourceInfo<'a>,
    pub rules: Rules<'a>,
    pub tracked: &'a [TrackedObject],
    /// The declared objects to decide (may be empty when the caller decides each as it writes).
    pub declared: &'a [DeclaredInput<'a>],
    /// The live objects of the declared kinds.
    pub live: &'a [LiveObject<'a>],
    pub prune: PruneInput,
}

/// A declared object and the table's decision for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub key: ObjectKey,
    pub situation: Situation,
    pub decision: Decision,
}

/// Why the round deletes nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Prune {
    /// The latest commit does not parse: nothing is deleted until one does.
    ParseFailed,
    /// `spec.prune` is false.
    Disabled,
    /// The guard's verdict (allowed, or blocked with the reason).
    Judged(PruneVerdict),
}

impl Prune {
    /// Whether the round may delete.
    pub fn allows(&self) -> bool {
        matches!(self, Self::Judged(PruneVerdict::Allowed { .. }))
    }

    /// Why nothing is deleted, for people; `None` when the round may delete.
    pub fn stopped_by(&self) -> Option<String> {
        match self {
            Self::ParseFailed => Some(
                "the commit does not parse: the last good commit stays applied and nothing is \
                 deleted"
                    .to_owned(),
            ),
            Self::Disabled => Some("spec.prune is false: nothing is deleted".to_owned()),
            Self::Judged(PruneVerdict::Blocked { message, .. }) => Some(message.clone()),
            Self::Judged(PruneVerdict::Allowed { .. }) => None,
        }
    }
}

/// The round's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundPlan {
    /// Every declared object of the input with its decision.
    pub apply: Vec<Planned>,
    /// Objects the table leaves alone because they lack the management label (rows 3 and 6).
    pub unmanaged: Vec<(ObjectKey, Row)>,
    /// Tracked objects no longer declared (their tracking objects are deleted).
    pub delete: Vec<ObjectKey>,
    /// Labelled objects nothing explains (deleted by the table, row 5).
    pub sweep: Vec<ObjectKey>,
    /// Whether `delete` and `sweep` are carried out.
    pub prune: Prune,
}

impl RoundPlan {
    /// Whether the guard stops the round as a whole (the mass-prune budget).
    pub fn blocked(&self) -> Option<&str> {
        match &self.prune {
            Prune::Judged(PruneVerdict::Blocked { message, .. }) => Some(message),
            _ => None,
        }
    }
}

/// What a round would do to one object, as a preview shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Create,
    Update,
    Delete,
    Unchanged,
    /// Left alone: it lacks the management label (rows 3 and 6).
    Unmanaged,
    /// Not Arbor's to change: no Sync declares its kind (row 8), or there is nothing (row 7).
    Ignored,
}

impl Change {
    /// The change `row` makes.
    pub fn of(row: Row) -> Self {
        match row {
            Row::ManagedAndMatching => Self::Unchanged,
            Row::ManagedAndDrifted => Self::Update,
            Row::DeclaredButUnmanaged | Row::UndeclaredAndUnmanaged => Self::Unmanaged,
            Row::DeclaredNotOnCluster => Self::Create,
            Row::UndeclaredButManaged => Self::Delete,
            Row::UndeclaredNotOnCluster | Row::SyncNotDeclared => Self::Ignored,
        }
    }

    /// Whether the round's guards hold the change back: the mass-prune guard stops the whole
    /// round (no create or update either), and every guard of [`Prune`] stops deletions.
    pub fn held(self, prune: &Prune) -> bool {
        match self {
            Self::Create | Self::Update => {
                matches!(prune, Prune::Judged(PruneVerdict::Blocked { .. }))
            }
            Self::Delete => !prune.allows(),
            Self::Unchanged | Self::Unmanaged | Self::Ignored => false,
        }
    }
}

/// Plans one round (see the [module docs](self)).
pub fn plan<O>(input: &RoundInput<'_, O>) -> RoundPlan {
    let state = input.state;
    let home = input.source.namespace;
    let removals: Vec<&TrackedObject> = input
        .tracked
        .iter()
        .filter(|tracked| !declares(state, home, &tracked.key))
        .collect();
    let tracked: BTreeSet<&ObjectKey> = input.tracked.iter().map(|t| &t.key).collect();
    let reach = Reach::of(input);
    let mut sweep = Vec::new();
    let mut unmanaged = Vec::new();
    for live in input.live {
        let kind_declared = state.declares_kind(&live.key.group_kind);
        if !kind_declared || declares(state, home, live.key) || !reach.holds(input, live) {
            continue;
        }
        let control = Control::of(input.rules.label, &object::labels(live.object));
        if !control.may_update_or_delete() {
            unmanaged.push((live.key.clone(), Row::UndeclaredAndUnmanaged));
        } else if !tracked.contains(live.key) && !reach.foreign(input, live) {
            sweep.push(live.key.clone());
        }
    }
    let live: BTreeMap<&ObjectKey, &Value> = input
        .live
        .iter()
        .map(|live| (live.key, live.object))
        .collect();
    let mut apply = Vec::new();
    for declared in input.declared {
        let situation = Situation::assess(
            state.declares_kind(&declared.key.group_kind),
            Some(declared.desired),
            live.get(declared.key).copied(),
            input.rules.label,
            declared.compare,
        );
        let decision = decide(&situation);
        if decision.row == Row::DeclaredButUnmanaged {
            unmanaged.push((declared.key.clone(), decision.row));
        }
        apply.push(Planned {
            key: declared.key.clone(),
            situation,
            decision,
        });
    }
    let prune = judge(input, &removals, sweep.len());
    RoundPlan {
        apply,
        unmanaged,
        delete: removals
            .iter()
            .filter(|tracked| !tracked.deleting)
            .map(|tracked| tracked.key.clone())
            .collect(),
        sweep,
        prune,
    }
}

/// The namespaces and scope a source's sweep may reach.
struct Reach<'a> {
    namespaces: BTreeSet<&'a str>,
}

impl<'a> Reach<'a> {
    fn of<O>(input: &RoundInput<'a, O>) -> Self {
        let state = input.state;
        let namespaces = state
            .namespaces
            .iter()
            .map(String::as_str)
            .chain(input.source.namespace)
            .chain(
                state
                    .objects
                    .keys()
                    .filter_map(|key| key.namespace.as_deref()),
            )
            .collect();
        Self { namespaces }
    }

    /// In one of the source's namespaces (or cluster-scoped) and within the ownership matrix.
    fn holds<O>(&self, input: &RoundInput<'_, O>, live: &LiveObject<'_>) -> bool {
        live.key
            .namespace
            .as_deref()
            .is_none_or(|namespace| self.namespaces.contains(namespace))
            && input
                .rules
                .scope
                .may_apply(
                    input.source.owner,
                    &ObjectScope::of(live.object, live.namespaced),
                )
                .is_ok()
    }

    /// Another source's annotation names it.
    fn foreign<O>(&self, input: &RoundInput<'_, O>, live: &LiveObject<'_>) -> bool {
        object::annotation(live.object, input.rules.source_annotation)
            .is_some_and(|source| source != input.source.reference)
    }
}

fn judge<O>(input: &RoundInput<'_, O>, removals: &[&TrackedObject], swept: usize) -> Prune {
    let settings = input.prune;
    if settings.parse_failed {
        return Prune::ParseFailed;
    }
    if !settings.enabled {
        return Prune::Disabled;
    }
    let count = PruneCount {
        tracked: input.tracked.len(),
        removals: removals.len() + swept,
        namespaces: input
            .tracked
            .iter()
            .filter(|t| is_namespace(&t.key.group_kind))
            .count(),
        namespaces_removed: removals
            .iter()
            .filter(|t| is_namespace(&t.key.group_kind))
            .count(),
    };
    Prune::Judged(
        settings
            .budget
            .check(settings.previous, count, settings.now, settings.allowed),
    )
}

/// Where the source that owns a tracking object stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStanding {
    Alive,
    /// Being deleted, holding gitsync's finalizer: its deletion decides for every object.
    Deleting,
    /// Gone, replaced (another uid), or deleted without gitsync's finalizer.
    Gone,
    /// The tracking object names no source as its controller (an orphaning cascade delete of
    /// its source removed the ownerReference, or someone edited it): nothing says the object
    /// it tracks is Arbor's to delete.
    Unowned,
}

impl SourceStanding {
    /// Where the source stands, from its metadata as read now (`None` when it is not found).
    /// `owner_uid` is the uid the tracking object's ownerReference names: a source of that name
    /// with another uid is a new one, and the old one is gone.
    pub fn of(found: Option<SourceSeen<'_>>, owner_uid: &str) -> Self {
        match found {
            Some(seen) if seen.uid == Some(owner_uid) => match (seen.deleting, seen.finalized) {
                (false, _) => Self::Alive,
                (true, true) => Self::Deleting,
                (true, false) => Self::Gone,
            },
            _ => Self::Gone,
        }
    }
}

/// What [`SourceStanding::of`] reads of a source's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceSeen<'a> {
    pub uid: Option<&'a str>,
    /// It has a deletionTimestamp.
    pub deleting: bool,
    /// It holds gitsync's finalizer.
    pub finalized: bool,
}

/// What is known about one source other than a tracking object's owner, for whether it
/// declares the tracked object. Each replica runs the rounds of its shards only, so its own
/// memory of rounds covers some sources; the status every round writes to the cluster covers
/// all of them, whichever replica ran the round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherSource {
    /// Whether its last round on this replica declared the object in a way that could manage
    /// it; `None` when no round of it ran here (another replica's shard, or not yet).
    pub here: Option<bool>,
    /// Its status reports a management conflict on the object: its last round that planned
    /// declared the object while the owner held it (written by whichever replica ran it).
    pub conflict_reported: bool,
    /// It is being deleted: it declares nothing any more.
    pub deleting: bool,
}

impl OtherSource {
    /// Whether the source counts as declaring the object. Either record saying so is enough:
    /// a stale "declares" only releases an object instead of deleting it.
    pub fn declares(self) -> bool {
        !self.deleting && (self.here == Some(true) || self.conflict_reported)
    }
}

/// Whether another source declares a tracking object's object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elsewhere {
    Declared,
    Nobody,
    /// The other sources could not be seen (this replica has not listed them yet).
    Unknown,
}

impl Elsewhere {
    /// From every other source's [`OtherSource`]; `seen` says whether the sources were listed
    /// at all.
    pub fn of(seen: bool, others: impl IntoIterator<Item = OtherSource>) -> Self {
        let mut others = others.into_iter();
        if others.any(OtherSource::declares) {
            Self::Declared
        } else if seen {
            Self::Nobody
        } else {
            Self::Unknown
        }
    }
}

/// What a tracking object's finalizer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalizeInput {
    pub source: SourceStanding,
    /// The owning source still declares the object (it was deleted by hand).
    pub still_declared: bool,
    /// Whether another source declares the object.
    pub declared_elsewhere: Elsewhere,
    /// The tracking object carries `deletionPolicy: Orphan`.
    pub orphan: bool,
    /// Whether the owning source declares the object's kind (its Sync); `None` when unknown.
    pub kind_declared: Option<bool>,
    /// Whether this instance knows what the owning source declares now: a round of it has
    /// finished here since the instance started (or took the source's shard).
    pub declarations_known: bool,
}

/// What the finalizer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finalize {
    /// Keep the finalizer; the source's deletion plans every object together.
    WaitForSourceDeletion,
    /// Keep the finalizer and ask the living source for a round: what it declares is not known
    /// here yet (after a restart or a shard hand-over), and deciding without it could delete an
    /// object the source still declares.
    WaitForRound,
    /// Let the tracking object go and ask the source for a round, which recreates it.
    Recreate,
    /// Let the tracking object go; the declaring source takes the object at its next round.
    ReleaseToAnotherSource,
    /// Keep the finalizer and look again: whether another source declares the object is not
    /// known yet, and deleting it could take an object another source holds.
    WaitForOtherSources,
    /// Let the tracking object go and leave its object as it is, saying so: no source owns the
    /// tracking object, so nothing says the object is Arbor's to delete.
    ReleaseUnowned,
    /// Apply the table with nothing declared (row 5 deletes a labelled object; row 8 leaves it
    /// when the Sync is gone), then let the tracking object go.
    ApplyTable { sync_declared: bool },
    /// `Orphan` of a deleted source: let go and leave the object.
    Orphan,
}

impl Finalize {
    /// Whether carrying it out may delete the tracked object: the table decides from the
    /// live object, and row 5 deletes it.
    pub fn may_delete(self) -> bool {
        matches!(self, Self::ApplyTable { .. })
    }
}

/// Where the other sources a decision stands on were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// This replica's caches of them (behind the API server by the watch's lag, longer
    /// through a watch outage).
    Cached,
    /// A LIST from the API server just now.
    Listed,
}

impl Freshness {
    /// The read to decide again from before carrying out a decision made from this one;
    /// `may_delete` says whether the decision may delete an object. Such a decision made from
    /// the caches is made again from a fresh LIST: a cache behind a watch outage can miss a
    /// management conflict another source reported meanwhile, and a delete cannot be undone
    /// (a release or a wait can). `None`: the decision stands.
    pub fn to_confirm(self, may_delete: bool) -> Option<Freshness> {
        (self == Self::Cached && may_delete).then_some(Self::Listed)
    }
}

/// The finalizer's decision for one tracking object.
pub fn finalize(input: FinalizeInput) -> Finalize {
    let alive = input.source == SourceStanding::Alive;
    match input.source {
        SourceStanding::Deleting => return Finalize::WaitForSourceDeletion,
        SourceStanding::Unowned => return Finalize::ReleaseUnowned,
        SourceStanding::Alive | SourceStanding::Gone => {}
    }
    if alive && !input.declarations_known {
        return Finalize::WaitForRound;
    }
    if alive && input.still_declared {
        return Finalize::Recreate;
    }
    match input.declared_elsewhere {
        Elsewhere::Declared => return Finalize::ReleaseToAnotherSource,
        Elsewhere::Unknown if alive || !input.orphan => return Finalize::WaitForOtherSources,
        Elsewhere::Unknown | Elsewhere::Nobody => {}
    }
    if alive || !input.orphan {
        // A deleted source with the Delete policy no longer declares anything it had; a flat
        // source declares every kind its inventory holds.
        let sync_declared = !alive || input.kind_declared.unwrap_or(true);
        return Finalize::ApplyTable { sync_declared };
    }
    Finalize::Orphan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{DeclaredKind, DeclaredObject, Layout, Location};
    use crate::object::GroupKind;
    use crate::ownership::{ClusterGitTrackMode, GitTrackMode, NamespaceRestriction};
    use serde_json::json;
    use std::time::Duration;

    const SOURCE: &str = "GitTrack/team-a/config";
    const ANNOTATION: &str = "arbor.dev/source";

    fn key(kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            group_kind: GroupKind::new("", kind),
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    fn configmap(namespace: &str, name: &str, labelled: bool, source: Option<&str>) -> Value {
        let mut object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "v"},
        });
        if labelled {
            object["metadata"]["labels"] = json!({"arbor.dev/managed": "enabled"});
        }
        if let Some(source) = source {
            object["metadata"]["annotations"] = json!({ ANNOTATION: source });
        }
        object
    }

    /// A state declaring `names` as ConfigMaps without a namespace (a GitTrack's source).
    fn state(names: &[&str]) -> DeclaredState {
        let mut state = DeclaredState {
            layout: Layout::Flat,
            objects: BTreeMap::new(),
            kinds: BTreeMap::new(),
            namespaces: BTreeSet::new(),
        };
        let kind = GroupKind::new("", "ConfigMap");
        state.kinds.insert(
            kind.clone(),
            DeclaredKind {
                group_kind: kind,
                versions: vec!["v1".into()],
                hierarchy_mode: Default::default(),
                compare_fields: Vec::new(),
                declared_in: None,
            },
        );
        for name in names {
            state.objects.insert(
                key("ConfigMap", None, name),
                DeclaredObject {
                    object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name}, "data": {"k": "v"}}),
                    source: Location {
                        path: format!("{name}.yaml").into(),
                        document: 0,
                    },
                    inherited_from: None,
                },
            );
        }
        state
    }

    fn scope() -> WatchScope {
        WatchScope::from_flags(
            GitTrackMode::Enabled,
            ClusterGitTrackMode::default(),
            NamespaceRestriction::default(),
        )
        .unwrap()
    }

    fn prune(enabled: bool, parse_failed: bool) -> PruneInput {
        PruneInput {
            enabled,
            parse_failed,
            budget: PruneBudget {
                max_fraction: 0.5,
                window: Duration::from_secs(3600),
            },
            previous: None,
            allowed: false,
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
        }
    }

    struct Case {
        state: DeclaredState,
        tracked: Vec<TrackedObject>,
        live: Vec<(ObjectKey, Value)>,
        prune: PruneInput,
    }

    impl Case {
        fn new(declared: &[&str]) -> Self {
            Self {
                state: state(declared),
                tracked: Vec::new(),
                live: Vec::new(),
                prune: prune(true, false),
            }
        }

        fn tracks(mut self, name: &str) -> Self {
            self.tracked.push(TrackedObject {
                key: key("ConfigMap", Some("team-a"), name),
                deleting: false,
            });
            self
        }

        fn live(mut self, name: &str, labelled: bool, source: Option<&str>) -> Self {
            self.live.push((
                key("ConfigMap", Some("team-a"), name),
                configmap("team-a", name, labelled, source),
            ));
            self
        }

        fn plan(&self, declared: &[DeclaredInput<'_>]) -> RoundPlan {
            let owner = Owner::gittrack("team-a");
            let scope = scope();
            let label = ManagementLabel::default();
            let live: Vec<LiveObject<'_>> = self
                .live
                .iter()
                .map(|(key, object)| LiveObject {
                    key,
                    object,
                    namespaced: true,
                })
                .collect();
            plan(&RoundInput {
                state: &self.state,
                source: SourceInfo {
                    owner: &owner,
                    reference: SOURCE,
                    namespace: Some("team-a"),
                },
                rules: Rules {
                    scope: &scope,
                    label: &label,
                    source_annotation: ANNOTATION,
                },
                tracked: &self.tracked,
                declared,
                live: &live,
                prune: self.prune,
            })
        }
    }

    #[test]
    fn namespace_less_objects_land_in_the_gittracks_namespace() {
        let state = state(&["settings"]);
        let landed = key("ConfigMap", Some("team-a"), "settings");
        assert!(declares(&state, Some("team-a"), &landed));
        assert!(!declares(&state, Some("team-b"), &landed));
        assert!(!declares(&state, None, &landed));
        assert!(!declares(
            &state,
            Some("team-a"),
            &key("ConfigMap", Some("team-a"), "other")
        ));
    }

    #[test]
    fn row_5_a_tracked_object_no_longer_declared_is_deleted() {
        let plan = Case::new(&["a", "b", "c"])
            .tracks("a")
            .tracks("b")
            .tracks("c")
            .tracks("gone")
            .plan(&[]);
        assert_eq!(plan.delete, vec![key("ConfigMap", Some("team-a"), "gone")]);
        assert!(plan.prune.allows());
    }

    #[test]
    fn a_tracking_object_already_being_deleted_is_not_deleted_again() {
        let mut case = Case::new(&["a", "b"]).tracks("a").tracks("b");
        case.tracked.push(TrackedObject {
            key: key("ConfigMap", Some("team-a"), "gone"),
            deleting: true,
        });
        assert!(case.plan(&[]).delete.is_empty());
    }

    #[test]
    fn row_5_a_labelled_object_nothing_explains_is_swept() {
        let plan = Case::new(&["a", "b"])
            .tracks("a")
            .tracks("b")
            .live("a", true, Some(SOURCE))
            .live("secret-admin", true, None)
            .plan(&[]);
        assert_eq!(
            plan.sweep,
            vec![key("ConfigMap", Some("team-a"), "secret-admin")]
        );
    }

    #[test]
    fn row_6_an_unlabelled_object_is_left_and_reported_unmanaged() {
        let plan = Case::new(&["a"])
            .tracks("a")
            .live("handmade", false, None)
            .plan(&[]);
        assert!(plan.sweep.is_empty());
        assert_eq!(
            plan.unmanaged,
            vec![(
                key("ConfigMap", Some("team-a"), "handmade"),
                Row::UndeclaredAndUnmanaged
            )]
        );
    }

    #[test]
    fn an_object_another_source_annotates_is_never_swept() {
        let plan = Case::new(&["a"])
            .tracks("a")
            .live("theirs", true, Some("GitTrack/team-a/other"))
            .plan(&[]);
        assert!(plan.sweep.is_empty());
    }

    #[test]
    fn objects_outside_the_sources_namespaces_are_never_swept() {
        let mut case = Case::new(&["a"]).tracks("a");
        case.live.push((
            key("ConfigMap", Some("team-b"), "elsewhere"),
            configmap("team-b", "elsewhere", true, None),
        ));
        assert!(case.plan(&[]).sweep.is_empty());
    }

    #[test]
    fn no_deletion_after_a_failed_parse() {
        let mut case = Case::new(&["a"]).tracks("a").tracks("gone");
        case.prune = prune(true, true);
        let plan = case.plan(&[]);
        assert_eq!(plan.prune, Prune::ParseFailed);
        assert!(!plan.prune.allows());
        assert!(plan.prune.stopped_by().unwrap().contains("does not parse"));
    }

    #[test]
    fn prune_disabled_deletes_nothing() {
        let mut case = Case::new(&["a"]).tracks("a").tracks("gone");
        case.prune = prune(false, false);
        assert_eq!(case.plan(&[]).prune, Prune::Disabled);
    }

    #[test]
    fn the_mass_prune_guard_blocks_the_round() {
        let plan = Case::new(&["a"])
            .tracks("a")
            .tracks("b")
            .tracks("c")
            .tracks("d")
            .plan(&[]);
        let message = plan.blocked().expect("three of four is over half");
        assert!(message.contains("--max-prune-fraction"), "{message}");
        assert!(!plan.prune.allows());
    }

    #[test]
    fn rows_1_to_4_decide_each_declared_object() {
        let case = Case::new(&["same", "drifted", "handmade", "new"])
            .live("same", true, Some(SOURCE))
            .live("drifted", true, Some(SOURCE))
            .live("handmade", false, None);
        let keys: Vec<ObjectKey> = ["same", "drifted", "handmade", "new"]
            .iter()
            .map(|name| key("ConfigMap", Some("team-a"), name))
            .collect();
        let same = configmap("team-a", "same", true, None);
        let mut drifted = same.clone();
        drifted["data"]["k"] = json!("changed");
        let compare = CompareFields::AllDeclared;
        let desired = [&same, &drifted, &same, &same];
        let declared: Vec<DeclaredInput<'_>> = keys
            .iter()
            .zip(desired)
            .map(|(key, desired)| DeclaredInput {
                key,
                desired,
                compare: &compare,
            })
            .collect();
        let plan = case.plan(&declared);
        let rows: Vec<u8> = plan.apply.iter().map(|p| p.decision.row.number()).collect();
        assert_eq!(rows, vec![1, 2, 3, 4]);
        assert_eq!(
            plan.unmanaged,
            vec![(keys[2].clone(), Row::DeclaredButUnmanaged)]
        );
    }

    #[test]
    fn a_sources_standing_follows_its_uid_deletion_and_finalizer() {
        let seen = |uid, deleting, finalized| SourceSeen {
            uid: Some(uid),
            deleting,
            finalized,
        };
        let cases = [
            (Some(seen("u1", false, false)), SourceStanding::Alive),
            (Some(seen("u1", false, true)), SourceStanding::Alive),
            (Some(seen("u1", true, true)), SourceStanding::Deleting),
            (Some(seen("u1", true, false)), SourceStanding::Gone),
            (Some(seen("u2", false, true)), SourceStanding::Gone),
            (None, SourceStanding::Gone),
        ];
        for (found, standing) in cases {
            assert_eq!(SourceStanding::of(found, "u1"), standing, "{found:?}");
        }
    }

    #[test]
    fn each_row_makes_one_change_which_the_guards_may_hold() {
        let table = [
            (Row::ManagedAndMatching, Change::Unchanged),
            (Row::ManagedAndDrifted, Change::Update),
            (Row::DeclaredButUnmanaged, Change::Unmanaged),
            (Row::DeclaredNotOnCluster, Change::Create),
            (Row::UndeclaredButManaged, Change::Delete),
            (Row::UndeclaredAndUnmanaged, Change::Unmanaged),
            (Row::UndeclaredNotOnCluster, Change::Ignored),
            (Row::SyncNotDeclared, Change::Ignored),
        ];
        assert_eq!(table.len(), Row::ALL.len());
        for (row, change) in table {
            assert_eq!(Change::of(row), change, "{row}");
        }
        let blocked = Case::new(&["a"])
            .tracks("a")
            .tracks("b")
            .tracks("c")
            .tracks("d")
            .plan(&[])
            .prune;
        let held = |change: Change| {
            [
                Prune::Judged(PruneVerdict::Allowed {
                    by_annotation: false,
                    window: PruneWindow {
                        start: SystemTime::UNIX_EPOCH,
                        high_water: 0,
                        pruned: 0,
                    },
                }),
                Prune::ParseFailed,
                Prune::Disabled,
                blocked.clone(),
            ]
            .map(|prune| change.held(&prune))
        };
        // Allowed, parse failed, prune disabled, mass-prune blocked:
        assert_eq!(held(Change::Create), [false, false, false, true]);
        assert_eq!(held(Change::Update), [false, false, false, true]);
        assert_eq!(held(Change::Delete), [false, true, true, true]);
        for change in [Change::Unchanged, Change::Unmanaged, Change::Ignored] {
            assert_eq!(held(change), [false; 4], "{change:?}");
        }
    }

    fn finalizing(source: SourceStanding) -> FinalizeInput {
        FinalizeInput {
            source,
            still_declared: false,
            declared_elsewhere: Elsewhere::Nobody,
            orphan: false,
            kind_declared: Some(true),
            declarations_known: true,
        }
    }

    #[test]
    fn finalizer_waits_for_a_round_while_a_living_sources_declarations_are_unknown_here() {
        let unknown = FinalizeInput {
            declarations_known: false,
            ..finalizing(SourceStanding::Alive)
        };
        assert_eq!(finalize(unknown), Finalize::WaitForRound);
        // Not knowing a deleted or deleting source's declarations changes nothing: it declares
        // nothing any more, or its deletion decides.
        for (source, decision) in [
            (SourceStanding::Deleting, Finalize::WaitForSourceDeletion),
            (
                SourceStanding::Gone,
                Finalize::ApplyTable {
                    sync_declared: true,
                },
            ),
        ] {
            let input = FinalizeInput {
                declarations_known: false,
                ..finalizing(source)
            };
            assert_eq!(finalize(input), decision, "{source:?}");
        }
    }

    #[test]
    fn finalizer_waits_while_the_source_is_being_deleted() {
        assert_eq!(
            finalize(finalizing(SourceStanding::Deleting)),
            Finalize::WaitForSourceDeletion
        );
    }

    #[test]
    fn finalizer_recreates_an_object_deleted_by_hand_that_git_still_declares() {
        let input = FinalizeInput {
            still_declared: true,
            ..finalizing(SourceStanding::Alive)
        };
        assert_eq!(finalize(input), Finalize::Recreate);
    }

    #[test]
    fn finalizer_releases_an_object_another_source_declares() {
        let input = FinalizeInput {
            declared_elsewhere: Elsewhere::Declared,
            ..finalizing(SourceStanding::Gone)
        };
        assert_eq!(finalize(input), Finalize::ReleaseToAnotherSource);
    }

    #[test]
    fn another_source_declares_by_either_record_and_never_while_being_deleted() {
        let source = |here, conflict_reported, deleting| OtherSource {
            here,
            conflict_reported,
            deleting,
        };
        // (its round here, its status's conflict, being deleted) -> declares
        let table = [
            (None, false, false, false),
            (None, true, false, true),
            (Some(true), false, false, true),
            (Some(false), false, false, false),
            // A conflict its status still reports outweighs a round here that no longer
            // declares it: a stale record only releases the object.
            (Some(false), true, false, true),
            (Some(true), true, true, false),
            (None, true, true, false),
        ];
        for (here, conflict, deleting, declares) in table {
            assert_eq!(
                source(here, conflict, deleting).declares(),
                declares,
                "{here:?} {conflict} {deleting}"
            );
        }
    }

    #[test]
    fn whether_another_source_declares_is_unknown_until_the_sources_are_seen() {
        let declaring = OtherSource {
            here: None,
            conflict_reported: true,
            deleting: false,
        };
        let silent = OtherSource {
            conflict_reported: false,
            ..declaring
        };
        assert_eq!(
            Elsewhere::of(true, [silent, declaring]),
            Elsewhere::Declared
        );
        assert_eq!(Elsewhere::of(true, [silent]), Elsewhere::Nobody);
        assert_eq!(Elsewhere::of(true, []), Elsewhere::Nobody);
        assert_eq!(Elsewhere::of(false, [silent]), Elsewhere::Unknown);
        // A declaration known here is known whether or not the others were seen.
        assert_eq!(Elsewhere::of(false, [declaring]), Elsewhere::Declared);
    }

    #[test]
    fn finalizer_deletes_nothing_while_other_sources_are_unknown() {
        for source in [SourceStanding::Alive, SourceStanding::Gone] {
            let input = FinalizeInput {
                declared_elsewhere: Elsewhere::Unknown,
                ..finalizing(source)
            };
            assert_eq!(finalize(input), Finalize::WaitForOtherSources, "{source:?}");
        }
        // Orphaning touches nothing, so it need not wait.
        let orphan = FinalizeInput {
            declared_elsewhere: Elsewhere::Unknown,
            orphan: true,
            ..finalizing(SourceStanding::Gone)
        };
        assert_eq!(finalize(orphan), Finalize::Orphan);
        // A hand-deleted object its living source declares is recreated either way.
        let recreate = FinalizeInput {
            declared_elsewhere: Elsewhere::Unknown,
            still_declared: true,
            ..finalizing(SourceStanding::Alive)
        };
        assert_eq!(finalize(recreate), Finalize::Recreate);
    }

    #[test]
    fn finalizer_of_an_unowned_tracking_object_lets_go_and_deletes_nothing() {
        for elsewhere in [Elsewhere::Nobody, Elsewhere::Declared, Elsewhere::Unknown] {
            for orphan in [false, true] {
                let input = FinalizeInput {
                    declared_elsewhere: elsewhere,
                    orphan,
                    declarations_known: false,
                    ..finalizing(SourceStanding::Unowned)
                };
                assert_eq!(finalize(input), Finalize::ReleaseUnowned, "{elsewhere:?}");
            }
        }
    }

    #[test]
    fn finalizer_applies_row_5_or_row_8_when_the_source_lives() {
        assert_eq!(
            finalize(finalizing(SourceStanding::Alive)),
            Finalize::ApplyTable {
                sync_declared: true
            }
        );
        let sync_removed = FinalizeInput {
            kind_declared: Some(false),
            ..finalizing(SourceStanding::Alive)
        };
        assert_eq!(
            finalize(sync_removed),
            Finalize::ApplyTable {
                sync_declared: false
            }
        );
    }

    #[test]
    fn finalizer_orphans_or_deletes_for_a_deleted_source_by_its_policy() {
        let orphan = FinalizeInput {
            orphan: true,
            ..finalizing(SourceStanding::Gone)
        };
        assert_eq!(finalize(orphan), Finalize::Orphan);
        assert_eq!(
            finalize(finalizing(SourceStanding::Gone)),
            Finalize::ApplyTable {
                sync_declared: true
            }
        );
    }
}
