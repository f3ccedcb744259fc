//! `make bench`: the observer at scale, against an in-process arbor-kube-emu.
//!
//! 1,000 Applications of three objects each (Deployment, Service, ConfigMap): the process's
//! resident memory before and after the observer takes them on (the emulator runs in the same
//! process, so the figure includes the objects it stores and its side of the watches), and the
//! latency from a hand edit of an observed field to the object being healed, over 200 edits.
//! Emits the shared results table ([`arbor_testkit::bench`]).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use arbor_observer::AppKey;
use arbor_testkit::bench::{self, Row, Table};
use arbor_testkit::memory::{Memory, mib};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{Cluster, NAMESPACE, at};

/// Applications and drifts; `ARBOR_BENCH_APPLICATIONS` / `ARBOR_BENCH_DRIFTS` (or the shared
/// `ARBOR_BENCH_SCALE`) shrink them for a quick run.
fn sizes() -> anyhow::Result<(usize, usize)> {
    Ok((
        bench::size("ARBOR_BENCH_APPLICATIONS", 1_000)?,
        bench::size("ARBOR_BENCH_DRIFTS", 200)?,
    ))
}

/// This process's resident set (the observer, the emulator and the bench together).
fn rss_kib() -> anyhow::Result<u64> {
    Ok(Memory::of_pid(std::process::id())?.resident_kib)
}

fn manifest(name: &str) -> serde_json::Value {
    let mut manifest = support::nginx_manifest(name);
    manifest.as_array_mut().expect("a list").push(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"mode": "declared"}
    }));
    manifest
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let (applications, drifts) = sizes()?;
    let cluster = Cluster::start().await?;
    for index in 0..applications {
        let name = format!("app-{index}");
        cluster
            .create_application(&name, json!({"manifest": manifest(&name)}))
            .await?;
    }
    let before = rss_kib()?;

    let started = Instant::now();
    let observer = cluster.observer(&[]).await?;
    let keys: Vec<AppKey> = (0..applications)
        .map(|index| AppKey::new(NAMESPACE, format!("app-{index}")))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    while keys
        .iter()
        .any(|key| observer.registry.stats(key).checks == 0)
    {
        anyhow::ensure!(Instant::now() < deadline, "the observers did not all start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let converged = started.elapsed();
    let after = rss_kib()?;

    let deployments = cluster.deployments();
    let mut latencies = Vec::with_capacity(drifts);
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    for drift in 0..drifts {
        let name = format!("app-{}", (drift * 7919) % applications);
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": "nginx:drifted", "args": ["--port=80"]}
        ]}}}});
        let edited = Instant::now();
        deployments
            .patch(&name, &edit, &Patch::Merge(&patch))
            .await?;
        loop {
            let image = at(
                &deployments.get(&name).await?,
                "/spec/template/spec/containers/0/image",
            );
            if image == json!("nginx:1.25") {
                break;
            }
            anyhow::ensure!(
                edited.elapsed() < Duration::from_secs(60),
                "{name} was not healed"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        latencies.push(edited.elapsed());
    }
    latencies.sort();

    let growth = after.saturating_sub(before);
    let mut table = Table::new(format!(
        "arbor-observer: {applications} Applications, in process"
    ));
    table.note(format!(
        "{applications} Applications × 3 objects (Deployment, Service, ConfigMap) and the \
         emulator in one process. The growth of the process's resident set when the observer \
         takes them on holds the observer and the emulator's side of its watches, so it bounds \
         the observer's own from above; the observer alone is in the memory table."
    ));
    table
        .row(Row::new(
            "time to start every observer",
            bench::seconds(converged),
        ))
        .row(
            Row::new(
                "process RSS with the observers running",
                format!("{} (growth {})", mib(after), mib(growth)),
            )
            .baseline(format!(
                "before the observer (emulator + Applications): {}",
                mib(before)
            ))
            // Issue 21 holds the observer's own process to 150 MiB: the memory bench measures
            // that. This figure also holds the emulator's side of every watch, so it gets no
            // verdict here.
            .context("an upper bound; the target (< 150 MiB) is the observer's own process, in the memory table"),
        )
        .row(Row::new(
            "growth per Application",
            format!("{} KiB", growth / applications as u64),
        ))
        .row(Row::new(
            format!("drift → healed, p50 over {drifts} edits"),
            bench::millis(percentile(&latencies, 0.5)),
        ))
        .row(Row::new(
            "drift → healed, p99",
            bench::millis(percentile(&latencies, 0.99)),
        ));
    table.emit()?;
    observer.stop().await?;
    cluster.shutdown().await;
    Ok(())
}
