//! A cluster for one test: arbor-kube-emu in process, the SubNamespace CRD, and the
//! controller started in process under one key domain; helpers with bounded waits.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use arbor_api::{SubNamespaceApi, SubNamespaceStatus};
use arbor_hierarchy::metrics::Metrics;
use arbor_hierarchy::{Running, Settings};
use arbor_kube_emu::KubeEmu;
use arbor_policy::keys::Keys;
use arbor_policy::propagation::{PropagationConfig, WatchedKind};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

pub const ARBOR: &str = "arbor.dev";
pub const ACCURATE: &str = "accurate.cybozu.com";
pub const INNU: &str = "innu.cybozu.com";

/// Generous bound for anything the controller does in reaction to a change.
pub const WAIT: Duration = Duration::from_secs(30);

/// Generates `mod arbor`, `mod accurate` and `mod innu`, each with one `#[tokio::test]` per
/// named scenario, calling `scenario(domain)`.
#[macro_export]
macro_rules! for_each_domain {
    ($($scenario:ident),* $(,)?) => {
        $crate::for_each_domain!(@domain arbor, $crate::common::ARBOR, $($scenario),*);
        $crate::for_each_domain!(@domain accurate, $crate::common::ACCURATE, $($scenario),*);
        $crate::for_each_domain!(@domain innu, $crate::common::INNU, $($scenario),*);
    };
    (@domain $module:ident, $domain:expr, $($scenario:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario($domain).await
                }
            )*
        }
    };
}

/// The configuration every test runs with.
pub fn test_config() -> PropagationConfig {
    let watch = |group: &str, kind: &str| WatchedKind {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
    };
    PropagationConfig {
        label_keys: vec!["team".into(), "tier-*".into()],
        annotation_keys: vec!["note".into()],
        sub_namespace_label_keys: vec!["app".into()],
        sub_namespace_annotation_keys: vec!["memo".into()],
        watches: vec![
            watch("", "Secret"),
            watch("", "ConfigMap"),
            watch("rbac.authorization.k8s.io", "Role"),
        ],
        ..PropagationConfig::default()
    }
}

#[derive(Debug, Clone, Copy)]
enum Metadata {
    Label,
    Annotation,
}

/// The emulated cluster of [`arbor_testkit::Cluster`] (reached through `Deref`: `emu`, `client`),
/// with the SubNamespace CRD of one key domain and the controller.
pub struct Cluster {
    kube: arbor_testkit::Cluster,
    pub keys: Keys,
    pub domain: String,
    /// Where SubNamespaces are served under the test's domain.
    pub sub_api: SubNamespaceApi,
    /// The running controller's metrics.
    pub metrics: Metrics,
    controller: Option<Controller>,
}

/// The controller started in process on a component of its own, built as the binary builds it
/// (`Component::with_config`): its client stops resending throttled requests once the component
/// begins to stop, as the binary's does.
pub struct Controller {
    pub running: Running,
    shutdown: arbor_runtime::Shutdown,
}

impl Controller {
    /// Stops as the binary does: the component's stop first (no more resends), then the
    /// controller's tasks.
    pub async fn stop(self) {
        self.shutdown.trigger();
        self.running.stop().await;
    }
}

impl std::ops::Deref for Cluster {
    type Target = arbor_testkit::Cluster;

    fn deref(&self) -> &Self::Target {
        &self.kube
    }
}

impl Cluster {
    /// The emulator with the CRD installed and the controller running and synced.
    pub async fn start(domain: &str) -> Result<Self> {
        let mut cluster = Self::without_controller(domain).await?;
        cluster.start_controller().await?;
        Ok(cluster)
    }

    pub async fn without_controller(domain: &str) -> Result<Self> {
        Self::on(KubeEmu::start().await?, domain).await
    }

