//! The examples of `deploy/examples/` on the demo's cluster: the repositories published and
//! followed, the tree and the Application applied, and the wait for all of it to converge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use arbor_api::{Application, ApplicationState};
use arbor_demo::cluster::{apply, apply_yaml, ensure_namespace, eventually};
use arbor_demo::{GitHttpServer, GitRepo, System};
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{GetStatusRequest, SourceStatus};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;

use super::progress::{self, Ticker};
use crate::connect::{Resolved, Service};

/// The hierarchical (Nomos-style) example, followed by a ClusterGitTrack.
pub const FOO_CORP: &str = "foo-corp";
/// The flat (Faros-style) example, followed by a GitTrack in [`FLAT_APP_NAMESPACE`].
pub const FLAT_APP: &str = "flat-app";
pub const FLAT_APP_NAMESPACE: &str = "shop";
/// Sub-namespaces that tree.yaml requests, and the Secret its template propagates.
const SUB_NAMESPACES: [&str; 2] = ["team-a-dev", "team-a-prod"];
const PROPAGATED_SECRET: &str = "registry-credentials";
/// The Application of application.yaml.
const APPLICATION: &str = "web";

/// The example repositories as bare repositories behind a smart-HTTP server.
#[derive(Debug)]
pub struct Served {
    pub server: GitHttpServer,
    /// Repository name → the commit the demo expects to see synced.
    pub heads: Vec<(String, String)>,
}

impl Served {
    /// Commits each example directory into `<workdir>/work/<name>`, clones it bare into
    /// `<workdir>/git/<name>.git`, and serves `<workdir>/git`.
    pub fn publish(examples: &Path, workdir: &Path) -> anyhow::Result<Served> {
        let work = workdir.join("work");
        let bare = workdir.join("git");
        for dir in [&work, &bare] {
            if dir.exists() {
                std::fs::remove_dir_all(dir)?;
            }
        }
        let mut heads = Vec::new();
        for name in [FOO_CORP, FLAT_APP] {
            let repo = GitRepo::from_dir(
                &examples.join(name),
                work.join(name),
                &format!("Import the {name} example"),
            )?;
            repo.bare_copy(&bare.join(format!("{name}.git")))?;
            heads.push((name.to_owned(), repo.head()?));
        }
        let server = GitHttpServer::start(&bare, None)?;
        Ok(Served { server, heads })
    }

    fn url(&self, name: &str) -> String {
        self.server.url(&format!("{name}.git"))
    }

    fn head(&self, name: &str) -> &str {
        self.heads
            .iter()
            .find(|(repo, _)| repo == name)
            .map(|(_, head)| head.as_str())
            .unwrap_or_default()
    }
}

/// A source and the commit it should reach.
#[derive(Debug, Clone)]
pub struct ExpectedSource {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub commit: String,
}

/// Creates the two sources and applies tree.yaml and application.yaml.
pub async fn apply_examples(
    system: &System,
    served: &Served,
    examples: &Path,
) -> anyhow::Result<Vec<ExpectedSource>> {
    progress::step("creating the sources, the namespace tree and the Application");
    let client = &system.client;
    ensure_namespace(client, FLAT_APP_NAMESPACE).await?;
    let sources = [
        (
            json!({
                "apiVersion": "arbor.dev/v1alpha1",
                "kind": "ClusterGitTrack",
                "metadata": {"name": FOO_CORP},
                "spec": {
                    "repository": served.url(FOO_CORP),
                    "reference": {"branch": "main"},
                    "layout": "Hierarchical",
                    "pollInterval": "15s",
                },
            }),
            ExpectedSource {
                kind: "ClusterGitTrack",
                namespace: String::new(),
                name: FOO_CORP.to_owned(),
                commit: served.head(FOO_CORP).to_owned(),
            },
        ),
        (
            json!({
                "apiVersion": "arbor.dev/v1alpha1",
                "kind": "GitTrack",
                "metadata": {"name": FLAT_APP, "namespace": FLAT_APP_NAMESPACE},
                "spec": {
                    "repository": served.url(FLAT_APP),
                    "reference": {"branch": "main"},
                    "layout": "Flat",
                    "pollInterval": "15s",
                },
            }),
            ExpectedSource {
                kind: "GitTrack",
                namespace: FLAT_APP_NAMESPACE.to_owned(),
                name: FLAT_APP.to_owned(),
                commit: served.head(FLAT_APP).to_owned(),
            },
        ),
    ];
    let mut expected = Vec::new();
    for (object, source) in sources {
        apply(client, &object, None).await?;
        progress::done(&format!(
            "{} {} follows {}",
            source.kind,
            source.name,
            object["spec"]["repository"].as_str().unwrap_or_default()
        ));
        expected.push(source);
    }
    for file in ["tree.yaml", "application.yaml"] {
        let path: PathBuf = examples.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|error| anyhow::anyhow!("reading {}: {error}", path.display()))?;
        let applied = apply_yaml(client, &path.display().to_string(), &text, None).await?;
        progress::done(&format!("applied {file} ({} objects)", applied.len()));
    }
    Ok(expected)
}

