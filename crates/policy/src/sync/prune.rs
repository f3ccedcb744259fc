//! Deleting what a source applied: the mass-prune budget, the plan for deleting a source, the
//! management conflict rule, and which kinds a flat source declares.
//!
//! ## Model
//!
//! A source's **inventory** is its tracking objects (GitTrackObjects, ClusterGitTrackObjects):
//! what it applied and may delete. Everything here decides from the inventory, never from what
//! happens to be on the cluster.
//!
//! - [`kind_has_sync`]: in a flat source every kind has a Sync declared (seeds/000 is written
//!   for hierarchical repositories with Syncs; Faros has none). A flat source's kinds are those
//!   of its declarations **and of its inventory**, so removing the last object of a kind from
//!   git deletes it (row 5) instead of leaving it (row 8). In a hierarchical source only its
//!   Syncs count: removing a Sync is row 8 for every object of the kind.
//! - [`PruneBudget::check`]: the mass-prune guard. A source may lose at most `max_fraction` of
//!   its high-water mark (the most objects it held) within one window (`--prune-window`), and
//!   never every namespace it holds in one round. Halving a source commit after commit
//!   (8 → 4 → 2 → 1) is therefore stopped at the second commit, not never. The window lives on
//!   the source's status ([`PruneWindow`]) so a restart does not reset it. The allow-mass-prune
//!   annotation lets one deleting round past and starts a new window from what is left.
//! - [`plan_deletion`]: deleting a source is a prune of its whole inventory. `Orphan` (the
//!   default) releases everything. `Delete` is held by the same budget (the whole inventory is
//!   more than any fraction below 1) until the annotation allows it. Objects another source
//!   declares are released to it, never deleted. Namespaces go last, after every other object,
//!   and a Namespace that still holds objects outside the inventory is released with the reason.
//! - [`claim`]: one object, one manager. The tracking object's controller ownerReference names
//!   the source that manages the object; a second source declaring it does not apply it and
//!   reports a management conflict naming the first (Config Sync's KNV1060).
//!
//! ## Seed rows and their tests
//!
//! | rule | unit test (here) | through the running controller (`crates/gitsync/tests/`) |
//! |---|---|---|
//! | seeds/000 Sync Declared, flat: the last object of a kind removed from git is deleted (row 5), prune guard as usual | `flat_kind_stays_declared_while_the_inventory_holds_it` | `controller_pruning.rs`: `row_5_flat_source_deletes_the_last_object_of_a_kind_removed_from_git` |
//! | seeds/000 row 8, hierarchical: a kind whose Sync is removed is left | `hierarchical_kinds_come_from_syncs_only` | `controller_table.rs`: `row_8_object_whose_sync_is_removed_is_left_on_the_cluster` |
//! | DESIGN "Deleting a source": `Orphan` by default | `orphan_releases_every_object` | `controller_pruning.rs`: `deleting_a_source_orphans_by_default` |
//! | `Delete` is a prune: held by the guard, with a condition, until the annotation allows it | `delete_is_blocked_by_the_budget_until_allowed` | `controller_pruning.rs`: `deleting_a_source_with_delete_policy_waits_for_the_allow_annotation` |
//! | `Delete` takes only labelled objects | (the action table) | `controller_safety.rs`: `deleting_a_source_deletes_only_its_labelled_objects` |
//! | Namespaces go last; one holding objects Arbor does not manage is left, with an Event | `namespaces_wait_for_every_other_object`, `a_namespace_holding_unmanaged_objects_is_released`, `the_cluster_s_own_objects_do_not_keep_a_namespace` | `controller_pruning.rs`: `deleting_a_source_deletes_namespaces_last_and_keeps_one_holding_unmanaged_objects` |
//! | Deleting a large source makes progress without a restart, shown in its status | (each step is planned from what is left) | `controller_pruning.rs`: `deleting_a_source_with_hundreds_of_objects_finishes_with_progress_in_its_status`, `deleting_a_source_larger_than_the_watch_history_finishes_without_a_restart`, `pruning_hundreds_of_objects_in_one_round_finalizes_every_tracking_object` |
//! | The mass-prune budget is over a window (8 → 4 → 2 → 1), and survives a restart | `halving_commit_after_commit_is_blocked_within_the_window`, `a_window_that_has_passed_starts_again_from_the_current_count`, `deleting_every_namespace_is_blocked_whatever_the_fraction` | `controller_pruning.rs`: `mass_prune_guard_counts_every_round_of_the_window_across_a_restart` |
//! | The allow annotation is consumed after the round it allowed | `the_annotation_allows_one_round_and_restarts_the_window` | `controller_pruning.rs`: `the_allow_annotation_is_removed_after_the_round_it_allowed` |
//! | Two sources declaring one object: a condition and an Event on the second, naming the first; never applied by both | `a_second_source_is_in_conflict_with_the_manager` | `controller_pruning.rs`: `a_second_source_declaring_an_object_reports_a_management_conflict` |
//! | Deleting or pruning one source never deletes an object another still declares | `objects_another_source_declares_are_released` | `controller_pruning.rs`: `pruning_or_deleting_one_source_keeps_an_object_another_declares` |
//! | A step that deletes, planned from the cached sources, is planned again from a fresh LIST of them ([`DeletionStep::deletes`], [`Freshness::to_confirm`](crate::sync::round::Freshness::to_confirm)) | `tests/sync_fresh_sources.rs` | `controller_shards.rs`: `a_deletion_is_confirmed_with_a_fresh_list_of_the_sources` |
//!
//! Where the seeds leave room: the annotation is consumed only by a round it actually let past
//! the guard (a round within budget leaves it), and that round starts a new window from what
//! is left; conflicts are reported on the second source (the first keeps managing the object,
//! so nothing changes for it); sources are known to each other through the instance's
//! registry, so a source watched by another instance is not seen as declaring anything.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use crate::layout::Layout;
use crate::object::{GroupKind, ObjectKey};
use crate::sync::round::Elsewhere;