    /// Like [`Cluster::without_controller`], on an emulator the test configured.
    pub async fn on(emu: KubeEmu, domain: &str) -> Result<Self> {
        let kube = arbor_testkit::Cluster::on(emu).await?;
        let client = kube.client.clone();
        let sub_api = SubNamespaceApi::for_domain(domain);
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &sub_api.crd())
            .await?;
        let probe: Api<DynamicObject> = Api::all_with(client.clone(), &sub_api.api_resource());
        wait_for("the SubNamespace CRD to be served", || async {
            Ok(probe.list(&Default::default()).await.is_ok())
        })
        .await?;
        Ok(Self {
            kube,
            keys: Keys::for_domain(domain)?,
            domain: domain.to_owned(),
            sub_api,
            metrics: Metrics::default(),
            controller: None,
        })
    }

    /// Replaces the SubNamespace CRD's `spec` schema by one that keeps anything, as a
    /// hand-written or older CRD may: objects the controller cannot decode can then be stored.
    pub async fn loosen_sub_namespace_spec(&self) -> Result<()> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut crd = self.sub_api.crd();
        for version in &mut crd.spec.versions {
            let schema = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
                .context("the CRD has a schema")?;
            let properties = schema.properties.as_mut().context("schema properties")?;
            properties.insert(
                "spec".into(),
                serde_json::from_value(json!({
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true}))?,
            );
        }
        let name = crd.metadata.name.clone().unwrap_or_default();
        let live = crds.get(&name).await?;
        crd.metadata.resource_version = live.metadata.resource_version;
        crds.replace(&name, &PostParams::default(), &crd).await?;
        Ok(())
    }

    /// Installs the CRD `crd` (JSON).
    pub async fn create_crd(&self, crd: Value) -> Result<()> {
        Api::<CustomResourceDefinition>::all(self.client.clone())
            .create(&PostParams::default(), &serde_json::from_value(crd)?)
            .await
            .context("create CRD")?;
        Ok(())
    }

    pub async fn start_controller(&mut self) -> Result<()> {
        let controller = self.try_start_controller(test_config()).await?;
        tokio::time::timeout(WAIT, controller.running.synced())
            .await
            .context("caches did not sync")?;
        self.controller = Some(controller);
        Ok(())
    }

    /// Starts the controller with `config`, returning its start-up error as is.
    pub async fn try_start_controller(&self, config: PropagationConfig) -> Result<Controller> {
        use clap::Parser as _;
        let args = arbor_hierarchy::Args::try_parse_from([
            "arbor-hierarchy",
            "--leader-election=false",
            "--admin-addr=127.0.0.1:0",
            "--grpc-addr=127.0.0.1:0",
        ])?;
        let component =
            arbor_runtime::Component::with_config("hierarchy", args.common, self.config())?;
        let shutdown = component.shutdown().clone();
        let running = arbor_hierarchy::start(
            component.client(),
            Settings {
                domain: self.domain.clone(),
                config,
                reporter: kube::runtime::events::Reporter {
                    controller: arbor_api::keys::HIERARCHY_FIELD_MANAGER.into(),
                    instance: Some("test".into()),
                },
            },
            self.metrics.clone(),
            shutdown.token(),
        )
        .await?;
        Ok(Controller { running, shutdown })
    }

    pub async fn stop_controller(&mut self) {
        if let Some(controller) = self.controller.take() {
            controller.stop().await;
        }
    }

    pub fn controller(&self) -> &Running {
        &self
            .controller
            .as_ref()
            .expect("the controller runs")
            .running
    }

    /// Every reconcile error the controller counted so far, whatever its reason
    /// (`arbor_hierarchy_errors_total`, summed over its labels).
    pub fn errors_counted(&self) -> u64 {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("errors", "", self.metrics.errors.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .expect("the errors metric encodes");
        text.lines()
            .filter(|line| line.starts_with("errors_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until the controller has settled: a full resync completes (every namespace
    /// reconciled at least once more) and the revision no longer moves.
    pub async fn settle(&self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut last = self.emu.resource_version();
        loop {
            self.resync_and_wait().await?;
            let now = self.emu.resource_version();
            if now == last {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("the controller kept writing for {WAIT:?} (revision {last} -> {now})");
            }
            last = now;
        }
    }

    /// Forces a reconcile of every namespace and waits until that many reconciles completed.
    pub async fn resync_and_wait(&self) -> Result<()> {
        let controller = self.controller();
        let namespaces = controller.index().namespace_names().len() as u64;
        let before = controller.reconciles();
        controller.resync();
        wait_for("a full resync", || async {
            Ok(controller.reconciles() >= before + namespaces)
        })
        .await
    }

    pub async fn shutdown(mut self) {
        self.stop_controller().await;
        self.kube.shutdown().await;
    }

    // --- namespaces -------------------------------------------------------------------

    pub fn namespaces(&self) -> Api<Namespace> {
        Api::all(self.client.clone())
    }

    /// Creates namespace `name` with `labels` (keys without a domain are taken as they are;
    /// `type`, `template`, `parent` are put under the test's domain).
    /// Root namespace `root`, labelled `team: x`, and its child `child`.
    pub async fn root_with_child(&self) -> Result<()> {
        self.create_namespace("root", &[("type", "root"), ("team", "x")])
            .await?;
        self.create_namespace("child", &[("parent", "root")]).await
    }

    pub async fn create_namespace(&self, name: &str, labels: &[(&str, &str)]) -> Result<()> {
        let namespace = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": self.labels(labels)},
        });
        self.namespaces()
            .create(&PostParams::default(), &serde_json::from_value(namespace)?)
            .await
            .with_context(|| format!("create namespace {name}"))?;
        Ok(())
    }

    /// Creates namespace `name` with labels and annotations.
    pub async fn create_namespace_with(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
    ) -> Result<()> {
        let namespace = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": self.labels(labels),
                         "annotations": self.labels(annotations)},
        });
        self.namespaces()
            .create(&PostParams::default(), &serde_json::from_value(namespace)?)
            .await
            .with_context(|| format!("create namespace {name}"))?;
        Ok(())
    }

    /// Sets (Some) or removes (None) labels of a namespace with a merge patch, as a user would.
    pub async fn label_namespace(&self, name: &str, labels: &[(&str, Option<&str>)]) -> Result<()> {
        let labels: BTreeMap<String, Value> = labels
            .iter()
            .map(|(k, v)| (self.key(k), v.map_or(Value::Null, Value::from)))
            .collect();
        self.namespaces()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await
            .with_context(|| format!("label namespace {name}"))?;
        Ok(())
    }

    /// Sets (Some) or removes (None) annotations of a namespace with a merge patch.
    pub async fn annotate_namespace(
        &self,
        name: &str,
        annotations: &[(&str, Option<&str>)],
    ) -> Result<()> {
        let annotations: BTreeMap<String, Value> = annotations
            .iter()
            .map(|(k, v)| (self.key(k), v.map_or(Value::Null, Value::from)))
            .collect();
        self.namespaces()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
            )
            .await
            .with_context(|| format!("annotate namespace {name}"))?;
        Ok(())
    }

    pub async fn namespace(&self, name: &str) -> Result<Option<Namespace>> {
        Ok(self.namespaces().get_opt(name).await?)
    }

    pub async fn namespace_label(&self, name: &str, key: &str) -> Result<Option<String>> {
        self.namespace_metadata(name, key, Metadata::Label).await
    }

    pub async fn namespace_annotation(&self, name: &str, key: &str) -> Result<Option<String>> {
        self.namespace_metadata(name, key, Metadata::Annotation)
            .await
    }

    async fn namespace_metadata(
        &self,
        name: &str,
        key: &str,
        which: Metadata,
    ) -> Result<Option<String>> {
        let Some(namespace) = self.namespace(name).await? else {
            return Ok(None);
        };
        let map = match which {
            Metadata::Label => namespace.metadata.labels,
            Metadata::Annotation => namespace.metadata.annotations,
        };
        Ok(map.and_then(|m| m.get(&self.key(key)).cloned()))
    }

    /// `type`, `template`, `parent`, `propagate`, `propagate-generated` and `from` under the
    /// test's domain; anything else as given.
    pub fn key(&self, key: &str) -> String {
        match key {
            "type" => self.keys.type_label.clone(),
            "template" => self.keys.template_label.clone(),
            "parent" => self.keys.parent_label.clone(),
            "propagate" => self.keys.propagate_annotation.clone(),
            "propagate-generated" => self.keys.propagate_generated_annotation.clone(),
            "from" => self.keys.from_annotation.clone(),
            other => other.to_owned(),
        }
    }

    fn labels(&self, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (self.key(k), (*v).to_owned()))
            .collect()
    }

    // --- SubNamespaces ----------------------------------------------------------------

    /// SubNamespaces in the group of the test's domain.
    pub fn sub_namespaces(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.sub_api.api_resource())
    }

    pub async fn create_sub_namespace(
        &self,
        parent: &str,
        name: &str,
        spec_labels: &[(&str, &str)],
    ) -> Result<()> {
        self.create_sub_namespace_object(json!({
            "apiVersion": self.sub_api.api_version(), "kind": "SubNamespace",
            "metadata": {"name": name, "namespace": parent},
            "spec": {"labels": self.labels(spec_labels)},
        }))
        .await
    }

    /// A root `root` and its SubNamespace `name`, once the controller has made the namespace.
    pub async fn root_with_sub_namespace(&self, name: &str) -> Result<()> {
        self.create_namespace("root", &[("type", "root")]).await?;
        self.create_sub_namespace("root", name, &[]).await?;
        self.wait_namespace_label(name, "parent", Some("root"))
            .await
    }

    /// Creates the SubNamespace `object` as it is.
    pub async fn create_sub_namespace_object(&self, object: Value) -> Result<()> {
        let parent = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.sub_namespaces(&parent)
            .create(&PostParams::default(), &serde_json::from_value(object)?)
            .await
            .with_context(|| format!("create SubNamespace {parent}/{name}"))?;
        Ok(())
    }

    /// The conditions of SubNamespace `parent/name`.
    pub async fn sub_namespace_conditions(
        &self,
        parent: &str,
        name: &str,
    ) -> Result<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>> {
        let sub = self.sub_namespaces(parent).get(name).await?;
        Ok(sub
            .data
            .get("status")
            .and_then(|s| serde_json::from_value::<SubNamespaceStatus>(s.clone()).ok())
            .map(|s| s.conditions)
            .unwrap_or_default())
    }

    // --- objects ----------------------------------------------------------------------

    pub fn secrets(&self, namespace: &str) -> Api<Secret> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates Secret `namespace/name` with `data` (as stringData-like plain values, encoded
    /// by the client) and annotations.
    pub async fn create_secret(
        &self,
        namespace: &str,
        name: &str,
        value: &str,
        annotations: &[(&str, &str)],
    ) -> Result<()> {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "annotations": self.labels(annotations)},
            "data": {"value": base64(value)},
        });
        self.secrets(namespace)
            .create(&PostParams::default(), &serde_json::from_value(secret)?)
            .await
            .with_context(|| format!("create Secret {namespace}/{name}"))?;
        Ok(())
    }

    /// Changes the `value` of Secret `namespace/name` with a merge patch.
    pub async fn edit_secret(&self, namespace: &str, name: &str, value: &str) -> Result<()> {
        self.secrets(namespace)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"value": base64(value)}})),
            )
            .await
            .with_context(|| format!("edit Secret {namespace}/{name}"))?;
        Ok(())
    }

    pub async fn delete_secret(&self, namespace: &str, name: &str) -> Result<()> {
        self.secrets(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("delete Secret {namespace}/{name}"))?;
        Ok(())
    }

    /// The `value` of Secret `namespace/name`, decoded; `None` when the Secret is missing.
    pub async fn secret_value(&self, namespace: &str, name: &str) -> Result<Option<String>> {
        let Some(secret) = self.secrets(namespace).get_opt(name).await? else {
            return Ok(None);
        };
        let bytes = secret
            .data
            .and_then(|d| d.get("value").cloned())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default();
        Ok(Some(bytes))
    }

    pub async fn secret_annotation(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>> {
        Ok(self
            .secrets(namespace)
            .get_opt(name)
            .await?
            .and_then(|s| s.metadata.annotations)
            .and_then(|a| a.get(&self.key(key)).cloned()))
    }

    /// An API for any kind, by group, version and kind.
    pub fn dynamic(
        &self,
        namespace: &str,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    /// Waits until Secret `namespace/name` has `value`.
    pub async fn wait_secret(&self, namespace: &str, name: &str, value: &str) -> Result<()> {
        wait_for(
            &format!("Secret {namespace}/{name} = {value:?}"),
            || async { Ok(self.secret_value(namespace, name).await?.as_deref() == Some(value)) },
        )
        .await
    }

    /// Waits until Secret `namespace/name` is gone.
    pub async fn wait_secret_gone(&self, namespace: &str, name: &str) -> Result<()> {
        wait_for(
            &format!("Secret {namespace}/{name} to be deleted"),
            || async { Ok(self.secrets(namespace).get_opt(name).await?.is_none()) },
        )
        .await
    }

    /// Waits until namespace `name` is gone.
    pub async fn wait_namespace_gone(&self, name: &str) -> Result<()> {
        wait_for(&format!("namespace {name} to be deleted"), || async {
            Ok(self.namespace(name).await?.is_none())
        })
        .await
    }

    /// Waits until label `key` of namespace `name` is `value`.
    pub async fn wait_namespace_label(
        &self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<()> {
        self.wait_namespace_metadata(name, key, value, Metadata::Label)
            .await
    }

    /// Waits until annotation `key` of namespace `name` is `value`.
    pub async fn wait_namespace_annotation(
        &self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<()> {
        self.wait_namespace_metadata(name, key, value, Metadata::Annotation)
            .await
    }

    async fn wait_namespace_metadata(
        &self,
        name: &str,
        key: &str,
        value: Option<&str>,
        which: Metadata,
    ) -> Result<()> {
        wait_for(
            &format!("namespace {name} {which:?} {key} = {value:?}"),
            || async { Ok(self.namespace_metadata(name, key, which).await?.as_deref() == value) },
        )
        .await
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// The whole process's flags against `cluster`: its kubeconfig and a configuration that
/// propagates Secrets and the `team` label, both written in `dir`; the admin server on `admin`,
/// gRPC on a free port, the Lease in `default` renewed every 200 ms, `--shutdown-grace=grace`.
pub fn process_args(
    cluster: &Cluster,
    dir: &std::path::Path,
    admin: std::net::SocketAddr,
    grace: &str,
) -> Result<arbor_hierarchy::Args> {
    use clap::Parser as _;
    let kubeconfig = dir.join("kubeconfig");
    cluster.emu.write_kubeconfig(&kubeconfig)?;
    let config = dir.join("hierarchy.yaml");
    std::fs::write(
        &config,
        "labelKeys: [team]\nwatches:\n  - version: v1\n    kind: Secret\n",
    )?;
    Ok(arbor_hierarchy::Args::try_parse_from([
        "arbor-hierarchy".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--config={}", config.display()),
        format!("--admin-addr={admin}"),
        format!("--grpc-addr={}", free_port()?),
        "--lease-namespace=default".to_owned(),
        "--lease-renew-interval=200ms".to_owned(),
        format!("--shutdown-grace={grace}"),
    ])?)
}

pub fn base64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Waits with [`arbor_testkit::eventually`] until `check` is true; fails after [`WAIT`],
/// naming what was awaited.
pub async fn wait_for<F, Fut>(what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let patience = arbor_testkit::Patience::new(WAIT, Duration::from_millis(20));
    arbor_testkit::eventually(what, patience, || {
        let done = check();
        async move { Ok(done.await?.then_some(())) }
    })
    .await
}
