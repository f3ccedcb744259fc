//! `make bench`: sources synced by one gitsync replica and by three sharing them (issue 22).
//!
//! The same load twice, each on a fresh arbor-kube-emu (in this process) with arbor-gitsync
//! replicas as processes of their own (`--shards 6`, as `e2e_shards` runs them): `SOURCES`
//! GitTracks, each its own repository of `OBJECTS` ConfigMaps in its own namespace. The
//! replicas start first and share the shard Leases evenly; the figure runs from creating the
//! GitTracks to every GitTrack's status showing its commit. Each replica's peak resident set
//! (`VmHWM`) is read once the sync is done. The one-replica run is the baseline of the
//! three-replica one; the issue sets no target, so the rows give figures only.
//!
//! Sizes: 100 sources × 1,000 objects with `ARBOR_BENCH_LARGE=1` (issue 22's size); by default
//! 100 sources × 100 objects, which keeps `make bench` within its 30 minutes on two cores.
//! `ARBOR_BENCH_SCALEOUT_SOURCES` / `ARBOR_BENCH_SCALEOUT_OBJECTS` (or the shared
//! `ARBOR_BENCH_SCALE`) change them. Emits the shared results table ([`arbor_testkit::bench`]).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use arbor_api::GitTrack;
use arbor_e2e::shards::{GITSYNC_LEASES, LEASE_NAMESPACE, Replica, SHARDS, gitsync_flags};
use arbor_kube_emu::KubeEmu;
use arbor_testkit::bench::{self, Row, Table};
use arbor_testkit::cluster::{apply, ensure_namespace, install_crds};
use arbor_testkit::memory::{Memory, mib};
use arbor_testkit::{GitRepo, Process};
use kube::Api;
use serde_json::json;

const FILES: usize = 10;
/// How long one run may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(1200);
/// How long the replicas may take to share the Leases.
const BALANCE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
struct Load {
    sources: usize,
    objects: usize,
}

/// One run's figures.
struct Run {
    elapsed: Duration,
    writes: u64,
    /// Each replica's name and peak resident set.
    peaks: Vec<(String, Memory)>,
}

fn team(source: usize) -> String {
    format!("team-{source:03}")
}

/// One repository per source, each declaring `objects` ConfigMaps; their commits.
fn repositories(dir: &Path, load: Load) -> anyhow::Result<Vec<(GitRepo, String)>> {
    (0..load.sources)
        .map(|source| {
            let namespace = team(source);
            let repo = GitRepo::init(dir.join(format!("repo-{namespace}")))?;
            for file in 0..FILES {
                let mut text = String::new();
                for index in (file..load.objects).step_by(FILES) {
                    text.push_str(&format!(
                        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\n  namespace: {namespace}\ndata:\n  value: v{index}\n"
                    ));
                }
                repo.write(&format!("file-{file}.yaml"), &text)?;
            }
            let commit = repo.commit_all("ConfigMaps")?;
            Ok((repo, commit))
        })
        .collect()
}

fn replica(emu: &KubeEmu, dir: &Path, name: &str) -> Process {
    let flags = gitsync_flags(&dir.join(format!("cache-{name}")));
    Replica {
        binary: "arbor-gitsync",
        name,
        lease_duration: Duration::from_secs(15),
    }
    .start(emu, dir, &GITSYNC_LEASES, &flags)
}

