//! Which API server the end-to-end tests run against, and what a test needs of it.
//!
//! By default every test starts its own `arbor-kube-emu`. With `ARBOR_E2E_KUBECONFIG` set to
//! the kubeconfig of a running cluster (a kind or k3d cluster, or an emulator started by
//! hand, as CI does), the tests that start the system ([`crate::system::start`]) use that
//! cluster instead: the controllers still run here as processes, the CRDs are the committed
//! YAML of `charts/arbor/crds`, tests take turns on the cluster and each removes what it made
//! (see [`arbor_testkit::shared`]).
//!
//! A test that needs something only the emulator has says so first with [`skip`], which
//! prints `skipped: <test>: needs ...` on stderr and tells the test to return: a skip is
//! visible in the output, never a silent pass. What needs the emulator:
//!
//! - its own hooks: request accounting (`GET /__emu/requests`), fault injection;
//! - its flags: a static token file naming the users a test acts as, deny rules, an
//!   authorization mode;
//! - an admission webhook the API server can call: arbor-webhook runs on this machine, so a
//!   cluster elsewhere reaches it only at an address given with `ARBOR_E2E_WEBHOOK_HOST`
//!   (`127.0.0.1` when the API server runs on this machine, the docker bridge's gateway for
//!   kind or k3d).
//!
//! Starting an emulator with particular flags and using a kubeconfig are the two variants of
//! one [`ClusterSource`]: a test that needs emulator flags asks for them with
//! [`Need::EmulatorFlags`] and starts its emulator with [`ClusterSource::Emulator`].

use std::path::PathBuf;

use arbor_testkit::source::{ClusterSource, KUBECONFIG_ENV, SharedCluster, WEBHOOK_HOST_ENV};

/// `charts/arbor/crds`: the CRDs a user installs.
pub fn crd_dir() -> PathBuf {
    crate::workspace_root().join("charts/arbor/crds")
}

/// The API server of this run: the cluster `ARBOR_E2E_KUBECONFIG` names, or an emulator per
/// test. Panics with the reason when the variable names no file, so that a typo fails the
/// run rather than quietly testing the emulator.
pub fn cluster_source() -> ClusterSource {
    shared_cluster().map_or_else(ClusterSource::default, |shared| shared.source())
}

/// The cluster `ARBOR_E2E_KUBECONFIG` names, with the CRDs of [`crd_dir`]; `None` when the
/// tests start emulators. Panics as [`cluster_source`] does.
pub fn shared_cluster() -> Option<SharedCluster> {
    SharedCluster::from_env(crd_dir()).unwrap_or_else(|error| panic!("{error}"))
}

/// Something only some API servers offer the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// One of the emulator's own endpoints or behaviours (`request accounting (GET
    /// /__emu/requests)`, `fault injection`).
    EmulatorHook(&'static str),
    /// Emulator command-line flags (`a static token file (--token-file) for the users ...`).
    EmulatorFlags(&'static str),
    /// An admission webhook running here that the API server calls.
    ReachableWebhook,
    /// A cluster no installed Arbor uses: the test takes over or deletes what one would hold
    /// (`the arbor-system Leases`).
    NoInstalledArbor(&'static str),
}

impl Need {
    /// Why the current source lacks it, or `None` when it has it.
    pub fn missing_from(self, source: &ClusterSource) -> Option<String> {
        let cluster = source.existing()?;
        let path = cluster.kubeconfig.display();
        match self {
            Need::EmulatorHook(what) => Some(format!(
                "needs the emulator's {what}, which the cluster of {KUBECONFIG_ENV}={path} does not serve"
            )),
            Need::EmulatorFlags(what) => Some(format!(
                "needs the emulator started with {what}; {KUBECONFIG_ENV}={path} names an existing cluster"
            )),
            Need::NoInstalledArbor(what) => Some(format!(
                "takes over {what}, which an Arbor installed on the cluster of {KUBECONFIG_ENV}={path} would hold; run it on the emulator"
            )),
            Need::ReachableWebhook => cluster.webhook_host.is_none().then(|| {
                format!(
                    "needs an admission webhook the API server of {KUBECONFIG_ENV}={path} can call: \
                     set {WEBHOOK_HOST_ENV} to an address of this machine it reaches"
                )
            }),
        }
    }
}

/// Whether the current test must be skipped for lack of `needs`; prints why on stderr when
/// so. Use it first thing: `if skip(&[Need::ReachableWebhook]) { return; }`.
pub fn skip(needs: &[Need]) -> bool {
    let source = cluster_source();
    let reasons: Vec<String> = needs
        .iter()
        .filter_map(|need| need.missing_from(&source))
        .collect();
    if reasons.is_empty() {
        return false;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    // Straight to the stderr stream: the test harness captures `eprintln!` of a passing
    // test, and a skip must show in every run, not only with --nocapture.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {}", reasons.join("; "));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_testkit::source::ExistingCluster;

    fn existing(webhook_host: Option<&str>) -> ClusterSource {
        ClusterSource::Existing(ExistingCluster {
            kubeconfig: PathBuf::from("/home/me/.kube/kind"),
            webhook_host: webhook_host.map(|host| host.parse().unwrap()),
        })
    }

    #[test]
    fn the_emulator_has_everything() {
        let emulator = ClusterSource::default();
        for need in [
            Need::EmulatorHook("fault injection"),
            Need::EmulatorFlags("--token-file"),
            Need::ReachableWebhook,
            Need::NoInstalledArbor("the arbor-system Leases"),
        ] {
            assert_eq!(need.missing_from(&emulator), None, "{need:?}");
        }
    }

    #[test]
    fn an_existing_cluster_lacks_the_emulators_hooks_and_flags_and_says_which() {
        let cluster = existing(Some("172.18.0.1"));
        let hook = Need::EmulatorHook("fault injection")
            .missing_from(&cluster)
            .unwrap();
        assert!(
            hook.starts_with("needs the emulator's fault injection"),
            "{hook}"
        );
        assert!(
            hook.contains("ARBOR_E2E_KUBECONFIG=/home/me/.kube/kind"),
            "{hook}"
        );
        let flags = Need::EmulatorFlags("--token-file")
            .missing_from(&cluster)
            .unwrap();
        assert!(flags.contains("--token-file"), "{flags}");
        let leases = Need::NoInstalledArbor("the arbor-system Leases")
            .missing_from(&cluster)
            .unwrap();
        assert!(
            leases.starts_with("takes over the arbor-system Leases"),
            "{leases}"
        );
        assert_eq!(Need::ReachableWebhook.missing_from(&cluster), None);
    }

    #[test]
    fn a_webhook_needs_an_address_the_cluster_reaches() {
        let reason = Need::ReachableWebhook
            .missing_from(&existing(None))
            .unwrap();
        assert!(reason.contains("ARBOR_E2E_WEBHOOK_HOST"), "{reason}");
    }
}
