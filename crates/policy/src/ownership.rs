//! Ownership and watch scope of GitTracks and ClusterGitTracks (seeds/002, "Introducing
//! ClusterGitTracks").
//!
//! ## Model
//!
//! Every object a source declares is tracked by a GitTrackObject (namespaced kinds, in the
//! object's namespace) or a ClusterGitTrackObject (cluster-scoped kinds), owned by its source.
//! A GitTrack never owns a cluster-scoped object nor reaches into another namespace; a
//! ClusterGitTrack always owns ClusterGitTrackObjects and owns GitTrackObjects only under
//! `--clustergittrack-mode=IncludeNamespaced`.
//!
//! - [`modes`]: the three flags, parsed case-insensitively, with errors that list valid values.
//! - [`matrix`]: the Resource Ownership Matrix, [`may_own`]; the answer names its matrix row and
//!   the reason in the seed's words. The webhook judges ownerReferences with it.
//! - [`watch`]: both Controller Reconcile Matrices, and [`WatchScope::from_flags`], which
//!   combines the flags and refuses the combinations the seed rules out.
//! - [`mod@reference`]: [`OwningSourceKind::named_by`], which Arbor source an ownerReference names (group
//!   and kind), asked by the webhook and by gitsync; [`TrackingHolder::of`], whose a tracking
//!   object is (the source's, another controller's, nobody's); tests
//!   `tests/ownership_reference.rs`.
//! - [`apply`]: [`WatchScope::may_apply`], which gitsync asks for each declared object: the
//!   tracking object it becomes, or the reason it goes to `ignoredFiles`.
//!
//! ## Seed rows and their tests
//!
//! Resource Ownership Matrix, tests in `tests/ownership_matrix.rs`:
//!
//! | owner | namespace | ClusterGitTrack mode | owned | answer | test |
//! |---|---|---|---|---|---|
//! | GitTrack | Foo | N/A | GitTrackObject (NS: Foo) | Y | `ownership_matrix_gittrack_foo_owns_gittrackobject_in_foo` |
//! | GitTrack | Foo | N/A | GitTrackObject (NS: Bar) | N | `ownership_matrix_gittrack_foo_gittrackobject_in_bar_cross_namespace_never_allowed` |
//! | GitTrack | Foo | N/A | ClusterGitTrackObject | N | `ownership_matrix_gittrack_foo_gittrack_can_never_own_cluster_scoped_resource` |
//! | GitTrack | Bar | N/A | GitTrackObject (NS: Foo) | N | `ownership_matrix_gittrack_bar_gittrackobject_in_foo_cross_namespace_never_allowed` |
//! | GitTrack | Bar | N/A | GitTrackObject (NS: Bar) | Y | `ownership_matrix_gittrack_bar_owns_gittrackobject_in_bar` |
//! | GitTrack | Bar | N/A | ClusterGitTrackObject | N | `ownership_matrix_gittrack_bar_gittrack_can_never_own_cluster_scoped_resource` |
//! | ClusterGitTrack | N/A | ExcludeNamespaced | GitTrackObject (NS: Foo, Bar) | N | `ownership_matrix_clustergittrack_excludenamespaced_owns_no_gittrackobject` |
//! | ClusterGitTrack | N/A | ExcludeNamespaced | ClusterGitTrackObject | Y | `ownership_matrix_clustergittrack_excludenamespaced_clustergittracks_can_always_own_cgto` |
//! | ClusterGitTrack | N/A | IncludeNamespaced | GitTrackObject (NS: Foo, Bar) | Y | `ownership_matrix_clustergittrack_includenamespaced_owns_gittrackobjects_in_foo_and_bar` |
//! | ClusterGitTrack | N/A | IncludeNamespaced | ClusterGitTrackObject | Y | `ownership_matrix_clustergittrack_includenamespaced_clustergittracks_can_always_own_cgto` |
//!
//! The ClusterGitTrack row under `Disabled`, which the seed leaves out:
//! `clustergittrack_under_disabled_mode_keeps_cgto_and_owns_no_gittrackobject`.
//!
//! Properties (`tests/ownership_properties.rs`): `gittrack_never_owns_cluster_scoped_or_cross_namespace`,
//! `no_instance_applies_a_gittracks_object_outside_its_namespace`,
//! `applied_objects_are_always_watched_by_the_instance`.
//!
//! Controller Reconcile Matrices, tests in `tests/ownership_watch.rs`:
//!
//! | row | flags | GitTrack | GitTrackObject | ClusterGitTrack | ClusterGitTrackObject | test |
//! |---|---|---|---|---|---|---|
//! | A | `--clustergittrack-mode=IncludeNamespaced` | N | Y | Y | Y | `clustergittrack_mode_a_includenamespaced_watches_gittrackobject_clustergittrack_clustergittrackobject` |
//! | B | `--clustergittrack-mode=ExcludeNamespaced` | N | N | Y | Y | `clustergittrack_mode_b_excludenamespaced_watches_clustergittrack_clustergittrackobject` |
//! | C | `--clustergittrack-mode=Disabled` | N | N | N | N | `clustergittrack_mode_c_disabled_watches_nothing` |
//!
//! | row | flags | GitTrack (Foo) | GitTrackObject (Foo) | GitTrack (Bar) | GitTrackObject (Bar) | ClusterGitTrack | ClusterGitTrackObject | test |
//! |---|---|---|---|---|---|---|---|---|
//! | 1 | `--gittrack-mode=Enabled --namespace=""` | Y | Y | Y | Y | N | N | `gittrack_mode_1_enabled_no_namespace_watches_gittracks_and_gittrackobjects_in_foo_and_bar` |
//! | 2 | `--gittrack-mode=Enabled --namespace=foo` | Y | Y | N | N | N | N | `gittrack_mode_2_enabled_namespace_foo_watches_gittracks_and_gittrackobjects_in_foo_only` |
//! | 3 | `--gittrack-mode=Enabled --namespace=bar` | N | N | Y | Y | N | N | `gittrack_mode_3_enabled_namespace_bar_watches_gittracks_and_gittrackobjects_in_bar_only` |
//!
//! Flags (same file): `namespace_flag_is_for_use_with_gittrack_mode_enabled`,
//! `namespace_flag_is_refused_with_every_clustergittrack_mode_but_disabled` (as Faros refuses
//! them), `both_modes_disabled_watch_nothing_and_are_refused`, `default_flags_are_row_a`, and
//! the combinations of a GitTrack row with a ClusterGitTrack row.
//! Applying declared objects: `tests/ownership_apply.rs`.
//!
//! The same rules through the running components:
//!
//! | rule | test |
//! |---|---|
//! | `--namespace` only with `--clustergittrack-mode=Disabled`, naming both flags (gitsync) | `arbor-gitsync` `controller_ownership::namespace_with_any_clustergittrack_mode_but_disabled_is_refused_naming_both_flags` |
//! | the same refusal in the chart and the webhook | `arbor-chart-tests` `lint::schema_rejects_a_namespace_restriction_with_clustergittracks_served`, `webhook_flags::the_webhook_refuses_what_the_schema_refuses_for_a_namespace_restriction` |
//! | the "never" rows refused in every installation mode (webhook) | `arbor-webhook` `tests/ownership_modes.rs`, e2e `e2e_webhook::never_rows_are_refused_with_gittrack_mode_disabled` |
//! | Cross namespace never allowed when only an ownerReference's uid names the other namespace's GitTrack (webhook) | `arbor-webhook` `ownership_modes::cross_namespace_never_allowed_by_an_owner_uid_alone_in_every_mode`, e2e `e2e_webhook::never_rows_are_refused_with_gittrack_mode_disabled` |
//! | a GitTrack applies with its service account's permissions, never gitsync's | `arbor-gitsync` `controller_hostile::a_gittrack_applies_with_its_service_accounts_permissions` |
//! | a source whose spec does not decode is `Ready=False` with the field path; the others sync | `arbor-gitsync` `controller_visibility::a_source_that_does_not_decode_is_reported_and_the_others_sync` |
//! | a tracking object that does not decode stops nothing | `arbor-gitsync` `controller_visibility::a_tracking_object_that_does_not_decode_stops_nothing` |
//! | objects the matrix refuses leave the source `Degraded`, not `Ready` | `arbor-gitsync` `controller_visibility::objects_refused_by_the_ownership_matrix_leave_the_source_degraded_not_ready` |

pub mod apply;
pub mod matrix;
pub mod modes;
pub mod reference;
pub mod watch;

pub use apply::{IgnoreReason, ObjectScope};
pub use matrix::{MatrixRow, Owner, OwnershipRule, OwnershipVerdict, TrackingObject, may_own};
pub use modes::{ClusterGitTrackMode, FlagError, GitTrackMode, ModeFlags, NamespaceRestriction};
pub use reference::{OwnerRef, OwningSourceKind, TrackingHolder};
pub use watch::{NamespaceScope, WatchScope, WatchSet, Watched};
