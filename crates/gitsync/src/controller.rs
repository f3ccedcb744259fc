//! The GitTrack and ClusterGitTrack controllers.
//!
//! ## Model
//!
//! One **round** ([`round`]) brings one source in line with git:
//!
//! 1. read the source's credentials Secret and fetch the repository (git2, in `spawn_blocking`);
//! 2. parse the checkout in the source's layout. A tree with errors keeps the last good state:
//!    the round applies that state but deletes nothing, and reports every error with its code;
//! 3. plan ([`plan`]): for each declared object, discovery says whether its kind is namespaced,
//!    and [`WatchScope::may_apply`](arbor_policy::ownership::WatchScope::may_apply) (the
//!    ownership matrix of seeds/002) says which tracking object it becomes or why it goes to
//!    `status.ignoredFiles`;
//! 4. apply: CustomResourceDefinitions and Namespaces first (then wait until the new kinds are
//!    served), then everything else. Each object gets its GitTrackObject or
//!    ClusterGitTrackObject (owned by the source, carrying the gitsync finalizer), then the
//!    action table of seeds/000 decides, through [`crate::apply::Applier`];
//! 5. prune, as [`round::plan`](arbor_policy::sync::round::plan) decides before anything is
//!    applied (what to delete and sweep, and whether a failed parse, `prune: false` or the
//!    guard stops it): tracking objects whose declaration is gone are deleted; their finalizer
//!    ([`tracking`], deciding with [`finalize`](arbor_policy::sync::round::finalize)) applies
//!    the table (delete only what carries the management label, and
//!    nothing another source declares). Labelled objects of declared kinds that no declaration
//!    and no tracking object explains (seeds/000's `secret-admin`) are deleted by the table
//!    directly. The prune guard
//!    ([`PruneBudget`](arbor_policy::sync::prune::PruneBudget)) stops a round that would take
//!    the source over `--max-prune-fraction` of its high-water mark within `--prune-window`,
//!    or delete all of its namespaces, until the source carries the allow-mass-prune
//!    annotation, which that round then consumes;
//! 6. status ([`status`]) by server-side apply on the status subresource, written only when it
//!    changed, Events, metrics; each tracking object's `ObjectInSync` condition
//!    ([`object_status`]) likewise, right after its object was acted on.
//!
//! A declared object whose tracking object another source holds is a management conflict: it
//! is not applied, and the source reports it ([`claim`](arbor_policy::sync::prune::claim)).
//! Deleting a source is [`deletion`]: its finalizer holds it until its inventory is disposed of
//! as [`plan_deletion`](arbor_policy::sync::prune::plan_deletion) says.
//!
//! A round reads its source's tracking objects from the finalizer's watch, not with a LIST
//! ([`tracking_store`]): only once that watch shows every write this replica made before, so a
//! round right after another never acts on a copy that misses the last one's creates; the
//! inventory and the live objects are read side by side.
//!
//! A preview ([`preview`], `SyncService.Preview`, `arborctl diff`) observes what a round
//! observes and asks the same plan about a revision or sent files, deciding every declared
//! object; it writes nothing.
//!
//! A round that finds the same commit as the last one, within `--resync-period` of the last full
//! comparison and without a request (`TriggerSync`, `ReportDrift`), does nothing but the fetch.
//!
//! Which sources an instance reconciles is [`WatchScope`](arbor_policy::ownership::WatchScope)'s
//! answer to `--gittrack-mode`, `--clustergittrack-mode` and `--namespace` ([`reconcile`]),
//! and, with `--shards`, whether this replica holds the source's shard ([`shard`]).

pub mod credentials;
pub mod deletion;
pub mod error;
pub mod fetch_and_parse;
pub mod held_state;
pub mod identity;
pub mod live_objects;
pub mod metrics;
pub mod notice;
pub mod object_status;
mod paged_list;
pub mod plan;
pub mod preview;
pub mod reconcile;
pub mod registry;
pub mod round;
pub mod settings;
pub mod shard;
pub mod shared_values;
pub mod source_cache;
pub mod source_handle;
pub mod status;
pub mod tracking;
pub mod tracking_record;
pub mod tracking_store;

use std::sync::Arc;

use kube::runtime::events::Recorder;

use crate::apply::Applier;
use crate::fetch::Fetcher;

pub use error::ControllerError;
pub use registry::Registry;
pub use settings::Settings;

/// Everything a reconciler needs, shared by all of them.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub settings: Arc<Settings>,
    pub fetcher: Fetcher,
    pub applier: Applier,
    /// Permits for writes in flight, `--max-concurrent-writes` of them, shared by every round
    /// and the finalizers: however many sources sync at once, the API server sees at most that
    /// many of gitsync's writes.
    pub writes: Arc<tokio::sync::Semaphore>,
    /// Clients acting as GitTracks' service accounts ([`identity`]).
    pub impersonation: Arc<identity::Impersonation>,
    pub registry: Arc<Registry>,
    /// The tracking objects as the finalizer's watches hold them, which rounds read their
    /// inventories from ([`tracking_store`]).
    pub tracking: Arc<tracking_store::TrackingStores>,
    pub metrics: Arc<metrics::Metrics>,
    pub recorder: Recorder,
    /// The shards whose sources this replica syncs ([`shard`]).
    pub shards: arbor_runtime::Shards,
    /// Every source in scope as the cluster reports it, whatever its shard ([`source_cache`]).
    pub sources: Arc<source_cache::SourceCaches>,
    /// Cancelled when this replica begins to stop: what may take long before a round's first
    /// write (its git fetch) is raced against it.
    pub stopping: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
