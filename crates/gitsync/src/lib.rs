//! # arbor-gitsync
//!
//! Keeps a cluster in the state that git declares. Sources are GitTrack (namespaced) and
//! ClusterGitTrack (cluster-scoped) objects; each one goes through four stages every round,
//! each in its own module.
//!
//! 1. **Fetch** ([`fetch`]): fetch the repository with git2 into the source's cache directory
//!    (https with basic or token auth, ssh with a deploy key and known_hosts, and file:// only
//!    with `--allow-file-repositories`, never into the cache) and check
//!    out the tree of one commit at its subPath.
//! 2. **Parse** ([`arbor_source`], its own crate, shared with arborctl): from that directory to
//!    the state it declares, all or nothing: a
//!    [`DeclaredState`](arbor_policy::layout::DeclaredState) or every
//!    [`SourceError`](arbor_policy::layout::SourceError) found, each with its stable code, file
//!    and object.
//! 3. **Plan** ([`controller::plan`]): discovery says whether each declared kind is served and
//!    namespaced, and the ownership matrix of seeds/002
//!    ([`WatchScope`](arbor_policy::ownership::WatchScope)) says whether the object becomes a
//!    GitTrackObject, a ClusterGitTrackObject, or an entry of `status.ignoredFiles`.
//! 4. **Apply** ([`apply`]): for each object, the action table of seeds/000
//!    ([`arbor_policy::sync::decide`]) decides from Sync declared / resource declared / on
//!    cluster / has management label / matches; [`apply::Applier`] carries the decision out by
//!    server-side apply under the `arbor-gitsync` field manager, or by a delete guarded by uid
//!    and resourceVersion preconditions.
//!
//! The [`controller`] module runs these stages as rounds, one reconciler per source kind:
//! tracking objects with their finalizer, pruning, the source's status and each tracking
//! object's `ObjectInSync` condition (both written only when they change), Events and metrics.
//! [`grpc`] serves `SyncService` (status, managed objects, Explain, TriggerSync, ReportDrift,
//! GetDeclared) from the controllers' registry. [`run`] is the process: flags, the kube client,
//! the admin server (/metrics, /healthz, /readyz), leader election, the controllers and the gRPC
//! server, and graceful shutdown; `main.rs` only calls it.
//!
//! ## Safety rules
//!
//! - Nothing without the management label is ever updated or deleted (seeds/000); an existing
//!   unlabelled object that git declares is reported (`ARB3006`, `ObjectInSync=False`,
//!   reason `Unmanaged`) and left alone.
//! - Applied objects carry no ownerReference, so garbage collection cannot bypass that rule;
//!   deletion goes through the finalizer of the (Cluster)GitTrackObject, which applies the
//!   table.
//! - A commit that does not parse deletes nothing: the source keeps its last good state.
//! - The mass-prune guard: within `--prune-window` (default 1h) a source may lose at most
//!   `--max-prune-fraction` of its high-water mark (the most objects it held in the window,
//!   kept on its status so a restart does not reset it), and never all of its namespaces in one
//!   round. A round over that changes nothing until the source carries the allow-mass-prune
//!   annotation (`ARB3005`), which allows that one round and is then removed, with an Event.
//! - Deleting a source is a prune of its inventory. Sources carry gitsync's finalizer;
//!   `deletionPolicy: Orphan` (the default) leaves every object, `Delete` waits for the
//!   allow-mass-prune annotation (`ARB3021`, `Stalled` reason `DeletionBlocked`), then deletes
//!   Namespaces last and leaves one that holds objects the source did not apply (Event
//!   `NamespaceKept`). Progress is on `status.deletion`.
//! - One object, one manager: a second source declaring an object that another source's
//!   tracking object holds does not apply it and reports a management conflict (`ARB3020`,
//!   `Ready=False` reason `ManagementConflict`, an Event). Pruning or deleting a source never
//!   deletes an object another source declares; that source takes it over.
//! - A kind the cluster does not serve is an error on that kind alone (`ARB3003`); the rest of
//!   the source syncs.
//! - A GitTrack never owns cluster-scoped objects nor reaches into another namespace; what an
//!   instance watches follows `--gittrack-mode`, `--clustergittrack-mode` and `--namespace`
//!   exactly as seeds/002's matrices say.
//! - A round over an unchanged repository writes nothing: objects, tracking objects and
//!   statuses are written only when they differ.

pub mod apply;
pub mod controller;
pub mod fetch;
pub mod grpc;
pub mod peer_replicas;
pub mod run;
