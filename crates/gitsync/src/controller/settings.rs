//! What an instance is configured to do, from its flags.

use std::path::PathBuf;
use std::time::Duration;

use arbor_policy::keys::{Keys, ManagementLabel};
use arbor_policy::ownership::WatchScope;

use crate::fetch::FetchSettings;

/// The controllers' configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What this instance watches and the ClusterGitTrack mode ownership is judged by.
    pub scope: WatchScope,
    pub label: ManagementLabel,
    /// Arbor's annotation keys (source, declared-in, allow-mass-prune).
    pub keys: Keys,
    /// The largest fraction of a source's objects one round may delete without the
    /// allow-mass-prune annotation.
    pub max_prune_fraction: f64,
    /// The window the mass-prune budget is counted over (`--prune-window`).
    pub prune_window: Duration,
    /// How often every object is compared with git even when the commit did not change.
    pub resync_period: Duration,
    /// Writes in flight to the API server at once, over all sources (`--max-concurrent-writes`).
    pub max_concurrent_writes: usize,
    pub cache_dir: PathBuf,
    pub fetch: FetchSettings,
    /// How long to wait for the kinds of a newly applied CustomResourceDefinition to be served.
    pub crd_patience: Duration,
    /// The ServiceAccount (of its own namespace) a GitTrack without `spec.serviceAccountName`
    /// applies as.
    pub default_service_account: Option<String>,
    /// Whether a GitTrack must apply as a ServiceAccount (its own or the default).
    pub require_service_account: bool,
    /// How many shards the sources are shared in between replicas (`--shards`).
    pub shards: u32,
}
