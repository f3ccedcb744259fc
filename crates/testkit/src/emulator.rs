//! One emulated cluster for the controllers' integration tests: an in-process arbor-kube-emu,
//! a client of it, and the waits and dynamic access every suite needs. Each suite adds its own
//! controller on top (gitsync instances, the observer, the hierarchy controller).

use std::time::Duration;

use arbor_kube_emu::{KubeEmu, KubeEmuBuilder};
use kube::Api;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;

use crate::Error;

/// How long the set-up waits for the emulator to serve Arbor's CRDs.
const CRD_PATIENCE: Duration = Duration::from_secs(60);

/// An in-process arbor-kube-emu and a client of it.
pub struct Cluster {
    pub emu: KubeEmu,
    pub client: kube::Client,
    /// The client configuration `client` was built from, for the components under test.
    config: kube::Config,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

impl Cluster {
    /// A default emulator serving Arbor's CRDs.
    pub async fn start() -> Result<Self, Error> {
        Self::start_with(KubeEmu::builder()).await
    }

    /// An emulator from `builder` (for example a short watch history, as on a busy API server)
    /// serving Arbor's CRDs.
    pub async fn start_with(builder: KubeEmuBuilder) -> Result<Self, Error> {
        let cluster = Self::on(start_emulator(builder).await?).await?;
        crate::cluster::install_crds(&cluster.client, CRD_PATIENCE).await?;
        Ok(cluster)
    }

    /// `emu` as it is, with no CRD installed: for suites that install their own.
    pub async fn on(emu: KubeEmu) -> Result<Self, Error> {
        init_test_logging();
        let config =
            arbor_runtime::client::config_from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
        let client = arbor_runtime::client::with_retries(config.clone())?;
        Ok(Self {
            emu,
            client,
            config,
        })
    }

    /// The client configuration of this cluster, for the components under test to build their
    /// client from as the binaries do (`Component::with_config`): theirs then stops resending
    /// throttled requests once the component begins to stop. A component given the test's
    /// client instead would go on resending while it stops, so its stop would not be the one
    /// the binaries make.
    pub fn config(&self) -> kube::Config {
        self.config.clone()
    }

    /// Creates namespace `name` if it does not exist.
    pub async fn namespace(&self, name: &str) -> Result<(), Error> {
        crate::cluster::ensure_namespace(&self.client, name).await
    }

    /// Any kind, without discovery: in `namespace`, or cluster-wide.
    pub fn api(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Stops the emulator.
    pub async fn shutdown(self) {
        self.emu.shutdown().await;
    }
}

async fn start_emulator(builder: KubeEmuBuilder) -> Result<KubeEmu, Error> {
    builder.start().await.map_err(|error| Error::Invalid {
        what: "starting arbor-kube-emu".to_owned(),
        message: error.to_string(),
    })
}

/// With `ARBOR_TEST_LOG` set (a tracing filter), the controllers under test log to the test's
/// output. Several tests share one process; only the first installs the subscriber, so the
/// refusal of the others is expected and ignored.
fn init_test_logging() {
    if let Ok(filter) = std::env::var("ARBOR_TEST_LOG") {
        let _ = arbor_runtime::telemetry::init(&filter, arbor_runtime::telemetry::LogFormat::Text);
    }
}
