//! Shared set-up of the controller tests: an in-process arbor-kube-emu with Arbor's CRDs, git
//! repositories made in a temporary directory and committed to step by step, and arbor-gitsync
//! instances running in the test process.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use arbor_api::keys::SourceRef;
use arbor_api::source::GitSourceStatus;
use arbor_api::{ClusterGitTrack, GitTrack};
use arbor_gitsync::run::{Args, Running};
use arbor_runtime::Component;
use arbor_testkit::{GitRepo, Patience};
use clap::Parser;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Bound on every wait in these tests.
pub const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(25));

/// [`arbor_testkit::eventually`] with these tests' patience and error type.
pub async fn eventually<T, F, Fut>(what: &str, probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    arbor_testkit::eventually(what, PATIENCE, probe).await
}

/// The emulated cluster of [`arbor_testkit::Cluster`], serving Arbor's CRDs, with what these
/// tests do on it.
pub struct Cluster(arbor_testkit::Cluster);

impl std::ops::Deref for Cluster {
    type Target = arbor_testkit::Cluster;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Cluster {
    pub async fn start() -> anyhow::Result<Self> {
        Ok(Self(arbor_testkit::Cluster::start().await?))
    }

    /// A cluster from `builder` (for example a short watch history, as on a busy API server).
    pub async fn start_with(builder: arbor_kube_emu::KubeEmuBuilder) -> anyhow::Result<Self> {
        Ok(Self(arbor_testkit::Cluster::start_with(builder).await?))
    }

    pub async fn namespace(&self, name: &str) -> anyhow::Result<()> {
        Ok(self.0.namespace(name).await?)
    }

    /// Starts an instance on the cluster `config` reaches, built as the binary builds it, with
    /// `flags` beside the test defaults (no leader election, loopback
    /// ports, a private cache directory).
    pub async fn instance(&self, flags: &[&str]) -> anyhow::Result<Instance> {
        start_instance(self.config(), false, flags).await
    }

    pub fn gittrack_objects(&self, namespace: &str) -> Api<DynamicObject> {
        self.api(
            "arbor.dev/v1alpha1",
            "GitTrackObject",
            "gittrackobjects",
            Some(namespace),
        )
    }

    pub fn configmaps(&self, namespace: &str) -> Api<DynamicObject> {
        self.api("v1", "ConfigMap", "configmaps", Some(namespace))
    }

    pub fn roles(&self, namespace: &str) -> Api<DynamicObject> {
        self.api(
            "rbac.authorization.k8s.io/v1",
            "Role",
            "roles",
            Some(namespace),
        )
    }

    pub fn rolebindings(&self, namespace: &str) -> Api<DynamicObject> {
        self.api(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "rolebindings",
            Some(namespace),
        )
    }

    pub fn clusterroles(&self) -> Api<DynamicObject> {
        self.api(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            None,
        )
    }

    /// Creates an object (as JSON) through `api`.
    pub async fn create(
        &self,
        api: &Api<DynamicObject>,
        object: Value,
    ) -> anyhow::Result<DynamicObject> {
        Ok(api
            .create(&PostParams::default(), &serde_json::from_value(object)?)
            .await?)
    }

    /// Merge-patches an object, as a person with kubectl would.
    pub async fn edit(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        patch: Value,
    ) -> anyhow::Result<()> {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    pub async fn create_cluster_gittrack(
        &self,
        name: &str,
        repo: &Repo,
        layout: &str,
    ) -> anyhow::Result<SourceRef> {
        let api: Api<ClusterGitTrack> = Api::all(self.client.clone());
        let source: ClusterGitTrack = serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "ClusterGitTrack",
            "metadata": {"name": name},
            "spec": {"repository": repo.url(), "reference": {"branch": "main"}, "layout": layout, "pollInterval": "1h"},
        }))?;
        api.create(&PostParams::default(), &source).await?;
        Ok(SourceRef::ClusterGitTrack { name: name.into() })
    }

    pub async fn create_gittrack(
        &self,
        namespace: &str,
        name: &str,
        repo: &Repo,
    ) -> anyhow::Result<SourceRef> {
        self.create_gittrack_of(namespace, name, &repo.url()).await
    }

    /// A GitTrack of the repository at `url` (a server of the test's own, say), branch `main`.
    pub async fn create_gittrack_of(
        &self,
        namespace: &str,
        name: &str,
        url: &str,
    ) -> anyhow::Result<SourceRef> {
        let api: Api<GitTrack> = Api::namespaced(self.client.clone(), namespace);
        let source: GitTrack = serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "GitTrack",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"repository": url, "reference": {"branch": "main"}, "layout": "Flat", "pollInterval": "1h"},
        }))?;
        api.create(&PostParams::default(), &source).await?;
        Ok(SourceRef::GitTrack {
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// The stored status of a source.
    pub async fn status(&self, source: &SourceRef) -> anyhow::Result<Option<GitSourceStatus>> {
        Ok(match source {
            SourceRef::GitTrack { namespace, name } => {
                let api: Api<GitTrack> = Api::namespaced(self.client.clone(), namespace);
                api.get(name).await?.status
            }
            SourceRef::ClusterGitTrack { name } => {
                let api: Api<ClusterGitTrack> = Api::all(self.client.clone());
                api.get(name).await?.status
            }
        })
    }

    pub async fn exists(&self, api: &Api<DynamicObject>, name: &str) -> anyhow::Result<bool> {
        Ok(api.get_opt(name).await?.is_some())
    }

    /// Waits until `name` is gone.
    pub async fn gone(
        &self,
        instance: &Instance,
        source: &SourceRef,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> anyhow::Result<()> {
        eventually(&format!("{name} to be deleted"), || async {
            instance.request_round(source);
            Ok((!self.exists(api, name).await?).then_some(()))
        })
        .await
    }

    /// Asks for rounds until the source's status shows `commit` synced, with `ready` the Ready
    /// condition's status; returns the status.
    pub async fn synced(
        &self,
        instance: &Instance,
        source: &SourceRef,
        commit: &str,
    ) -> anyhow::Result<GitSourceStatus> {
        eventually(&format!("{source} to sync commit {commit}"), || async {
            let status = self.status(source).await?.unwrap_or_default();
            if status.observed_commit.as_deref() == Some(commit) {
                return Ok(Some(status));
            }
            instance.request_round(source);
            instance.rounds(source, 1).await;
            Ok(None)
        })
        .await
    }
}

/// Starts an instance on the cluster `config` reaches, built as the binary builds it, with
/// `flags` beside the test defaults (loopback ports, a private cache
/// directory, `file://` repositories allowed: the tests' repositories are local; a test of the
/// refusal passes `--allow-file-repositories=false`). With `leader_election`, it returns once it
/// holds the Lease.
pub async fn start_instance(
    config: kube::Config,
    leader_election: bool,
    flags: &[&str],
) -> anyhow::Result<Instance> {
    start_instance_around(config, |client| client, leader_election, flags).await
}

/// [`start_instance`], its requests going through `around` first (a client-side fault).
pub async fn start_instance_around(
    config: kube::Config,
    around: impl FnOnce(kube::Client) -> kube::Client,
    leader_election: bool,
    flags: &[&str],
) -> anyhow::Result<Instance> {
    let cache = tempfile::tempdir()?;
    let cache_flag = format!("--cache-dir={}", cache.path().display());
    let election_flag = format!("--leader-election={leader_election}");
    let mut argv = vec![
        "arbor-gitsync",
        &election_flag,
        "--grpc-addr=127.0.0.1:0",
        "--admin-addr=127.0.0.1:0",
        &cache_flag,
    ];
    if !flags
        .iter()
        .any(|flag| flag.starts_with("--allow-file-repositories"))
    {
        argv.push("--allow-file-repositories");
    }
    argv.extend_from_slice(flags);
    let args = Args::try_parse_from(argv)?;
    let settings = args.settings()?;
    let component =
        Component::with_config("gitsync", args.common.clone(), config)?.with_client_around(around);
    let running = arbor_gitsync::run::start(component, settings)
        .await?
        .context("the instance stopped while starting")?;
    Ok(Instance {
        running: Some(running),
        cache,
    })
}

/// A running arbor-gitsync instance.
pub struct Instance {
    running: Option<Running>,
    cache: tempfile::TempDir,
}

impl Instance {
    pub fn running(&self) -> &Running {
        self.running
            .as_ref()
            .expect("the instance runs until dropped")
    }

    /// The instance's `--cache-dir`.
    pub fn cache_dir(&self) -> &std::path::Path {
        self.cache.path()
    }

    pub fn request_round(&self, source: &SourceRef) {
        self.running().context().registry.request_round(source);
    }

    /// Asks for `count` full rounds of `source`, one after the other, and waits for each.
    pub async fn rounds(&self, source: &SourceRef, count: usize) {
        let registry = &self.running().context().registry;
        for _ in 0..count {
            let before = registry.get(source).map_or(0, |record| record.rounds);
            registry.request_round(source);
            registry
                .wait_for_round(source, before, Duration::from_secs(10))
                .await;
        }
    }

    pub async fn grpc(
        &self,
    ) -> anyhow::Result<
        arbor_proto::v1::sync_service_client::SyncServiceClient<tonic::transport::Channel>,
    > {
        let address = format!("http://{}", self.running().grpc_addr());
        Ok(arbor_proto::v1::sync_service_client::SyncServiceClient::connect(address).await?)
    }

    pub async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await;
        }
    }
}

