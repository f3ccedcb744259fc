//! Drift of git-managed objects, end to end: `arbor-kube-emu`, `arbor-gitsync` and
//! `arbor-observer` as processes, a GitTrack following a flat repository on `file://`, and a
//! user who edits ConfigMaps the way `kubectl edit` does (a merge patch under their own field
//! manager).
//!
//! - With the observer running and gitsync's resync period at ten minutes, only the observer's
//!   `SyncService.ReportDrift` can put a managed ConfigMap back quickly: the test measures how
//!   long that takes and prints `drift reverted in N ms` (see it with `--nocapture`). The time
//!   is information, not an assertion; the bound is only a timeout.
//! - A ConfigMap that git declares but that carries no management label is the user's
//!   (seeds/000: declared, on cluster, no label: no action): their edit stays.
//! - With the observer stopped, gitsync's periodic resync repairs the drift on its own.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use arbor_e2e::eventually;
use arbor_e2e::system::{TestSystem, WAIT, namespaced_source, sync_to};
use arbor_testkit::cluster::{apply, ensure_namespace};
use arbor_testkit::{GitRepo, Process, System, SystemConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAMESPACE: &str = "demo";
const GITTRACK: &str = "demo";
/// Declared in git; gitsync creates it, with the management label.
const MANAGED: &str = "settings";
/// Declared in git too, but created by a user before Arbor and never labelled.
const UNLABELLED: &str = "legacy";
const MANAGEMENT_LABEL: (&str, &str) = ("arbor.dev/managed", "enabled");
const GIT_COLOR: &str = "blue";
const USER_COLOR: &str = "green";
const EDITED_COLOR: &str = "red";
/// How often the revert is looked for while it is timed.
const REVERT_POLL: Duration = Duration::from_millis(10);
/// The limit of the timed wait: a timeout, not a statement about speed.
const REVERT_BOUND: Duration = Duration::from_secs(30);
/// What arbor-gitsync logs when it re-applies an object after a ReportDrift.
const DRIFT_REPORTED: &str = "drift reported";

/// The repository: one flat file declaring both ConfigMaps.
fn declared_config_maps() -> String {
    [MANAGED, UNLABELLED]
        .map(|name| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\ndata:\n  color: {GIT_COLOR}\n"
            )
        })
        .join("---\n")
}

/// The directory of the three binaries this file runs, built first.
fn bin_dir() -> anyhow::Result<PathBuf> {
    let mut dir = None;
    for package in ["arbor-kube-emu", "arbor-gitsync", "arbor-observer"] {
        dir = arbor_e2e::binary(package, package)?
            .parent()
            .map(PathBuf::from);
    }
    dir.context("no binary was built")
}

/// A running system whose GitTrack has synced.
struct Synced {
    system: TestSystem,
    /// The ConfigMaps of [`NAMESPACE`].
    config_maps: Api<ConfigMap>,
    /// The commit the GitTrack follows.
    commit: String,
}

/// The emulator, gitsync (resyncing every `resync_period`) and the observer; the user's
/// unlabelled ConfigMap; a GitTrack synced to the repository; the observer's drift watches
/// listed.
async fn start_synced(resync_period: &str) -> anyhow::Result<Synced> {
    let dir = tempfile::tempdir()?;
    let mut config = SystemConfig::new(dir.path().join("system"))?.only(&["gitsync", "observer"]);
    config.bin_dir = bin_dir()?;
    config.resync_period = resync_period.to_owned();
    config.startup_timeout = WAIT;
    config.cluster = arbor_e2e::source::cluster_source();
    let system = TestSystem::start(config, dir).await?;
    let client = system.client.clone();
    ensure_namespace(&client, NAMESPACE).await?;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": UNLABELLED, "namespace": NAMESPACE},
                "data": {"color": USER_COLOR}}),
        None,
    )
    .await?;

    let repo = GitRepo::init(system.dir.path().join("repo"))?;
    let commit = repo.commit_file(
        "config-maps.yaml",
        &declared_config_maps(),
        "Declare the ConfigMaps",
    )?;
    apply(
        &client,
        &json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": GITTRACK, "namespace": NAMESPACE},
                "spec": {"repository": repo.file_url(), "reference": {"branch": "main"},
                         "layout": "Flat", "pollInterval": "1h"}}),
        None,
    )
    .await?;
    sync_to(&system, namespaced_source(NAMESPACE, GITTRACK), &commit).await?;

    let config_maps = Api::<ConfigMap>::namespaced(client, NAMESPACE);
    let managed = config_maps.get(MANAGED).await?;
    ensure!(
        label(&managed).as_deref() == Some(MANAGEMENT_LABEL.1),
        "gitsync created {MANAGED} without the management label: {managed:?}"
    );
    wait_until_observer_ready(&system).await?;
    Ok(Synced {
        system,
        config_maps,
        commit,
    })
}

