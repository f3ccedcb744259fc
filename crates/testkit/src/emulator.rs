//! One emulated cluster for the controllers' integration tests: an in-process arbor-kube-emu,
//! a client of it, and the waits and dynamic access every suite needs. Each suite adds its own
//! controller on top (gitsync instances, the observer, the hierarchy controller).

use std::time::Duration;

use arbor_kube_emu::{KubeEmu, KubeEmuBuilder};
use kube::Api;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;

use crate::Error;
use crate::client_faults::PanicOnce;

/// How long the set-up waits for the emulator to serve Arbor's CRDs.
const CRD_PATIENCE: Duration = Duration::from_secs(60);

/// An in-process arbor-kube-emu and a client of it.
pub struct Cluster {
    pub emu: KubeEmu,
    pub client: kube::Client,
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
        let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
        Ok(Self { emu, client })
    }

    /// Another client of the emulator, like [`Cluster::client`], through which the first
    /// request `fault` names panics in the task that sends it ([`PanicOnce`]).
    pub async fn client_with(&self, fault: &PanicOnce) -> Result<kube::Client, Error> {
        let mut config =
            arbor_runtime::client::config_from_kubeconfig_yaml(&self.emu.kubeconfig_yaml()).await?;
        // As `arbor_runtime::client::with_retries` builds it, the fault on top.
        config.default_retry = false;
        let builder = kube::client::ClientBuilder::try_from(config)
            .map_err(arbor_runtime::client::ClientError::from)?;
        Ok(builder
            .with_layer(&arbor_runtime::throttle::RetryThrottledLayer::default())
            .with_layer(fault)
            .build())
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
