//! `make bench`: the observer at scale, against an in-process arbor-kube-emu.
//!
//! 1,000 Applications of three objects each (Deployment, Service, ConfigMap): the process's
//! resident memory before and after the observer takes them on (the emulator runs in the same
//! process, so the figure includes the objects it stores and its side of the watches), and the
//! latency from a hand edit of an observed field to the object being healed, over 200 edits.
//! Prints Markdown.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use arbor_observer::AppKey;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{Cluster, NAMESPACE, at};

/// Applications and drifts; `ARBOR_BENCH_APPLICATIONS` / `ARBOR_BENCH_DRIFTS` override them
/// for a quick run.
fn sizes() -> (usize, usize) {
    let from_env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(default)
    };
    (
        from_env("ARBOR_BENCH_APPLICATIONS", 1_000),
        from_env("ARBOR_BENCH_DRIFTS", 200),
    )
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
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
    let (applications, drifts) = sizes();
    let cluster = Cluster::start().await?;
    for index in 0..applications {
        let name = format!("app-{index}");
        cluster
            .create_application(&name, json!({"manifest": manifest(&name)}))
            .await?;
    }
    let before = rss_kib();

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
    let after = rss_kib();

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

    println!("## arbor-observer\n");
    println!(
        "{applications} Applications × 3 objects (Deployment, Service, ConfigMap), in-process arbor-kube-emu\n"
    );
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| time to apply all and start every observer | {:.1} s |",
        converged.as_secs_f64()
    );
    println!(
        "| process RSS before the observer (emulator + Applications) | {} MiB |",
        before / 1024
    );
    println!(
        "| process RSS with {applications} observers running | {} MiB |",
        after / 1024
    );
    println!(
        "| growth per Application (observer + its 3 objects and watches on both sides) | {} KiB |",
        after.saturating_sub(before) / applications as u64
    );
    println!(
        "| drift → healed, p50 over {drifts} edits | {:.1} ms |",
        percentile(&latencies, 0.5).as_secs_f64() * 1e3
    );
    println!(
        "| drift → healed, p99 | {:.1} ms |",
        percentile(&latencies, 0.99).as_secs_f64() * 1e3
    );
    println!();
    observer.stop().await?;
    cluster.shutdown().await;
    Ok(())
}
