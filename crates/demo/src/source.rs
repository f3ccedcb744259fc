//! Where a [`crate::System`]'s API server comes from: an `arbor-kube-emu` the system starts
//! (with extra flags, such as an authorization mode), or a cluster that already runs, reached
//! through a kubeconfig (a kind or k3d cluster at a developer's desk).
//!
//! The end-to-end suite picks the source from the environment ([`ClusterSource::from_env`]):
//! [`KUBECONFIG_ENV`] names the kubeconfig of an existing cluster; unset, every test starts
//! its own emulator as before. The controllers are local processes either way, so the same
//! binaries and flags run against both.
//!
//! An existing cluster differs from a per-test emulator in what the harness must take care of
//! (see [`crate::shared`]): it outlives the test and may hold other things, so every object a
//! test made goes again afterwards; several tests would see each other's objects through
//! cluster-wide watches, so they take turns; and the API server calls an admission webhook
//! from wherever it runs, so a loopback URL only works for an API server on this machine
//! ([`WEBHOOK_HOST_ENV`]).

use std::net::IpAddr;
use std::path::PathBuf;

use crate::Error;

/// The kubeconfig of an existing cluster the end-to-end tests use instead of the emulator.
pub const KUBECONFIG_ENV: &str = "ARBOR_E2E_KUBECONFIG";

/// An address of this machine the existing cluster's API server can open connections to
/// (the tests' arbor-webhook listens there): `127.0.0.1` for an API server on this machine,
/// the docker bridge's gateway for kind or k3d. Unset, tests that need the webhook skip.
pub const WEBHOOK_HOST_ENV: &str = "ARBOR_E2E_WEBHOOK_HOST";

/// The API server a system runs against.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    /// Start `arbor-kube-emu` with `--tls`, a token file and these extra flags.
    Emulator { flags: Vec<String> },
    /// Use a cluster that already runs.
    Existing(ExistingCluster),
}

/// A running cluster and what the harness needs to share it.
#[derive(Debug, Clone)]
pub struct ExistingCluster {
    /// Its kubeconfig (the current context is used).
    pub kubeconfig: PathBuf,
    /// Where arbor-webhook listens so that the API server reaches it; `None` when nobody
    /// said ([`WEBHOOK_HOST_ENV`]), and then the webhook cannot run.
    pub webhook_host: Option<IpAddr>,
    /// The directory of the committed CRD YAML (`charts/arbor/crds`), installed as a user
    /// installs them.
    pub crd_dir: PathBuf,
}

impl Default for ClusterSource {
    fn default() -> Self {
        ClusterSource::Emulator { flags: Vec::new() }
    }
}

impl ClusterSource {
    /// The existing cluster [`KUBECONFIG_ENV`] names, with the CRDs of `crd_dir`; otherwise
    /// an emulator with no extra flags. A set but empty variable counts as unset.
    pub fn from_env(crd_dir: PathBuf) -> Result<ClusterSource, Error> {
        let Some(kubeconfig) = std::env::var_os(KUBECONFIG_ENV).filter(|value| !value.is_empty())
        else {
            return Ok(ClusterSource::default());
        };
        let kubeconfig = PathBuf::from(kubeconfig);
        if !kubeconfig.is_file() {
            return Err(Error::Invalid {
                what: format!("{KUBECONFIG_ENV}={}", kubeconfig.display()),
                message: "no such file: it must name the kubeconfig of a running cluster"
                    .to_owned(),
            });
        }
        let webhook_host = match std::env::var(WEBHOOK_HOST_ENV) {
            Ok(host) if !host.is_empty() => Some(host.parse().map_err(|error| Error::Invalid {
                what: format!("{WEBHOOK_HOST_ENV}={host}"),
                message: format!("not an IP address of this machine: {error}"),
            })?),
            _ => None,
        };
        Ok(ClusterSource::Existing(ExistingCluster {
            kubeconfig,
            webhook_host,
            crd_dir,
        }))
    }

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
            crd_dir: PathBuf::from("/crds"),
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
