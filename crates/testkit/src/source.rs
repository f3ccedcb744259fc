//! The end-to-end suite's existing cluster: which one, from the environment, and what the
//! harness needs to share it between tests ([`crate::shared`]).
//!
//! [`KUBECONFIG_ENV`] names the kubeconfig of an existing cluster (a kind or k3d cluster at a
//! developer's desk); unset, every test starts its own emulator. An existing cluster differs
//! from a per-test emulator in what the harness must take care of: it outlives the test and
//! may hold other things, so every object a test made goes again afterwards; several tests
//! would see each other's objects through cluster-wide watches, so they take turns; and the
//! API server calls an admission webhook from wherever it runs, so a loopback URL only works
//! for an API server on this machine ([`WEBHOOK_HOST_ENV`]).

use std::net::IpAddr;
use std::path::PathBuf;

use arbor_demo::Error;
pub use arbor_demo::source::{ClusterSource, ExistingCluster};

/// The kubeconfig of an existing cluster the end-to-end tests use instead of the emulator.
pub const KUBECONFIG_ENV: &str = "ARBOR_E2E_KUBECONFIG";

/// An address of this machine the existing cluster's API server can open connections to
/// (the tests' arbor-webhook listens there): `127.0.0.1` for an API server on this machine,
/// the docker bridge's gateway for kind or k3d. Unset, tests that need the webhook skip.
pub const WEBHOOK_HOST_ENV: &str = "ARBOR_E2E_WEBHOOK_HOST";

/// An existing cluster the tests share, and the CRDs a test installs on it.
#[derive(Debug, Clone)]
pub struct SharedCluster {
    pub cluster: ExistingCluster,
    /// The directory of the committed CRD YAML (`charts/arbor/crds`), installed as a user
    /// installs them.
    pub crd_dir: PathBuf,
}

impl SharedCluster {
    /// The existing cluster [`KUBECONFIG_ENV`] names, with the CRDs of `crd_dir`; `None`
    /// when it is unset (a set but empty variable counts as unset).
    pub fn from_env(crd_dir: PathBuf) -> Result<Option<SharedCluster>, Error> {
        let Some(kubeconfig) = std::env::var_os(KUBECONFIG_ENV).filter(|value| !value.is_empty())
        else {
            return Ok(None);
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
            Ok(host) if !host.is_empty() => Some(parse_webhook_host(&host)?),
            _ => None,
        };
        Ok(Some(SharedCluster {
            cluster: ExistingCluster {
                kubeconfig,
                webhook_host,
            },
            crd_dir,
        }))
    }

    /// The system's [`ClusterSource`] for it.
    pub fn source(&self) -> ClusterSource {
        ClusterSource::Existing(self.cluster.clone())
    }
}

fn parse_webhook_host(host: &str) -> Result<IpAddr, Error> {
    host.parse().map_err(|error| Error::Invalid {
        what: format!("{WEBHOOK_HOST_ENV}={host}"),
        message: format!("not an IP address of this machine: {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_host_that_is_not_an_address_names_the_variable() {
        assert_eq!(
            parse_webhook_host("172.17.0.1").unwrap(),
            IpAddr::from([172, 17, 0, 1])
        );
        let error = parse_webhook_host("docker-host").unwrap_err().to_string();
        assert!(error.contains(WEBHOOK_HOST_ENV), "{error}");
    }
}