/// Whether `status` shows `expected` synced at its commit with every object in sync.
pub fn is_synced(status: &SourceStatus, expected: &ExpectedSource) -> bool {
    let counters = status.counters.unwrap_or_default();
    status.observed_commit == expected.commit
        && status.errors.is_empty()
        && counters.discovered > 0
        && counters.in_sync + counters.ignored >= counters.discovered
}

fn matches(status: &SourceStatus, expected: &ExpectedSource) -> bool {
    status.source.as_ref().is_some_and(|source| {
        source.name == expected.name && source.namespace == expected.namespace
    })
}

/// Waits for the sources to sync, the sub-namespaces to hold the template's Secret, and the
/// Application's Deployment to exist.
pub async fn wait_until_converged(
    system: &System,
    connection: &Resolved,
    expected: &[ExpectedSource],
    timeout: Duration,
) -> anyhow::Result<()> {
    progress::step("waiting for the sources to sync");
    let remote = connection.connect(Service::Sync).await?;
    let ticker = std::sync::Mutex::new(Ticker::new(Duration::from_secs(5)));
    eventually("every source synced at its commit", timeout, || {
        let mut client = SyncServiceClient::new(remote.channel());
        let ticker = &ticker;
        async move {
            let statuses = client
                .get_status(GetStatusRequest { source: None })
                .await
                .map(|response| response.into_inner().sources)
                .unwrap_or_default();
            let waiting: Vec<&str> = expected
                .iter()
                .filter(|want| {
                    !statuses
                        .iter()
                        .any(|s| matches(s, want) && is_synced(s, want))
                })
                .map(|want| want.name.as_str())
                .collect();
            if waiting.is_empty() {
                return anyhow::Ok(Some(()));
            }
            if let Ok(mut ticker) = ticker.lock() {
                ticker.tick(&waiting.join(", "));
            }
            Ok(None)
        }
    })
    .await?;
    progress::done("every source is synced");

    progress::step("waiting for the namespace tree and the Application");
    for namespace in SUB_NAMESPACES {
        let secrets = Api::<Secret>::namespaced(system.client.clone(), namespace);
        eventually(
            &format!("Secret {PROPAGATED_SECRET} propagated into {namespace}"),
            timeout,
            || {
                let secrets = secrets.clone();
                async move {
                    anyhow::Ok(
                        secrets
                            .get_opt(PROPAGATED_SECRET)
                            .await
                            .ok()
                            .flatten()
                            .map(drop),
                    )
                }
            },
        )
        .await?;
    }
    progress::done("sub-namespaces created, template Secret propagated");
    let applications = Api::<Application>::namespaced(system.client.clone(), FLAT_APP_NAMESPACE);
    eventually("the Application web to be Running", timeout, || {
        let applications = applications.clone();
        async move {
            let application = applications.get_opt(APPLICATION).await.ok().flatten();
            let state = application
                .and_then(|application| application.status)
                .map(|status| status.state);
            anyhow::Ok((state == Some(ApplicationState::Running)).then_some(()))
        }
    })
    .await?;
    progress::done("the Application is applied and observed");
    Ok(())
}
