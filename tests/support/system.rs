//! The whole system for the end-to-end tests: [`arbor_testkit::System`] with binaries built by
//! [`crate::binary`], in a temporary directory, plus the clients and waits the tests share.
//!
//! Every wait is bounded by [`WAIT`]: generous, because the suite runs on two cores next to
//! other test binaries, and never a statement about speed.

use std::path::PathBuf;
use std::time::Duration;

use crate::eventually;
use anyhow::Context;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{SourceKind, SourceRef, TriggerSyncRequest};
use arbor_runtime::grpc::{TlsMaterial, connect};
use arbor_testkit::process::DROP_GRACE;
use arbor_testkit::shared::ClusterLease;
use arbor_testkit::source::SharedCluster;
use arbor_testkit::{System, SystemConfig};
use tempfile::TempDir;
use tonic::transport::Channel;

/// The limit of every wait in the suite.
pub const WAIT: Duration = Duration::from_secs(60);

/// The controllers' packages and binaries, built before a system starts.
const CONTROLLERS: [(&str, &str); 5] = [
    ("arbor-kube-emu", "arbor-kube-emu"),
    ("arbor-gitsync", "arbor-gitsync"),
    ("arbor-hierarchy", "arbor-hierarchy"),
    ("arbor-observer", "arbor-observer"),
    ("arbor-webhook", "arbor-webhook"),
];

/// A running system and the directory it writes into (removed after the system stops).
/// On an existing cluster it holds the test's turn there: when it is dropped, the controllers
/// stop first (nothing re-creates what goes), then what the test made is deleted, then the
/// cluster is free for the next test.
#[derive(Debug)]
pub struct TestSystem {
    pub system: System,
    lease: Option<ClusterLease>,
    pub dir: TempDir,
}

impl TestSystem {
    /// Starts the system of `config` with `dir` as its directory; on an existing cluster,
    /// after taking the test's turn there (with the CRDs of [`crate::source::crd_dir`]).
    pub async fn start(config: SystemConfig, dir: TempDir) -> anyhow::Result<TestSystem> {
        let lease = match config.cluster.existing() {
            Some(cluster) => {
                let shared = SharedCluster {
                    cluster: cluster.clone(),
                    crd_dir: crate::source::crd_dir(),
                };
                let domain = config
                    .domain
                    .as_deref()
                    .unwrap_or(arbor_api::keys::DEFAULT_DOMAIN);
                let (_, lease) =
                    ClusterLease::take(&shared, domain, config.startup_timeout).await?;
                Some(lease)
            }
            None => None,
        };
        match System::start(config).await {
            Ok(system) => Ok(TestSystem { system, lease, dir }),
            // The controllers that started stopped when the system was dropped inside
            // `start`: what they made can go now.
            Err(error) => {
                if let Some(lease) = lease
                    && let Err(cleanup) = lease.clean_up()
                {
                    eprintln!("cleaning up the cluster after a system failed to start: {cleanup}");
                }
                Err(error.into())
            }
        }
    }
}

impl Drop for TestSystem {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        self.system.stop(DROP_GRACE);
        if let Err(error) = lease.clean_up() {
            // A Drop cannot fail; the next test would meet what is left, so say it loudly.
            eprintln!(
                "cleaning up the cluster of {} after a test: {error}",
                self.system.kubeconfig.display()
            );
        }
    }
}

impl std::ops::Deref for TestSystem {
    type Target = System;
    fn deref(&self) -> &System {
        &self.system
    }
}

impl std::ops::DerefMut for TestSystem {
    fn deref_mut(&mut self) -> &mut System {
        &mut self.system
    }
}

/// The directory holding the built binaries, building them first.
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    let mut dir = None;
    for (package, binary) in CONTROLLERS {
        let path = crate::binary(package, binary)?;
        dir = path.parent().map(PathBuf::from);
    }
    dir.context("no binary was built")
}

/// `deploy/examples/<relative>`.
pub fn example(relative: &str) -> PathBuf {
    crate::workspace_root()
        .join("deploy/examples")
        .join(relative)
}

/// Starts the emulator (or takes the cluster of `ARBOR_E2E_KUBECONFIG`, see
/// [`crate::source`]) and the controllers named (`gitsync`, `hierarchy`, `observer`,
/// `webhook`), with the examples' hierarchy configuration.
pub async fn start(controllers: &[&str]) -> anyhow::Result<TestSystem> {
    start_in_domain(controllers, None, example("hierarchy-config.yaml")).await
}

