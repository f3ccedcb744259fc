//! The management action table of seeds/000 ("System Guarantees") and the "resource matches"
//! comparison it depends on.
//!
//! ## Model
//!
//! For each object that git declares or the cluster holds, gitsync asks three questions and acts
//! on the answer:
//!
//! 1. [`Control::of`] (in [`label`]): does the live object carry the management label? Arbor
//!    updates or deletes only objects that do ([`may_update_or_delete`]).
//! 2. [`compare`] (in [`matches`](mod@matches)): does the live object match its declaration?
//!    Declared-subset semantics, server-owned fields ignored, optionally restricted to a Sync's
//!    `compareFields`; the answer lists the differing [`FieldPath`]s for drift reports.
//! 3. [`decide`] (in [`action`]): the seed's table. Its input, [`Situation`], nests the columns so
//!    that the "N/A" cells cannot be built (no "matches" without a declared, labelled live
//!    object; no "has label" without a live object), and [`Situation::assess`] builds it from the
//!    declared and live objects. The [`Decision`] names the [`Action`] and the table [`Row`] that
//!    chose it, with a stable id and a reason for `Explain`.
//!
//! Flat (Faros) sources declare no Syncs; gitsync treats every kind of such a source as having a
//! Sync declared, so the table applies from its second column on.
//!
//! ## Seed rows and their tests
//!
//! Action table rows (columns: Sync Declared, Resource Declared, On Cluster, Has Label,
//! Resource Matches), table tests in `tests/sync_action_table.rs`, and the same row through
//! the running controller on arbor-kube-emu (`arbor-gitsync`'s `tests/`):
//!
//! | row | cells | action | test | through the running controller |
//! |---|---|---|---|---|
//! | 1 | yes yes yes yes yes | no action | `action_table_row_1_sync_yes_declared_yes_on_cluster_yes_label_yes_matches_yes_no_action` | `controller_writes::a_resync_of_an_unchanged_repository_makes_no_write`, `controller_table::explain_names_the_row_and_reason_for_rows_1_6_and_7` |
//! | 2 | yes yes yes yes no | update | `action_table_row_2_sync_yes_declared_yes_on_cluster_yes_label_yes_matches_no_updates_resource_to_match_git` | `controller_table::example_job_creator_is_updated_to_match_git`, `controller_writes::one_changed_object_is_exactly_one_object_write` |
//! | 3 | yes yes yes no N/A | no action | `action_table_row_3_sync_yes_declared_yes_on_cluster_yes_label_no_no_action` | `controller_table::row_3_declared_object_without_the_label_is_not_updated_and_reported_unmanaged` |
//! | 4 | yes yes no N/A N/A | create | `action_table_row_4_sync_yes_declared_yes_on_cluster_no_creates_resource_to_match_git` | `controller_table::example_shipping_admin_is_created` |
//! | 5 | yes no yes yes N/A | delete | `action_table_row_5_sync_yes_declared_no_on_cluster_yes_label_yes_deletes_resource_to_match_git` | `controller_table::example_quota_viewer_is_created_then_removed_when_deleted_from_git`, `controller_pruning::row_5_flat_source_deletes_the_last_object_of_a_kind_removed_from_git` |
//! | 6 | yes no yes no N/A | no action | `action_table_row_6_sync_yes_declared_no_on_cluster_yes_label_no_no_action` | `controller_table::example_pod_accountant_not_in_git_is_not_deleted_or_altered`, `controller_table::explain_names_the_row_and_reason_for_rows_1_6_and_7` |
//! | 7 | yes no no N/A N/A | no action | `action_table_row_7_sync_yes_declared_no_on_cluster_no_no_action` | `controller_table::explain_names_the_row_and_reason_for_rows_1_6_and_7` |
//! | 8 | no N/A N/A N/A N/A | no action | `action_table_row_8_sync_no_no_action` | `controller_table::row_8_object_whose_sync_is_removed_is_left_on_the_cluster` |
//!
//! The seed's examples, same file; through the running controller in `arbor-gitsync`'s
//! `tests/controller_table.rs` under the same names, but for `pod-creator`
//! (`example_pod_creators_match_in_every_descendant_then_are_removed_from_them`):
//!
//! | example | test |
//! |---|---|
//! | ClusterRole `pod-accountant` not in git, no label: not deleted or altered | `example_pod_accountant_not_in_git_is_not_deleted_or_altered` |
//! | ClusterRole `quota-viewer` added to git, later removed | `example_quota_viewer_is_created_then_removed_when_deleted_from_git` |
//! | Role `job-creator` labelled and in git | `example_job_creator_is_updated_to_match_git` |
//! | RoleBinding `pod-creator` inherited by descendants, modified, then removed | `example_pod_creator_in_every_descendant_is_updated_then_removed` |
//! | Role `secret-admin` created by hand, labelled later | `example_secret_admin_is_kept_until_labelled_then_deleted` |
//! | Role `shipping-admin` added to git | `example_shipping_admin_is_created` |
//!
//! The takeaways ("only delete or update ... management label applied", "only create ... no
//! existing matching resource") are the property tests in `tests/sync_properties.rs`:
//! `no_update_or_delete_without_the_management_label` and
//! `create_only_when_sync_and_resource_are_declared_and_nothing_is_on_the_cluster`.
//! The "resource matches" rules are shown table-driven in `tests/sync_matches.rs`.
//!
//! What a source may delete, and when (the Sync Declared column for flat sources, the
//! mass-prune budget over a window, deleting a source, management conflicts between sources),
//! is [`prune`]; its module docs map each rule to its unit test and to the test through the
//! running controller.
//!
//! What one round does as a whole — apply, delete, sweep, leave unmanaged, or stop at a guard —
//! is [`round::plan`], from the declared state, the inventory and the live objects; the
//! finalizer of a tracking object decides with [`round::finalize`].
//!
//! Where a declared object stands (in sync, drifted, pending, unmanaged, ignored, pruning) is
//! [`ObjectState::of`] its row, before or after the row's action: one table for the round's
//! records and for `Explain` (the table test is in [`state`]).

pub mod action;
pub mod label;
pub mod matches;
pub mod path;
pub mod prune;
pub mod round;
pub mod state;

pub use action::{
    Action, COLUMNS, Decision, DeclaredOnCluster, Row, Situation, UndeclaredOnCluster, decide,
};
pub use label::{Control, UnmanagedReason, may_update_or_delete};
pub use matches::{CompareFields, Comparison, Difference, compare, introduced, value_at};
pub use path::{FieldPath, InvalidFieldPath, PathSegment};
pub use state::{Moment, ObjectState};