/// Waits until the observer's `/readyz` answers 200: every drift watch has its initial list, so
/// an edit from now on is seen as a change.
async fn wait_until_observer_ready(system: &System) -> anyhow::Result<()> {
    let admin = system
        .observer
        .as_ref()
        .context("arbor-observer is not running")?
        .admin;
    eventually("arbor-observer ready", WAIT, || async move {
        let Ok(mut stream) = tokio::net::TcpStream::connect(admin).await else {
            return Ok(None);
        };
        let request = format!("GET /readyz HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
        let mut response = String::new();
        let answered = stream.write_all(request.as_bytes()).await.is_ok()
            && stream.read_to_string(&mut response).await.is_ok();
        Ok((answered && response.starts_with("HTTP/1.1 200")).then_some(()))
    })
    .await?;
    Ok(())
}

fn color(config_map: &ConfigMap) -> Option<&str> {
    config_map.data.as_ref()?.get("color").map(String::as_str)
}

fn label(config_map: &ConfigMap) -> Option<String> {
    config_map
        .metadata
        .labels
        .as_ref()?
        .get(MANAGEMENT_LABEL.0)
        .cloned()
}

/// Sets `color` of `name` as a user would with `kubectl edit`; fails unless the edit landed.
async fn user_edits(config_maps: &Api<ConfigMap>, name: &str, value: &str) -> anyhow::Result<()> {
    let edited = config_maps
        .patch(
            name,
            &PatchParams {
                field_manager: Some("kubectl-edit".to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"data": {"color": value}})),
        )
        .await
        .with_context(|| format!("editing {NAMESPACE}/{name}"))?;
    ensure!(
        color(&edited) == Some(value),
        "the edit of {name} did not land: {edited:?}"
    );
    Ok(())
}

/// The time from now until `name` has git's value again, polled every [`REVERT_POLL`]; fails
/// after [`REVERT_BOUND`].
async fn time_until_reverted(config_maps: &Api<ConfigMap>, name: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let current = config_maps.get(name).await?;
        if color(&current) == Some(GIT_COLOR) {
            return Ok(start.elapsed());
        }
        ensure!(
            start.elapsed() < REVERT_BOUND,
            "{NAMESPACE}/{name} still has color {:?} after {REVERT_BOUND:?}",
            color(&current)
        );
        tokio::time::sleep(REVERT_POLL).await;
    }
}

/// The running arbor-gitsync process.
fn gitsync(system: &System) -> anyhow::Result<&Process> {
    Ok(&system
        .gitsync
        .as_ref()
        .context("arbor-gitsync is not running")?
        .process)
}

/// What `process` logged after the first `offset` bytes.
fn log_since(process: &Process, offset: usize) -> String {
    process.log().get(offset..).unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_reports_a_managed_edit_and_gitsync_reverts_it_while_an_unlabelled_edit_stays()
-> anyhow::Result<()> {
    let Synced {
        system,
        config_maps,
        commit,
    } = start_synced("10m").await?;
    let gitsync = gitsync(&system)?;
    let log_offset = gitsync.log().len();

    // The unlabelled ConfigMap is edited first, so that by the time the managed one is back,
    // the observer and gitsync have had every chance to touch it.
    user_edits(&config_maps, UNLABELLED, EDITED_COLOR).await?;
    user_edits(&config_maps, MANAGED, EDITED_COLOR).await?;
    let took = time_until_reverted(&config_maps, MANAGED).await?;
    println!("drift reverted in {} ms", took.as_millis());

    let reverted = config_maps.get(MANAGED).await?;
    assert_eq!(label(&reverted).as_deref(), Some(MANAGEMENT_LABEL.1));
    // Ten minutes of resync period: the revert came from the observer's report.
    eventually("gitsync to log the drift report", WAIT, || async {
        Ok(log_since(gitsync, log_offset)
            .contains(DRIFT_REPORTED)
            .then_some(()))
    })
    .await?;

    // A full sync round does not take the user's ConfigMap either.
    sync_to(&system, namespaced_source(NAMESPACE, GITTRACK), &commit).await?;
    let unlabelled = config_maps.get(UNLABELLED).await?;
    assert_eq!(color(&unlabelled), Some(EDITED_COLOR), "{unlabelled:?}");
    assert_eq!(label(&unlabelled), None, "{unlabelled:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_observer_gitsyncs_resync_reverts_a_managed_edit() -> anyhow::Result<()> {
    let Synced {
        mut system,
        config_maps,
        ..
    } = start_synced("2s").await?;
    let mut observer = system
        .observer
        .take()
        .context("arbor-observer is not running")?;
    observer.process.stop(Duration::from_secs(10))?;
    let gitsync = gitsync(&system)?;
    let log_offset = gitsync.log().len();

    user_edits(&config_maps, MANAGED, EDITED_COLOR).await?;
    let took = time_until_reverted(&config_maps, MANAGED).await?;
    println!(
        "drift reverted by gitsync's resync, without the observer, in {} ms",
        took.as_millis()
    );

    let reverted = config_maps.get(MANAGED).await?;
    assert_eq!(label(&reverted).as_deref(), Some(MANAGEMENT_LABEL.1));
    let log = log_since(gitsync, log_offset);
    assert!(
        !log.contains(DRIFT_REPORTED),
        "nobody reported drift, yet gitsync logged a report:\n{log}"
    );
    Ok(())
}