/// Whether a source has a Sync declared for `kind` (seeds/000's first column).
///
/// `declared` is the parsed state's answer (a flat repository: the kinds of its objects; a
/// hierarchical one: its Syncs); `in_inventory` whether the source's tracking objects hold an
/// object of the kind.
pub fn kind_has_sync(layout: Layout, declared: bool, in_inventory: bool) -> bool {
    match layout {
        Layout::Flat => declared || in_inventory,
        Layout::Hierarchical => declared,
    }
}

/// The mass-prune window of a source, as kept on its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneWindow {
    /// When the window began.
    pub start: SystemTime,
    /// The most objects the source held within the window.
    pub high_water: usize,
    /// Objects pruned within the window.
    pub pruned: usize,
}

impl PruneWindow {
    /// The window after a round that leaves the source holding `held` objects: the high-water
    /// mark is the most the source held at any time in the window, the end of a round
    /// included. Counting only the inventory a round starts from would leave the mark of a
    /// source that just grew for the next round to raise, a status write of its own.
    #[must_use]
    pub fn after_round(self, held: usize) -> Self {
        Self {
            high_water: self.high_water.max(held),
            ..self
        }
    }
}

/// What a round is about to delete, against what the source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneCount {
    /// Objects in the inventory before the round.
    pub tracked: usize,
    /// Objects the round would delete.
    pub removals: usize,
    /// Namespaces in the inventory before the round.
    pub namespaces: usize,
    /// Of those, the ones the round would delete.
    pub namespaces_removed: usize,
}

/// The guard's configuration: `--max-prune-fraction` and `--prune-window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PruneBudget {
    pub max_fraction: f64,
    pub window: Duration,
}