/// Like [`start`], with arbor-hierarchy and arbor-webhook under key domain `domain` and the
/// hierarchy configuration file `hierarchy_config`.
pub async fn start_in_domain(
    controllers: &[&str],
    domain: Option<&str>,
    hierarchy_config: PathBuf,
) -> anyhow::Result<TestSystem> {
    start_configured(controllers, |config| {
        config.domain = domain.map(str::to_owned);
        config.hierarchy_config = Some(hierarchy_config);
    })
    .await
}

/// Like [`start`], with the controllers campaigning for their Leases as in a cluster.
pub async fn start_electing(controllers: &[&str]) -> anyhow::Result<TestSystem> {
    start_configured(controllers, |config| {
        config.hierarchy_config = Some(example("hierarchy-config.yaml"));
        config.leader_election = true;
    })
    .await
}

async fn start_configured(
    controllers: &[&str],
    adjust: impl FnOnce(&mut SystemConfig),
) -> anyhow::Result<TestSystem> {
    let dir = tempfile::tempdir()?;
    let mut config = SystemConfig::new(dir.path())?.only(controllers);
    config.bin_dir = bin_dir()?;
    config.startup_timeout = WAIT;
    config.cluster = crate::source::cluster_source();
    adjust(&mut config);
    TestSystem::start(config, dir).await
}

/// The mutual-TLS material of the test client (`arborctl`'s identity).
pub fn client_tls(system: &System) -> anyhow::Result<TlsMaterial> {
    Ok(TlsMaterial {
        cert_pem: Some(std::fs::read_to_string(&system.client_identity.cert)?),
        key_pem: Some(std::fs::read_to_string(&system.client_identity.key)?),
        ca_pem: Some(system.tls.ca_pem().to_owned()),
    })
}

/// A SyncService client over mutual TLS.
pub async fn sync_client(system: &System) -> anyhow::Result<SyncServiceClient<Channel>> {
    let gitsync = system
        .gitsync
        .as_ref()
        .context("arbor-gitsync is not running")?;
    let channel = connect(&gitsync.grpc_url(), Some(&client_tls(system)?)).await?;
    Ok(SyncServiceClient::new(channel))
}

/// A reference to a ClusterGitTrack.
pub fn cluster_source(name: &str) -> SourceRef {
    SourceRef {
        kind: SourceKind::ClusterGitTrack.into(),
        namespace: String::new(),
        name: name.to_owned(),
    }
}

/// A reference to a GitTrack.
pub fn namespaced_source(namespace: &str, name: &str) -> SourceRef {
    SourceRef {
        kind: SourceKind::GitTrack.into(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

/// Syncs `source` now and waits until it has synced `commit`.
pub async fn sync_to(system: &System, source: SourceRef, commit: &str) -> anyhow::Result<()> {
    let client = sync_client(system).await?;
    eventually(&format!("{} synced at {commit}", source.name), WAIT, || {
        let mut client = client.clone();
        let source = source.clone();
        async move {
            let request = TriggerSyncRequest {
                source: Some(source),
                wait: true,
            };
            let status = match client.trigger_sync(request).await {
                Ok(response) => response.into_inner().status,
                // The source may not be known yet: the controller has not seen it.
                Err(_) => None,
            };
            Ok(status
                .filter(|status| status.observed_commit == commit)
                .map(drop))
        }
    })
    .await
    .map_err(Into::into)
}

/// Runs kubectl with `kubeconfig`; fails with its output when it fails.
pub fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .context("running kubectl (install it: make deps)")?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A repository with a work tree, served over smart HTTP on loopback, that a test commits to.
#[derive(Debug)]
pub struct ServedRepo {
    pub repo: arbor_testkit::GitRepo,
    pub server: arbor_testkit::GitHttpServer,
    _dir: TempDir,
}

impl ServedRepo {
    /// `source` (a directory) committed as repository `name`, or an empty repository.
    pub fn new(name: &str, source: Option<&std::path::Path>) -> anyhow::Result<ServedRepo> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(name);
        let repo = match source {
            Some(source) => arbor_testkit::GitRepo::from_dir(source, path, "Import")?,
            None => arbor_testkit::GitRepo::init(path)?,
        };
        let server = arbor_testkit::GitHttpServer::start(dir.path(), None)?;
        Ok(ServedRepo {
            repo,
            server,
            _dir: dir,
        })
    }

    pub fn url(&self) -> String {
        self.server.url(&self.repo.name())
    }

    /// The `spec` of a GitTrack or ClusterGitTrack following `main`. The poll interval is
    /// long: the tests sync with TriggerSync, so that each step is one known round.
    pub fn source_spec(&self, layout: &str) -> serde_json::Value {
        serde_json::json!({
            "repository": self.url(),
            "reference": {"branch": "main"},
            "layout": layout,
            "pollInterval": "1h",
        })
    }
}
