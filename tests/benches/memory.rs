//! `make bench`: each controller's memory as its own process, at the sizes issue 21 names.
//!
//! For each controller, arbor-kube-emu and that controller alone are started as processes
//! (the binaries of the bench's own build, release under `cargo bench`), so the figure is the
//! controller's own and not the emulator's. The controller's resident set is read from `/proc/<pid>/status` three
//! times: idle after start-up (the baseline: the same binary with nothing to do), its peak
//! (`VmHWM`) once the load is done, and its resident set after a quiet period (settled). The
//! loads:
//!
//! - **gitsync**: one GitTrack of 10,000 ConfigMaps in 100 files, served by git over HTTP on
//!   loopback; done when the GitTrack's status shows the commit;
//! - **observer**: 1,000 Applications of three objects (Deployment, Service, ConfigMap), each
//!   with its observer schema; done when every Application is Running with an observed
//!   manifest;
//! - **hierarchy**: one root with 10 ConfigMaps marked `propagate=update` and 1,000
//!   sub-namespaces; done when all 10,000 copies exist;
//! - **webhook**: 1,000 sub-namespaces created and then relabelled through the API server, so
//!   2,000 admission reviews, plus its reflectors of the 1,000 namespaces.
//!
//! With `ARBOR_BENCH_LARGE=1`, gitsync again with 100,000 ConfigMaps (`ARBOR_BENCH_LARGE_OBJECTS`
//! changes that size), held to 300 MiB (issue 21 item 3).
//!
//! Memory is counted in pages, so the figures do not move with CPU load from other work on
//! the machine; times would, so none are reported. Smaller runs: `ARBOR_BENCH_SCALE` divides
//! every size (e.g. `10`), and `ARBOR_BENCH_MEMORY_ONLY=gitsync,webhook` picks controllers.
//! The targets hold at full size only, so a scaled run gives no verdict. Emits the shared
//! results table ([`arbor_testkit::bench`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use arbor_api::{Application, ApplicationState, GitTrack};
use arbor_e2e::system::{ServedRepo, TestSystem, start};
use arbor_policy::keys::Keys;
use arbor_testkit::bench::{self, Table};
use arbor_testkit::cluster::ensure_namespace;
use arbor_testkit::memory::{Memory, mib};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// How long a load may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(900);
/// The pause after start-up before the idle reading, and after the load before the settled one.
const QUIET: Duration = Duration::from_secs(5);
const MIB: u64 = 1024;

/// The sizes of the loads.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    config_maps: usize,
    applications: usize,
    namespaces: usize,
    propagated: usize,
}

impl Sizes {
    fn from_env() -> anyhow::Result<Sizes> {
        Ok(Sizes {
            config_maps: bench::size("ARBOR_BENCH_MEMORY_CONFIGMAPS", 10_000)?,
            applications: bench::size("ARBOR_BENCH_MEMORY_APPLICATIONS", 1_000)?,
            namespaces: bench::size("ARBOR_BENCH_MEMORY_NAMESPACES", 1_000)?,
            propagated: 10,
        })
    }
}

/// One controller's readings and what it is held to.
struct Reading {
    controller: &'static str,
    load: String,
    idle: Memory,
    loaded: Memory,
    settled: Memory,
    target_mib: u64,
}

fn main() -> anyhow::Result<()> {
    let sizes = Sizes::from_env()?;
    let only = std::env::var("ARBOR_BENCH_MEMORY_ONLY").ok();
    let chosen = |name: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|n| n.trim() == name))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    runtime.block_on(async {
        if chosen("gitsync") {
            rows.push(gitsync(sizes.config_maps, 100).await.context("gitsync")?);
            if bench::large() {
                let large = bench::size("ARBOR_BENCH_LARGE_OBJECTS", 100_000)?;
                rows.push(gitsync(large, 300).await.context("gitsync, large")?);
            }
        }
        if chosen("observer") {
            rows.push(observer(sizes).await.context("observer")?);
        }
        if chosen("hierarchy") {
            rows.push(hierarchy(sizes).await.context("hierarchy")?);
        }
        if chosen("webhook") {
            rows.push(webhook(sizes).await.context("webhook")?);
        }
        anyhow::Ok(())
    })?;
    print(&rows)
}

