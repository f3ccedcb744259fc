//! Where a [`crate::System`]'s API server comes from: an `arbor-kube-emu` the system starts
//! (with extra flags, such as an authorization mode), or a cluster that already runs, reached
//! through a kubeconfig. The controllers are local processes either way, so the same binaries
//! and flags run against both.
//!
//! On an existing cluster the system starts its controllers and nothing else: the cluster is
//! expected to serve Arbor's CRDs and hold `arbor-system` already, and whatever the system
//! makes there stays when it stops. The end-to-end tests prepare such a cluster and clean it
//! up after each test (arbor-testkit's `shared`).

use std::net::IpAddr;
use std::path::PathBuf;

/// The API server a system runs against.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// Start `arbor-kube-emu` with `--tls`, a token file and these extra flags.
    Emulator { flags: Vec<String> },
    /// Use a cluster that already runs.
    Existing(ExistingCluster),
}

/// A running cluster.
#[derive(Debug, Clone)]
pub struct ExistingCluster {
    /// Its kubeconfig (the current context is used).
    pub kubeconfig: PathBuf,
    /// An address of this machine the cluster's API server can open connections to, where
    /// arbor-webhook listens; `None` when nobody said, and then the webhook cannot run.
    pub webhook_host: Option<IpAddr>,
}

impl Default for ClusterSource {
    fn default() -> Self {
        ClusterSource::Emulator { flags: Vec::new() }
    }
}

impl ClusterSource {
    /// The existing cluster, when this is one.
    pub fn existing(&self) -> Option<&ExistingCluster> {
        match self {
            ClusterSource::Existing(cluster) => Some(cluster),
            ClusterSource::Emulator { .. } => None,
        }
    }

    /// Whether the system starts its own emulator.
    pub fn is_emulator(&self) -> bool {
        matches!(self, ClusterSource::Emulator { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_is_the_default_and_an_existing_cluster_says_so() {
        assert!(ClusterSource::default().is_emulator());
        let existing = ClusterSource::Existing(ExistingCluster {
            kubeconfig: PathBuf::from("/k"),
            webhook_host: None,
        });
        assert!(!existing.is_emulator());
        assert_eq!(
            existing
                .existing()
                .map(|cluster| cluster.kubeconfig.clone()),
            Some(PathBuf::from("/k"))
        );
    }
}
