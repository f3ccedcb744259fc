//! Syncing a large flat source into arbor-kube-emu (in process, loopback HTTP).
//!
//! One GitTrack declares `ARBOR_BENCH_OBJECTS` ConfigMaps (default 10,000) in 100 multi-document
//! files. The figures:
//!
//! - **initial sync**: from creating the GitTrack to its status showing the commit; writes are
//!   the emulator's revision delta (each object and its GitTrackObject, the status, Events);
//! - **unchanged resync**: one full round (fetch, list, compare every object) on the same
//!   commit; writes must be 0;
//! - **commit to applied**: one object changed in a new commit, from the commit to the changed
//!   object on the cluster, with a round requested at the commit (as `TriggerSync` does).
//!
//! Prints markdown; run with `cargo bench -p arbor-gitsync --bench sync`.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use arbor_api::GitTrack;
use arbor_api::keys::SourceRef;
use arbor_gitsync::run::{Args, Running};
use arbor_kube_emu::KubeEmu;
use arbor_runtime::Component;
use arbor_testkit::GitRepo;
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const FILES: usize = 100;
const PATIENCE: Duration = Duration::from_secs(600);

fn objects() -> usize {
    std::env::var("ARBOR_BENCH_OBJECTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10_000)
}

/// Writes the ConfigMaps into `repo`, `changed` with another value, and commits.
fn commit(repo: &GitRepo, count: usize, changed: Option<usize>) -> anyhow::Result<String> {
    for file in 0..FILES {
        let mut text = String::new();
        for index in (file..count).step_by(FILES) {
            let value = if changed == Some(index) {
                "changed"
            } else {
                "initial"
            };
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\ndata:\n  value: {value}\n"
            ));
        }
        repo.write(&format!("file-{file}.yaml"), &text)?;
    }
    Ok(repo.commit_all("bench")?)
}

async fn wait_for<F, Fut>(what: &str, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + PATIENCE;
    while !probe().await? {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

async fn full_round(running: &Running, source: &SourceRef) {
    let registry = &running.context().registry;
    let before = registry.get(source).map_or(0, |record| record.rounds);
    registry.request_round(source);
    registry.wait_for_round(source, before, PATIENCE).await;
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count = objects();
    let emu = KubeEmu::start().await?;
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
    arbor_testkit::cluster::install_crds(&client, PATIENCE).await?;
    arbor_testkit::cluster::ensure_namespace(&client, "bench").await?;

    let repo_dir = tempfile::tempdir()?;
    let repo = GitRepo::init(repo_dir.path().join("repo"))?;
    let first = commit(&repo, count, None)?;
    let cache = tempfile::tempdir()?;
    let cache_flag = format!("--cache-dir={}", cache.path().display());
    let args = Args::try_parse_from([
        "arbor-gitsync",
        "--leader-election=false",
        "--grpc-addr=127.0.0.1:0",
        "--admin-addr=127.0.0.1:0",
        "--allow-file-repositories",
        "--gittrack-mode=Enabled",
        "--clustergittrack-mode=Disabled",
        &cache_flag,
    ])?;
    let settings = args.settings()?;
    let component = Component::with_client("gitsync", args.common.clone(), client.clone())?;
    let running = arbor_gitsync::run::start(component, settings)
        .await?
        .context("stopped while starting")?;

    let sources: Api<GitTrack> = Api::namespaced(client.clone(), "bench");
    let source = SourceRef::GitTrack {
        namespace: "bench".into(),
        name: "bench".into(),
    };
    let revision = emu.resource_version();
    let started = Instant::now();
    sources
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": "bench", "namespace": "bench"},
                "spec": {"repository": repo.file_url(),
                         "reference": {"branch": "main"}, "layout": "Flat", "pollInterval": "1h"},
            }))?,
        )
        .await?;
    wait_for("the initial sync", || async {
        let status = sources.get("bench").await?.status.unwrap_or_default();
        Ok(status.observed_commit.as_deref() == Some(first.as_str()))
    })
    .await?;
    let initial = started.elapsed();
    let initial_writes = emu.resource_version() - revision;
    // Let the events of the first round land before measuring the resync.
    full_round(&running, &source).await;

    let revision = emu.resource_version();
    let started = Instant::now();
    full_round(&running, &source).await;
    let resync = started.elapsed();
    let resync_writes = emu.resource_version() - revision;

    let changed = count / 2;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "bench");
    let started = Instant::now();
    commit(&repo, count, Some(changed))?;
    running.context().registry.request_round(&source);
    wait_for("the changed object", || async {
        let live = configmaps.get(&format!("cm-{changed}")).await?;
        Ok(live
            .data
            .unwrap_or_default()
            .get("value")
            .map(String::as_str)
            == Some("changed"))
    })
    .await?;
    let latency = started.elapsed();

    println!(
        "## arbor-gitsync: sync into arbor-kube-emu ({count} ConfigMaps, {FILES} files, one GitTrack)"
    );
    println!();
    println!("| measurement | time | writes |");
    println!("|---|---|---|");
    println!(
        "| initial sync | {:.2} s | {initial_writes} |",
        initial.as_secs_f64()
    );
    println!(
        "| unchanged resync (full compare) | {:.2} s | {resync_writes} |",
        resync.as_secs_f64()
    );
    println!(
        "| commit to applied, one changed object | {:.0} ms | |",
        latency.as_secs_f64() * 1000.0
    );
    println!();
    if resync_writes != 0 {
        bail!("an unchanged resync wrote {resync_writes} times");
    }
    running.stop().await;
    emu.shutdown().await;
    Ok(())
}