/// The guard's answer, with the window to store after the round.
#[derive(Debug, Clone, PartialEq)]
pub enum PruneVerdict {
    /// The round may delete. `by_annotation`: only because of the allow-mass-prune annotation,
    /// which the round therefore consumes.
    Allowed {
        window: PruneWindow,
        by_annotation: bool,
    },
    /// Nothing may be deleted; the message says why.
    Blocked {
        window: PruneWindow,
        message: String,
    },
}

impl PruneVerdict {
    pub fn window(&self) -> PruneWindow {
        match self {
            Self::Allowed { window, .. } | Self::Blocked { window, .. } => *window,
        }
    }
}

impl PruneBudget {
    /// Judges a round at `now`; `previous` is the stored window, `allowed` the annotation.
    pub fn check(
        &self,
        previous: Option<PruneWindow>,
        count: PruneCount,
        now: SystemTime,
        allowed: bool,
    ) -> PruneVerdict {
        let current = previous
            .filter(|window| {
                now.duration_since(window.start)
                    .is_ok_and(|age| age < self.window)
            })
            .map_or(
                PruneWindow {
                    start: now,
                    high_water: count.tracked,
                    pruned: 0,
                },
                |window| PruneWindow {
                    high_water: window.high_water.max(count.tracked),
                    ..window
                },
            );
        if count.removals == 0 {
            return PruneVerdict::Allowed {
                window: current,
                by_annotation: false,
            };
        }
        let over = self.over_budget(current, count);
        match (over, allowed) {
            (None, _) => PruneVerdict::Allowed {
                window: PruneWindow {
                    pruned: current.pruned + count.removals,
                    ..current
                },
                by_annotation: false,
            },
            // An allowed mass prune is the new baseline: the next window counts from what is left.
            (Some(_), true) => PruneVerdict::Allowed {
                window: PruneWindow {
                    start: now,
                    high_water: count.tracked.saturating_sub(count.removals),
                    pruned: 0,
                },
                by_annotation: true,
            },
            (Some(message), false) => PruneVerdict::Blocked {
                window: current,
                message,
            },
        }
    }

    fn over_budget(&self, window: PruneWindow, count: PruneCount) -> Option<String> {
        if count.namespaces > 0 && count.namespaces_removed == count.namespaces {
            return Some(format!(
                "the round would delete all {} namespaces of the source",
                count.namespaces
            ));
        }
        let total = window.pruned + count.removals;
        // Counts are far below 2^52, so the conversions are exact.
        #[allow(clippy::cast_precision_loss)]
        let fraction = total as f64 / window.high_water.max(1) as f64;
        if fraction <= self.max_fraction {
            return None;
        }
        let earlier = if window.pruned == 0 {
            String::new()
        } else {
            format!(
                " ({} pruned earlier in the window of {})",
                window.pruned,
                describe(self.window)
            )
        };
        Some(format!(
            "the round would delete {} of the source's {} objects{earlier}: {total} of its \
             high-water mark of {} ({:.0}%, more than --max-prune-fraction {:.0}%)",
            count.removals,
            count.tracked,
            window.high_water,
            fraction * 100.0,
            self.max_fraction * 100.0
        ))
    }
}

fn describe(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds.is_multiple_of(3600) && seconds > 0 {
        format!("{}h", seconds / 3600)
    } else if seconds.is_multiple_of(60) && seconds > 0 {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

/// Who manages an object, from its tracking object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// No tracking object: the declaring source may take it.
    Free,
    /// The declaring source's own tracking object.
    Ours,
    /// Another source's: the declaring source leaves the object alone and reports the conflict.
    ManagedBy(String),
}

/// The conflict rule: `holder` is the source named by the tracking object's controller
/// ownerReference (as `kind/namespace/name`, with its uid), `declaring` the uid of the source
/// that declares the object now. The first source keeps the object until its tracking object
/// is gone (it stops declaring it, or is deleted); ownership never moves by a write.
pub fn claim(holder: Option<(&str, &str)>, declaring_uid: &str) -> Claim {
    match holder {
        None => Claim::Free,
        Some((_, uid)) if uid == declaring_uid => Claim::Ours,
        Some((source, _)) => Claim::ManagedBy(source.to_owned()),
    }
}

/// One entry of a source's inventory, for [`plan_deletion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryEntry {
    pub key: ObjectKey,
    /// Whether another source declares the object too (decided as for a finalizer,
    /// [`Elsewhere::of`]).
    pub elsewhere: Elsewhere,
    /// One source that declares it, to name when the object is left to it.
    pub declared_by: Option<String>,
}

