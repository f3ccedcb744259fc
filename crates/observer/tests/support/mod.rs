//! Shared set-up of the observer's integration tests: an in-process arbor-kube-emu with
//! Arbor's CRDs, and the observer controller running against it.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use arbor_api::Application;
use arbor_observer::{Config, ObserverArgs, Running};
use arbor_runtime::Component;
use arbor_testkit::Patience;
use clap::Parser;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Bound on every wait in these tests.
pub const PATIENCE: Patience = Patience::new(Duration::from_secs(30), Duration::from_millis(20));

/// [`arbor_testkit::eventually`] with these tests' patience and error type.
pub async fn eventually<T, F, Fut>(what: &str, probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    arbor_testkit::eventually(what, PATIENCE, probe).await
}

/// The emulated cluster of [`arbor_testkit::Cluster`], serving Arbor's CRDs, with a namespace
/// `team` and what these tests do on it.
pub struct Cluster(arbor_testkit::Cluster);

impl std::ops::Deref for Cluster {
    type Target = arbor_testkit::Cluster;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

pub const NAMESPACE: &str = "team";

impl Cluster {
    pub async fn start() -> anyhow::Result<Self> {
        let cluster = arbor_testkit::Cluster::start().await?;
        cluster.namespace(NAMESPACE).await?;
        Ok(Self(cluster))
    }

    /// Starts the observer with `extra` flags; admin and gRPC on free loopback ports, no leader
    /// election and a 5 s shutdown grace period unless `extra` sets them.
    pub async fn observer(&self, extra: &[&str]) -> anyhow::Result<Running> {
        self.observer_with(self.config(), extra).await
    }

    /// Starts the observer as [`Self::observer`] does, as replica `identity`: its Leases name
    /// it, and its requests carry it as their username in the emulator's request log.
    pub async fn observer_as(&self, identity: &str, extra: &[&str]) -> anyhow::Result<Running> {
        let token = self.emu.token_for(identity, &["system:masters"]);
        let config = arbor_runtime::client::config_from_kubeconfig_yaml(
            &self.emu.kubeconfig_yaml_for(&token),
        )
        .await?;
        let lease_identity = format!("--lease-identity={identity}");
        let mut flags = vec![lease_identity.as_str()];
        flags.extend_from_slice(extra);
        self.observer_with(config, &flags).await
    }

    async fn observer_with(
        &self,
        config_of_client: kube::Config,
        extra: &[&str],
    ) -> anyhow::Result<Running> {
        let mut argv = vec![
            "arbor-observer",
            "--admin-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
        ];
        if !extra
            .iter()
            .any(|flag| flag.starts_with("--shutdown-grace"))
        {
            argv.extend(["--shutdown-grace", "5s"]);
        }
        if !extra
            .iter()
            .any(|flag| flag.starts_with("--leader-election"))
        {
            argv.extend(["--leader-election", "false"]);
        }
        argv.extend_from_slice(extra);
        let args = ObserverArgs::try_parse_from(argv)?;
        let config = Config::from(&args);
        let component = Component::with_config("observer", args.common, config_of_client)?;
        Ok(arbor_observer::start(component, config).await?)
    }

    /// Stops the emulator.
    pub async fn shutdown(self) {
        self.0.shutdown().await;
    }

    /// Stops `observer`, then the emulator.
    pub async fn finish(self, observer: Running) -> anyhow::Result<()> {
        observer.stop().await?;
        self.0.shutdown().await;
        Ok(())
    }

    pub fn applications(&self) -> Api<Application> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    pub fn objects(&self, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
        self.api(api_version, kind, plural, Some(NAMESPACE))
    }

    pub fn deployments(&self) -> Api<DynamicObject> {
        self.objects("apps/v1", "Deployment", "deployments")
    }

    pub fn services(&self) -> Api<DynamicObject> {
        self.objects("v1", "Service", "services")
    }

    pub fn config_maps(&self) -> Api<DynamicObject> {
        self.objects("v1", "ConfigMap", "configmaps")
    }

    /// Creates the Application `name` with `spec`.
    pub async fn create_application(&self, name: &str, spec: Value) -> anyhow::Result<()> {
        let application: Application = serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }))?;
        self.applications()
            .create(&PostParams::default(), &application)
            .await
            .with_context(|| format!("creating Application {name}"))?;
        Ok(())
    }

    /// Waits until Application `name` is in `state` for its current generation.
    pub async fn wait_for_state(&self, name: &str, state: &str) -> anyhow::Result<Application> {
        self.wait_for_state_in(NAMESPACE, name, state).await
    }

    /// Waits until Application `name` of `namespace` is in `state` for its current generation.
    pub async fn wait_for_state_in(
        &self,
        namespace: &str,
        name: &str,
        state: &str,
    ) -> anyhow::Result<Application> {
        let applications: Api<Application> = Api::namespaced(self.client.clone(), namespace);
        let last = std::sync::Mutex::new(None);
        let outcome = eventually(
            &format!("Application {namespace}/{name} to be {state}"),
            || async {
                let application = applications.get(name).await?;
                *last.lock().unwrap() = application.status.clone();
                let status = application.status.clone().unwrap_or_default();
                let current = format!("{:?}", status.state);
                let generation_done = state != "Running"
                    || status.observed_generation == application.metadata.generation;
                Ok((current == state && generation_done).then_some(application))
            },
        )
        .await;
        outcome.with_context(|| format!("last status: {:?}", last.lock().unwrap()))
    }

    /// Changes an object as `kubectl edit` would: a merge patch by another field manager.
    pub async fn edit(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        patch: Value,
    ) -> anyhow::Result<()> {
        let params = PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Merge(&patch)).await?;
        Ok(())
    }
}

/// The value at a JSON pointer of an object, as JSON.
pub fn at(object: &DynamicObject, pointer: &str) -> Value {
    serde_json::to_value(object)
        .ok()
        .and_then(|value| value.pointer(pointer).cloned())
        .unwrap_or(Value::Null)
}

/// The nginx application of seeds/004: a Deployment and a Service.
pub fn nginx_manifest(name: &str) -> Value {
    json!([
        {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [
                        {"name": "nginx", "image": "nginx:1.25", "args": ["--port=80"]}
                    ]}
                }
            }
        },
        {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}
        }
    ])
}

/// A custom schema for [`nginx_manifest`]: the Deployment's image and args (one to three
/// arguments) and the Service's labels; not the replicas.
pub fn nginx_schema(name: &str) -> Value {
    json!([
        {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [
                {"image": null, "args": [null,
                    {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 3}]},
                {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 1}
            ]}}}
        },
        {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": {"app": null}}
        }
    ])
}