fn print(rows: &[Reading]) -> anyhow::Result<()> {
    let mut table = Table::new("Memory per controller, each its own process");
    table.note(format!(
        "arbor-kube-emu and the controller as separate processes (the binaries of the bench's \
         own build: release under `cargo bench`); resident memory from /proc/<pid>/status. \
         Measured: the peak (VmHWM) once the load is done, and VmRSS {} s later (settled). \
         Baseline: the same binary idle before the load.",
        QUIET.as_secs()
    ));
    for row in rows {
        table.row(
            bench::Row::new(
                format!("arbor-{} RSS: {}", row.controller, row.load),
                format!(
                    "peak {}, settled {}",
                    mib(row.loaded.peak_kib),
                    mib(row.settled.resident_kib)
                ),
            )
            .baseline(format!("idle {}", mib(row.idle.resident_kib)))
            .target(
                format!("peak < {} MiB", row.target_mib),
                row.loaded.peak_kib < row.target_mib * MIB,
            ),
        );
    }
    table.emit()?;
    Ok(())
}

/// The system with only `controller`, its process id and its idle reading.
async fn started(controller: &str) -> anyhow::Result<(TestSystem, u32, Memory)> {
    let system = start(&[controller]).await?;
    let pid = controller_of(&system, controller)?;
    tokio::time::sleep(QUIET).await;
    let idle = Memory::of_pid(pid)?;
    Ok((system, pid, idle))
}

fn controller_of(system: &TestSystem, name: &str) -> anyhow::Result<u32> {
    let controller = match name {
        "gitsync" => &system.gitsync,
        "observer" => &system.observer,
        "hierarchy" => &system.hierarchy,
        "webhook" => &system.webhook,
        other => bail!("no controller {other}"),
    };
    controller
        .as_ref()
        .and_then(|controller| controller.process.pid())
        .with_context(|| format!("arbor-{name} is not running"))
}

/// The peak once the load is done and the resident set after a quiet period.
async fn after_load(pid: u32) -> anyhow::Result<(Memory, Memory)> {
    let loaded = Memory::of_pid(pid)?;
    tokio::time::sleep(QUIET).await;
    Ok((loaded, Memory::of_pid(pid)?))
}

/// Polls `probe` until it says done; fails after [`PATIENCE`] with its last answer.
async fn wait_until<F, Fut>(what: &str, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<(), String>>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        let last = match probe().await? {
            Ok(()) => return Ok(()),
            Err(last) => last,
        };
        if Instant::now() > deadline {
            bail!("{what}: not done after {PATIENCE:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// gitsync syncing `config_maps` ConfigMaps, held to `target_mib`.
async fn gitsync(config_maps: usize, target_mib: u64) -> anyhow::Result<Reading> {
    const FILES: usize = 100;
    let (system, pid, idle) = started("gitsync").await?;
    let client = system.client.clone();
    ensure_namespace(&client, "bench").await?;
    let served = ServedRepo::new("bench", None)?;
    for file in 0..FILES {
        let mut text = String::new();
        for index in (file..config_maps).step_by(FILES) {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\ndata:\n  value: v{index}\n"
            ));
        }
        served.repo.write(&format!("file-{file}.yaml"), &text)?;
    }
    let commit = served.repo.commit_all("ConfigMaps")?;
    let sources: Api<GitTrack> = Api::namespaced(client.clone(), "bench");
    sources
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": "bench", "namespace": "bench"},
                "spec": served.source_spec("Flat"),
            }))?,
        )
        .await?;
    wait_until("the GitTrack synced", || async {
        let status = sources.get("bench").await?.status.unwrap_or_default();
        Ok(match status.observed_commit {
            Some(observed) if observed == commit => Ok(()),
            other => Err(format!("observed commit {other:?}, want {commit}")),
        })
    })
    .await?;
    let (loaded, settled) = after_load(pid).await?;
    Ok(Reading {
        controller: "gitsync",
        load: format!("one GitTrack of {config_maps} ConfigMaps ({FILES} files), synced"),
        idle,
        loaded,
        settled,
        target_mib,
    })
}

/// Application `name`: a Deployment, a Service and a ConfigMap, each with an observer schema.
fn application(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "manifest": [
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
                 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                          "template": {"metadata": {"labels": {"app": name}},
                                       "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                                                "ports": [{"containerPort": 80}]}]}}}},
                {"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": name, "namespace": "shop"},
                 "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 80}]}},
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": name, "namespace": "shop"},
                 "data": {"mode": "declared"}},
            ],
            "observerSchema": [
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": name, "namespace": "shop", "labels": {"app": null}},
                 "spec": {"replicas": null, "template": {"spec": {"containers": [
                     {"name": null, "image": null},
                     {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 1}]}}}},
                {"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": name, "namespace": "shop"},
                 "spec": {"ports": [{"port": null},
                     {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 1}]}},
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": name, "namespace": "shop"},
                 "data": {"mode": null}},
            ],
        },
    })
}