/// `replicas` gitsync processes sync `load` on a fresh emulator.
async fn run(replicas: usize, load: Load) -> anyhow::Result<Run> {
    let emu = KubeEmu::start().await?;
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
    install_crds(&client, BALANCE).await?;
    ensure_namespace(&client, LEASE_NAMESPACE).await?;
    let tempdir = tempfile::tempdir()?;
    let dir = tempdir.path();
    let repos = repositories(dir, load)?;
    for source in 0..load.sources {
        ensure_namespace(&client, &team(source)).await?;
    }
    let names: Vec<String> = (0..replicas).map(|i| format!("gitsync-{i}")).collect();
    let mut processes: Vec<Process> = names.iter().map(|name| replica(&emu, dir, name)).collect();
    GITSYNC_LEASES.balanced(&client, &names, BALANCE).await;

    emu.requests().reset();
    let started = Instant::now();
    for (source, (repo, _)) in repos.iter().enumerate() {
        let track = json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
            "metadata": {"name": "app", "namespace": team(source)},
            "spec": {"repository": repo.file_url(), "reference": {"branch": "main"},
                     "layout": "Flat", "pollInterval": "1h"},
        });
        apply(&client, &track, None).await?;
    }
    let tracks: Api<GitTrack> = Api::all(client.clone());
    loop {
        let synced = tracks
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|track| {
                let namespace = track.metadata.namespace.as_deref().unwrap_or_default();
                let wanted = namespace
                    .strip_prefix("team-")
                    .and_then(|index| index.parse::<usize>().ok())
                    .and_then(|index| repos.get(index))
                    .map(|(_, commit)| commit.as_str());
                let observed = track
                    .status
                    .as_ref()
                    .and_then(|status| status.observed_commit.as_deref());
                wanted.is_some() && observed == wanted
            })
            .count();
        if synced == load.sources {
            break;
        }
        if started.elapsed() > PATIENCE {
            bail!(
                "{replicas} replica(s): {synced} of {} sources synced after {PATIENCE:?}",
                load.sources
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    let writes = emu.requests().writes();
    let mut peaks = Vec::new();
    for (name, process) in names.iter().zip(&processes) {
        let Some(pid) = process.pid() else {
            bail!("{name} is not running");
        };
        peaks.push((name.clone(), Memory::of_pid(pid)?));
    }
    for process in &mut processes {
        let _ = process.stop(Duration::from_secs(10));
    }
    emu.shutdown().await;
    Ok(Run {
        elapsed,
        writes,
        peaks,
    })
}

fn main() -> anyhow::Result<()> {
    let objects = if bench::large() { 1_000 } else { 100 };
    let load = Load {
        sources: bench::size("ARBOR_BENCH_SCALEOUT_SOURCES", 100)?,
        objects: bench::size("ARBOR_BENCH_SCALEOUT_OBJECTS", objects)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let one = runtime.block_on(run(1, load))?;
    let three = runtime.block_on(run(3, load))?;

    let mut table = Table::new(format!(
        "arbor-gitsync scale-out: {} sources × {} objects, 1 and 3 replicas",
        load.sources, load.objects
    ));
    table.note(format!(
        "Each run on a fresh arbor-kube-emu in the bench's process; the replicas as processes \
         with --shards {SHARDS}, started and sharing the shard Leases before the GitTracks are \
         created (one repository per source). Time: from creating the GitTracks to every \
         status showing its commit. RSS: each replica's peak (VmHWM) once synced.{}",
        if bench::large() {
            ""
        } else {
            " The issue's size, 1,000 objects per source, runs with ARBOR_BENCH_LARGE=1."
        }
    ));
    let speedup = one.elapsed.as_secs_f64() / three.elapsed.as_secs_f64();
    table
        .row(
            Row::new(
                "3 replicas: time to sync every source",
                format!("{} ({speedup:.2} × faster)", bench::seconds(three.elapsed)),
            )
            .baseline(format!("1 replica: {}", bench::seconds(one.elapsed)))
            .context("no target set (issue 22); both runs share the machine's 2 cores"),
        )
        .row(
            Row::new("3 replicas: writes", three.writes.to_string())
                .baseline(format!("1 replica: {}", one.writes)),
        );
    let single = one
        .peaks
        .first()
        .map(|(_, memory)| mib(memory.peak_kib))
        .unwrap_or_default();
    for (name, memory) in &three.peaks {
        table.row(
            Row::new(format!("3 replicas: {name} peak RSS"), mib(memory.peak_kib))
                .baseline(format!("1 replica: {single}")),
        );
    }
    table.emit()?;
    Ok(())
}