impl InventoryEntry {
    fn is_namespace(&self) -> bool {
        is_namespace(&self.key.group_kind)
    }
}

/// Whether `kind` is the core Namespace kind.
pub fn is_namespace(kind: &GroupKind) -> bool {
    kind.group.is_empty() && kind.kind == "Namespace"
}

/// Objects every namespace holds without anyone declaring them (made by kube-controller-manager
/// and the API server), and Events, which record rather than configure: neither keeps a
/// Namespace from being deleted.
pub fn made_by_the_cluster(key: &ObjectKey) -> bool {
    let kind = &key.group_kind;
    let core = kind.group.is_empty();
    (core && kind.kind == "ServiceAccount" && key.name == "default")
        || (core && kind.kind == "ConfigMap" && key.name == "kube-root-ca.crt")
        || (kind.kind == "Event" && (core || kind.group == "events.k8s.io"))
}

/// Why an object is let go without being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// `deletionPolicy: Orphan`.
    Orphan,
    /// Another source declares it.
    DeclaredBy(String),
    /// A Namespace that holds objects outside the source's inventory (a few named).
    HoldsUnmanaged(Vec<ObjectKey>),
}

/// What to do with one inventory entry now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposal {
    /// Apply the action table with nothing declared: delete it if it carries the label.
    Delete,
    /// Let the tracking object go and leave the object.
    Release(Release),
}

/// The next step of deleting a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionStep {
    /// Nothing may be deleted yet; the source keeps its finalizer.
    Blocked(String),
    /// Whether other sources declare these objects is not known (the other sources could not
    /// be seen): nothing is decided, the source keeps its finalizer and looks again. Deleting
    /// now could take an object another source holds.
    WaitForOtherSources(Vec<ObjectKey>),
    /// These entries now; `waiting` Namespaces wait until the other objects are gone.
    Proceed {
        now: Vec<(ObjectKey, Disposal)>,
        waiting: usize,
    },
}

impl DeletionStep {
    /// Whether carrying it out deletes an object now (to be confirmed from a fresh list of the
    /// other sources first, [`Freshness::to_confirm`](crate::sync::round::Freshness::to_confirm)).
    pub fn deletes(&self) -> bool {
        match self {
            Self::Proceed { now, .. } => now
                .iter()
                .any(|(_, disposal)| *disposal == Disposal::Delete),
            Self::Blocked(_) | Self::WaitForOtherSources(_) => false,
        }
    }
}

/// What [`plan_deletion`] needs to know.
#[derive(Debug, Clone)]
pub struct DeletionInput<'a> {
    /// `deletionPolicy: Delete` (else `Orphan`).
    pub delete: bool,
    /// The allow-mass-prune annotation.
    pub allowed: bool,
    pub max_fraction: f64,
    /// The source's high-water mark (its inventory size when it has none).
    pub high_water: usize,
    /// The inventory left.
    pub entries: &'a [InventoryEntry],
    /// For namespaces in the inventory: objects in them outside the inventory that the cluster
    /// did not make. Only read once every other object is gone.
    pub foreign: &'a BTreeMap<String, BTreeSet<ObjectKey>>,
}