/// A git repository in a temporary directory, committed to step by step on `main`.
pub struct Repo {
    _dir: tempfile::TempDir,
    git: GitRepo,
}

impl Repo {
    pub fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let git = GitRepo::init(dir.path().join("repo"))?;
        Ok(Self { _dir: dir, git })
    }

    pub fn url(&self) -> String {
        self.git.file_url()
    }

    /// The repository's work tree (its `.git` inside).
    pub fn path(&self) -> &std::path::Path {
        self.git.path()
    }

    pub fn write(&self, path: &str, text: &str) -> anyhow::Result<()> {
        Ok(self.git.write(path, text)?)
    }

    pub fn remove(&self, path: &str) -> anyhow::Result<()> {
        Ok(self.git.remove(path)?)
    }

    /// Commits the whole work tree; returns the commit id.
    pub fn commit(&self, message: &str) -> anyhow::Result<String> {
        Ok(self.git.commit_all(message)?)
    }
}

/// A ConfigMap as YAML.
pub fn configmap(namespace: Option<&str>, name: &str, value: &str) -> String {
    let namespace = namespace
        .map(|ns| format!("  namespace: {ns}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{namespace}data:\n  value: \"{value}\"\n"
    )
}

/// ConfigMap `namespace/name` as the gRPC API names objects.
pub fn configmap_ref(namespace: &str, name: &str) -> arbor_proto::v1::ObjectRef {
    arbor_proto::v1::ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The labels of a live object.
pub fn labels(object: &DynamicObject) -> std::collections::BTreeMap<String, String> {
    object.metadata.labels.clone().unwrap_or_default()
}

pub const LABEL: &str = "arbor.dev/managed";

pub const BACKEND: &str = "namespaces/online/shipping-app-backend";
pub const DESCENDANTS: [&str; 3] = ["shipping-dev", "shipping-prod", "shipping-staging"];

/// The foo-corp repository of seeds/000's examples, in Nomos' hierarchical layout: Syncs for
/// RBAC kinds and ConfigMaps, the `pod-creator` ClusterRole, the abstract namespace
/// `shipping-app-backend` with the `pod-creators` RoleBinding and a settings ConfigMap inherited
/// by its three namespaces, and the `job-creator` Role in `shipping-dev`.
pub fn foo_corp(repo: &Repo) -> anyhow::Result<()> {
    repo.write(
        "system/repo.yaml",
        "apiVersion: nomos.dev/v1alpha1\nkind: Repo\nmetadata:\n  name: repo\nspec:\n  version: \"0.1.0\"\n",
    )?;
    repo.write("system/rbac-sync.yaml", RBAC_SYNC)?;
    repo.write("system/core-sync.yaml", CORE_SYNC)?;
    repo.write(
        "cluster/pod-creator-clusterrole.yaml",
        &cluster_role("pod-creator", "pods"),
    )?;
    repo.write(
        &format!("{BACKEND}/pod-creator-rolebinding.yaml"),
        POD_CREATORS,
    )?;
    repo.write(
        &format!("{BACKEND}/settings-configmap.yaml"),
        &configmap(None, "settings", "shared"),
    )?;
    for namespace in DESCENDANTS {
        repo.write(
            &format!("{BACKEND}/{namespace}/namespace.yaml"),
            &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"),
        )?;
    }
    repo.write(
        &format!("{BACKEND}/shipping-dev/job-creator-role.yaml"),
        &role("job-creator", "jobs"),
    )?;
    Ok(())
}

pub const RBAC_SYNC: &str = "apiVersion: nomos.dev/v1alpha1
kind: Sync
metadata:
  name: rbac
spec:
  groups:
  - group: rbac.authorization.k8s.io
    kinds:
    - kind: ClusterRole
      versions:
      - version: v1
    - kind: Role
      versions:
      - version: v1
    - kind: RoleBinding
      versions:
      - version: v1
";

pub const CORE_SYNC: &str = "apiVersion: nomos.dev/v1alpha1
kind: Sync
metadata:
  name: core
spec:
  groups:
  - group: \"\"
    kinds:
    - kind: ConfigMap
      versions:
      - version: v1
";

pub const POD_CREATORS: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: pod-creators
subjects:
- kind: User
  name: bob@foo-corp.com
  apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: ClusterRole
  name: pod-creator
  apiGroup: rbac.authorization.k8s.io
";

pub fn cluster_role(name: &str, resource: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {name}\nrules:\n- apiGroups: [\"\"]\n  resources: [\"{resource}\"]\n  verbs: [\"get\"]\n"
    )
}

pub fn role(name: &str, resource: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\nrules:\n- apiGroups: [\"batch\"]\n  resources: [\"{resource}\"]\n  verbs: [\"*\"]\n"
    )
}