async fn observer(sizes: Sizes) -> anyhow::Result<Reading> {
    let (system, pid, idle) = started("observer").await?;
    let client = system.client.clone();
    ensure_namespace(&client, "shop").await?;
    let applications: Api<Application> = Api::namespaced(client.clone(), "shop");
    for index in 0..sizes.applications {
        let name = format!("app-{index}");
        applications
            .create(
                &PostParams::default(),
                &serde_json::from_value(application(&name))?,
            )
            .await
            .with_context(|| format!("creating Application {name}"))?;
    }
    wait_until("every Application running and observed", || async {
        let listed = applications.list(&ListParams::default()).await?.items;
        let running = listed
            .iter()
            .filter(|application| {
                application.status.as_ref().is_some_and(|status| {
                    status.state == ApplicationState::Running
                        && status.observed_generation == application.metadata.generation
                        && status.last_observed_manifest.len() == 3
                })
            })
            .count();
        Ok(if running == sizes.applications {
            Ok(())
        } else {
            Err(format!("{running} of {} running", sizes.applications))
        })
    })
    .await?;
    let (loaded, settled) = after_load(pid).await?;
    Ok(Reading {
        controller: "observer",
        load: format!(
            "{} Applications × 3 objects, all Running and observed",
            sizes.applications
        ),
        idle,
        loaded,
        settled,
        target_mib: 150,
    })
}

/// Creates `count` namespaces `<prefix>-<i>` under `root` (labelled with the parent label).
async fn create_children(client: &Client, root: &str, count: usize) -> anyhow::Result<()> {
    let keys = Keys::default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for index in 0..count {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("{root}-{index}"),
                         "labels": {keys.parent_label.clone(): root}}});
        namespaces
            .create(&PostParams::default(), &serde_json::from_value(namespace)?)
            .await
            .with_context(|| format!("creating namespace {root}-{index}"))?;
    }
    Ok(())
}

async fn create_root(client: &Client, root: &str) -> anyhow::Result<()> {
    let keys = Keys::default();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": root, "labels": {keys.type_label.clone(): "root"}}});
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &serde_json::from_value(namespace)?)
        .await
        .with_context(|| format!("creating namespace {root}"))?;
    Ok(())
}

async fn hierarchy(sizes: Sizes) -> anyhow::Result<Reading> {
    let (system, pid, idle) = started("hierarchy").await?;
    let client = system.client.clone();
    let keys = Keys::default();
    create_root(&client, "tree").await?;
    create_children(&client, "tree", sizes.namespaces).await?;
    let sources: Api<ConfigMap> = Api::namespaced(client.clone(), "tree");
    for index in 0..sizes.propagated {
        let source = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("shared-{index}"), "namespace": "tree",
                         "annotations": {keys.propagate_annotation.clone(): "update"}},
            "data": {"value": format!("v{index}"), "settings": "x".repeat(200)}});
        sources
            .patch(
                &format!("shared-{index}"),
                &PatchParams::apply("bench"),
                &Patch::Apply(&source),
            )
            .await?;
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let wanted = sizes.namespaces * sizes.propagated;
    wait_until("every copy made", || async {
        let mut copies: BTreeMap<bool, usize> = BTreeMap::new();
        for config_map in all.list(&ListParams::default()).await?.items {
            let copy = config_map.metadata.namespace.as_deref() != Some("tree")
                && config_map
                    .metadata
                    .name
                    .as_deref()
                    .is_some_and(|name| name.starts_with("shared-"));
            *copies.entry(copy).or_default() += 1;
        }
        let made = copies.get(&true).copied().unwrap_or(0);
        Ok(if made == wanted {
            Ok(())
        } else {
            Err(format!("{made} of {wanted} copies"))
        })
    })
    .await?;
    let (loaded, settled) = after_load(pid).await?;
    Ok(Reading {
        controller: "hierarchy",
        load: format!(
            "{} namespaces × {} propagated ConfigMaps, all copied",
            sizes.namespaces, sizes.propagated
        ),
        idle,
        loaded,
        settled,
        target_mib: 100,
    })
}

async fn webhook(sizes: Sizes) -> anyhow::Result<Reading> {
    let (system, pid, idle) = started("webhook").await?;
    let client = system.client.clone();
    create_root(&client, "reviewed").await?;
    // Each create and each relabel is one admission review the webhook answers.
    create_children(&client, "reviewed", sizes.namespaces).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for index in 0..sizes.namespaces {
        namespaces
            .patch(
                &format!("reviewed-{index}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"stage": "reviewed"}}})),
            )
            .await?;
    }
    let (loaded, settled) = after_load(pid).await?;
    Ok(Reading {
        controller: "webhook",
        load: format!(
            "{} namespaces in its tree; {} admission reviews (create, relabel)",
            sizes.namespaces + 1,
            2 * sizes.namespaces + 1
        ),
        idle,
        loaded,
        settled,
        target_mib: 50,
    })
}