/// Plans the next step of deleting a source (see the [module docs](self)).
pub fn plan_deletion(input: &DeletionInput<'_>) -> DeletionStep {
    if !input.delete {
        return DeletionStep::Proceed {
            now: input
                .entries
                .iter()
                .map(|entry| (entry.key.clone(), Disposal::Release(Release::Orphan)))
                .collect(),
            waiting: 0,
        };
    }
    let unknown: Vec<ObjectKey> = input
        .entries
        .iter()
        .filter(|entry| entry.elsewhere == Elsewhere::Unknown)
        .map(|entry| entry.key.clone())
        .collect();
    if !unknown.is_empty() {
        return DeletionStep::WaitForOtherSources(unknown);
    }
    if !input.allowed {
        let deleted = |entry: &&InventoryEntry| entry.elsewhere != Elsewhere::Declared;
        let count = PruneCount {
            tracked: input.entries.len(),
            removals: input.entries.iter().filter(deleted).count(),
            namespaces: input.entries.iter().filter(|e| e.is_namespace()).count(),
            namespaces_removed: input
                .entries
                .iter()
                .filter(deleted)
                .filter(|e| e.is_namespace())
                .count(),
        };
        let budget = PruneBudget {
            max_fraction: input.max_fraction,
            window: Duration::MAX,
        };
        let window = PruneWindow {
            start: SystemTime::UNIX_EPOCH,
            high_water: input.high_water.max(count.tracked),
            pruned: 0,
        };
        if let Some(message) = budget.over_budget(window, count) {
            return DeletionStep::Blocked(format!(
                "deletionPolicy is Delete and {}",
                message.replacen("the round", "deleting the source", 1)
            ));
        }
    }
    let disposal = |entry: &InventoryEntry| match entry.elsewhere {
        Elsewhere::Declared => Disposal::Release(Release::DeclaredBy(
            entry
                .declared_by
                .clone()
                .unwrap_or_else(|| "another source".to_owned()),
        )),
        Elsewhere::Nobody | Elsewhere::Unknown => Disposal::Delete,
    };
    let (namespaces, objects): (Vec<&InventoryEntry>, Vec<&InventoryEntry>) =
        input.entries.iter().partition(|entry| entry.is_namespace());
    if !objects.is_empty() {
        return DeletionStep::Proceed {
            now: objects
                .into_iter()
                .map(|entry| (entry.key.clone(), disposal(entry)))
                .collect(),
            waiting: namespaces.len(),
        };
    }
    let now = namespaces
        .into_iter()
        .map(|entry| {
            let foreign = input
                .foreign
                .get(entry.key.name.as_str())
                .map(|keys| keys.iter().take(3).cloned().collect::<Vec<_>>())
                .unwrap_or_default();
            let decided = match disposal(entry) {
                Disposal::Delete if !foreign.is_empty() => {
                    Disposal::Release(Release::HoldsUnmanaged(foreign))
                }
                other => other,
            };
            (entry.key.clone(), decided)
        })
        .collect();
    DeletionStep::Proceed { now, waiting: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn budget() -> PruneBudget {
        PruneBudget {
            max_fraction: 0.5,
            window: HOUR,
        }
    }

    fn count(tracked: usize, removals: usize) -> PruneCount {
        PruneCount {
            tracked,
            removals,
            ..PruneCount::default()
        }
    }

    fn key(kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            group_kind: GroupKind::new("", kind),
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    fn entry(kind: &str, namespace: Option<&str>, name: &str) -> InventoryEntry {
        InventoryEntry {
            key: key(kind, namespace, name),
            elsewhere: Elsewhere::Nobody,
            declared_by: None,
        }
    }

    #[test]
    fn flat_kind_stays_declared_while_the_inventory_holds_it() {
        // (layout, declared by the state, held by the inventory) -> Sync declared
        let table = [
            (Layout::Flat, true, true, true),
            (Layout::Flat, true, false, true),
            (Layout::Flat, false, true, true),
            (Layout::Flat, false, false, false),
        ];
        for (layout, declared, held, expected) in table {
            assert_eq!(
                kind_has_sync(layout, declared, held),
                expected,
                "{layout:?} {declared} {held}"
            );
        }
    }

    #[test]
    fn hierarchical_kinds_come_from_syncs_only() {
        assert!(kind_has_sync(Layout::Hierarchical, true, false));
        assert!(!kind_has_sync(Layout::Hierarchical, false, true));
    }

    #[test]
    fn pruning_up_to_the_fraction_is_allowed_and_counted() {
        let verdict = budget().check(None, count(10, 5), at(0), false);
        assert_eq!(
            verdict,
            PruneVerdict::Allowed {
                window: PruneWindow {
                    start: at(0),
                    high_water: 10,
                    pruned: 5
                },
                by_annotation: false
            }
        );
    }

    #[test]
    fn pruning_more_than_the_fraction_is_blocked_until_allowed() {
        let blocked = budget().check(None, count(10, 6), at(0), false);
        assert!(
            matches!(&blocked, PruneVerdict::Blocked { message, .. } if message.contains("6 of the source's 10")),
            "{blocked:?}"
        );
        assert!(matches!(
            budget().check(None, count(10, 6), at(0), true),
            PruneVerdict::Allowed {
                by_annotation: true,
                ..
            }
        ));
    }

    #[test]
    fn halving_commit_after_commit_is_blocked_within_the_window() {
        // 8 -> 4 -> 2 -> 1, a minute apart: (tracked, removals, allowed?)
        let rounds = [(8, 4, true), (4, 2, false)];
        let mut window = None;
        for (minute, (tracked, removals, allowed)) in rounds.into_iter().enumerate() {
            let verdict = budget().check(
                window,
                count(tracked, removals),
                at(60 * minute as u64),
                false,
            );
            assert_eq!(
                matches!(verdict, PruneVerdict::Allowed { .. }),
                allowed,
                "round {minute}: {verdict:?}"
            );
            window = Some(verdict.window());
        }
        let PruneVerdict::Blocked { message, window } =
            budget().check(window, count(4, 2), at(180), false)
        else {
            panic!("still blocked")
        };
        assert!(message.contains("4 pruned earlier"), "{message}");
        assert_eq!((window.high_water, window.pruned), (8, 4));
    }

    #[test]
    fn the_high_water_mark_counts_what_a_round_leaves_the_source_holding() {
        // A new source: the round starts from nothing and creates ten objects.
        let window = budget().check(None, count(0, 0), at(0), false).window();
        assert_eq!(window.high_water, 0);
        let after = window.after_round(10);
        assert_eq!((after.high_water, after.pruned), (10, 0));
        // The next round starts from those ten and keeps the window as it is.
        assert_eq!(
            budget()
                .check(Some(after), count(10, 0), at(60), false)
                .window(),
            after
        );
        // A round that pruned lowers nothing: the mark is the most the source held.
        assert_eq!(after.after_round(4).high_water, 10);
    }

    #[test]
    fn a_window_that_has_passed_starts_again_from_the_current_count() {
        let stored = PruneWindow {
            start: at(0),
            high_water: 8,
            pruned: 4,
        };
        // Within the hour the stored window (as read back after a restart) still counts.
        assert!(matches!(
            budget().check(Some(stored), count(4, 2), at(3599), false),
            PruneVerdict::Blocked { .. }
        ));
        let verdict = budget().check(Some(stored), count(4, 2), at(3600), false);
        assert_eq!(
            verdict,
            PruneVerdict::Allowed {
                window: PruneWindow {
                    start: at(3600),
                    high_water: 4,
                    pruned: 2
                },
                by_annotation: false
            }
        );
    }

    #[test]
    fn the_annotation_allows_one_round_and_restarts_the_window() {
        let stored = PruneWindow {
            start: at(0),
            high_water: 8,
            pruned: 4,
        };
        let verdict = budget().check(Some(stored), count(4, 2), at(60), true);
        assert_eq!(
            verdict,
            PruneVerdict::Allowed {
                window: PruneWindow {
                    start: at(60),
                    high_water: 2,
                    pruned: 0
                },
                by_annotation: true
            }
        );
        // A round within budget does not use (or consume) the annotation.
        assert!(matches!(
            budget().check(None, count(10, 1), at(0), true),
            PruneVerdict::Allowed {
                by_annotation: false,
                ..
            }
        ));
    }

    #[test]
    fn deleting_every_namespace_is_blocked_whatever_the_fraction() {
        let all_namespaces = PruneCount {
            tracked: 100,
            removals: 2,
            namespaces: 2,
            namespaces_removed: 2,
        };
        assert!(matches!(
            budget().check(None, all_namespaces, at(0), false),
            PruneVerdict::Blocked { message, .. } if message.contains("all 2 namespaces")
        ));
    }

    #[test]
    fn a_second_source_is_in_conflict_with_the_manager() {
        let table = [
            (None, "b", Claim::Free),
            (Some(("GitTrack/shop/a", "a")), "a", Claim::Ours),
            (
                Some(("GitTrack/shop/a", "a")),
                "b",
                Claim::ManagedBy("GitTrack/shop/a".into()),
            ),
        ];
        for (holder, declaring, expected) in table {
            assert_eq!(claim(holder, declaring), expected);
        }
    }

    fn no_foreign() -> BTreeMap<String, BTreeSet<ObjectKey>> {
        BTreeMap::new()
    }

    #[test]
    fn orphan_releases_every_object() {
        let entries = [
            entry("ConfigMap", Some("a"), "x"),
            entry("Namespace", None, "a"),
        ];
        let foreign = no_foreign();
        let step = plan_deletion(&DeletionInput {
            delete: false,
            allowed: false,
            max_fraction: 0.5,
            high_water: 2,
            entries: &entries,
            foreign: &foreign,
        });
        let DeletionStep::Proceed { now, waiting } = step else {
            panic!("orphan never waits")
        };
        assert_eq!(waiting, 0);
        assert!(
            now.iter()
                .all(|(_, d)| *d == Disposal::Release(Release::Orphan))
        );
        assert_eq!(now.len(), 2);
    }

    #[test]
    fn delete_is_blocked_by_the_budget_until_allowed() {
        let entries = [
            entry("ConfigMap", Some("a"), "x"),
            entry("ConfigMap", Some("a"), "y"),
        ];
        let foreign = no_foreign();
        let mut input = DeletionInput {
            delete: true,
            allowed: false,
            max_fraction: 0.5,
            high_water: 2,
            entries: &entries,
            foreign: &foreign,
        };
        assert!(matches!(
            plan_deletion(&input),
            DeletionStep::Blocked(message) if message.contains("deleting the source would delete 2")
        ));
        input.max_fraction = 1.0;
        assert!(matches!(
            plan_deletion(&input),
            DeletionStep::Proceed { .. }
        ));
        input.max_fraction = 0.5;
        input.allowed = true;
        assert_eq!(
            plan_deletion(&input),
            DeletionStep::Proceed {
                now: vec![
                    (entries[0].key.clone(), Disposal::Delete),
                    (entries[1].key.clone(), Disposal::Delete)
                ],
                waiting: 0
            }
        );
    }

    #[test]
    fn namespaces_wait_for_every_other_object() {
        let entries = [
            entry("Namespace", None, "a"),
            entry("ConfigMap", Some("a"), "x"),
        ];
        let foreign = no_foreign();
        let input = DeletionInput {
            delete: true,
            allowed: true,
            max_fraction: 0.5,
            high_water: 2,
            entries: &entries,
            foreign: &foreign,
        };
        assert_eq!(
            plan_deletion(&input),
            DeletionStep::Proceed {
                now: vec![(entries[1].key.clone(), Disposal::Delete)],
                waiting: 1
            }
        );
        let last = [entry("Namespace", None, "a")];
        assert_eq!(
            plan_deletion(&DeletionInput {
                entries: &last,
                ..input
            }),
            DeletionStep::Proceed {
                now: vec![(last[0].key.clone(), Disposal::Delete)],
                waiting: 0
            }
        );
    }

    #[test]
    fn a_namespace_holding_unmanaged_objects_is_released() {
        let entries = [entry("Namespace", None, "a"), entry("Namespace", None, "b")];
        let kept = key("ConfigMap", Some("a"), "hand-made");
        let foreign = BTreeMap::from([("a".to_owned(), BTreeSet::from([kept.clone()]))]);
        let step = plan_deletion(&DeletionInput {
            delete: true,
            allowed: true,
            max_fraction: 0.5,
            high_water: 2,
            entries: &entries,
            foreign: &foreign,
        });
        assert_eq!(
            step,
            DeletionStep::Proceed {
                now: vec![
                    (
                        entries[0].key.clone(),
                        Disposal::Release(Release::HoldsUnmanaged(vec![kept]))
                    ),
                    (entries[1].key.clone(), Disposal::Delete),
                ],
                waiting: 0
            }
        );
    }

    #[test]
    fn a_deletion_waits_while_other_sources_are_unknown() {
        // (policy Delete, whether others declare the object) -> the step
        let object = key("ConfigMap", Some("a"), "x");
        let released = |name: &str| Disposal::Release(Release::DeclaredBy(name.to_owned()));
        let proceed = |disposal| DeletionStep::Proceed {
            now: vec![(object.clone(), disposal)],
            waiting: 0,
        };
        let table = [
            (
                true,
                Elsewhere::Unknown,
                DeletionStep::WaitForOtherSources(vec![object.clone()]),
            ),
            (true, Elsewhere::Nobody, proceed(Disposal::Delete)),
            (true, Elsewhere::Declared, proceed(released("GitTrack/a/b"))),
            (
                false,
                Elsewhere::Unknown,
                proceed(Disposal::Release(Release::Orphan)),
            ),
        ];
        let foreign = no_foreign();
        for (delete, elsewhere, expected) in table {
            let entries = [InventoryEntry {
                key: object.clone(),
                elsewhere,
                declared_by: (elsewhere == Elsewhere::Declared).then(|| "GitTrack/a/b".into()),
            }];
            let step = plan_deletion(&DeletionInput {
                delete,
                allowed: true,
                max_fraction: 1.0,
                high_water: 1,
                entries: &entries,
                foreign: &foreign,
            });
            assert_eq!(step, expected, "delete {delete}, {elsewhere:?}");
        }
    }

    #[test]
    fn objects_another_source_declares_are_released() {
        let mut shared = entry("ConfigMap", Some("a"), "via-ssh");
        shared.elsewhere = Elsewhere::Declared;
        shared.declared_by = Some("GitTrack/a/second".into());
        let entries = [shared.clone()];
        let foreign = no_foreign();
        // Released objects are not deletions: the budget does not hold them.
        let step = plan_deletion(&DeletionInput {
            delete: true,
            allowed: false,
            max_fraction: 0.5,
            high_water: 1,
            entries: &entries,
            foreign: &foreign,
        });
        assert_eq!(
            step,
            DeletionStep::Proceed {
                now: vec![(
                    shared.key,
                    Disposal::Release(Release::DeclaredBy("GitTrack/a/second".into()))
                )],
                waiting: 0
            }
        );
    }

    #[test]
    fn the_cluster_s_own_objects_do_not_keep_a_namespace() {
        assert!(made_by_the_cluster(&key(
            "ServiceAccount",
            Some("a"),
            "default"
        )));
        assert!(made_by_the_cluster(&key(
            "ConfigMap",
            Some("a"),
            "kube-root-ca.crt"
        )));
        assert!(!made_by_the_cluster(&key(
            "ConfigMap",
            Some("a"),
            "settings"
        )));
        assert!(!made_by_the_cluster(&key(
            "ServiceAccount",
            Some("a"),
            "builder"
        )));
    }
}
