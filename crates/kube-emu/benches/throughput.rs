//! Throughput of arbor-kube-emu through a kube-rs client: creates per second while filling the
//! store with 10,000 objects, then watch-event latency with 50 concurrent watches open.
//! Prints markdown result lines; run with `cargo bench -p arbor-kube-emu --bench throughput`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbor_kube_emu::KubeEmu;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

const OBJECTS: usize = 10_000;
const CONCURRENT_CREATES: usize = 16;
const WATCHES: usize = 50;
const PROBES: usize = 200;

fn config_map(name: String, value: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value)])),
        ..ConfigMap::default()
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let emu = KubeEmu::builder().history_window(50_000).start().await?;
    let kubeconfig = Kubeconfig::from_yaml(&emu.kubeconfig_yaml())?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let started = Instant::now();
    stream::iter(0..OBJECTS)
        .map(|index| {
            let api = api.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &config_map(format!("cm-{index:05}"), index.to_string()),
                )
                .await
            }
        })
        .buffer_unordered(CONCURRENT_CREATES)
        .try_collect::<Vec<_>>()
        .await?;
    let elapsed = started.elapsed();
    println!(
        "| kube-emu creates ({OBJECTS} ConfigMaps, {CONCURRENT_CREATES} in flight) | {:.0} creates/s |",
        OBJECTS as f64 / elapsed.as_secs_f64()
    );

    let list_started = Instant::now();
    let listed = api.list(&Default::default()).await?;
    println!(
        "| kube-emu list of {} objects | {:.1} ms |",
        listed.items.len(),
        list_started.elapsed().as_secs_f64() * 1000.0
    );

    api.create(
        &PostParams::default(),
        &config_map("probe".into(), "start".into()),
    )
    .await?;
    let from = api
        .get("probe")
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let mut watchers = Vec::new();
    for _ in 0..WATCHES {
        let api = api.clone();
        let seen = seen_tx.clone();
        let from = from.clone();
        let params = WatchParams::default()
            .fields("metadata.name=probe")
            .timeout(290);
        let mut events = api.watch(&params, &from).await?.boxed();
        watchers.push(tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if let WatchEvent::Modified(object) = event {
                    let sequence = object
                        .data
                        .and_then(|data| data.get("value").and_then(|v| v.parse().ok()))
                        .unwrap_or(usize::MAX);
                    if seen.send((sequence, Instant::now())).is_err() {
                        break;
                    }
                }
            }
        }));
    }
    let mut latencies = Vec::with_capacity(PROBES * WATCHES);
    for sequence in 0..PROBES {
        let sent = Instant::now();
        let patch = serde_json::json!({"data": {"value": sequence.to_string()}});
        api.patch("probe", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let mut received = 0;
        while received < WATCHES {
            let (seen_sequence, at) = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
                .await?
                .ok_or_else(|| anyhow::anyhow!("a watcher ended early"))?;
            if seen_sequence == sequence {
                latencies.push(at - sent);
                received += 1;
            }
        }
    }
    latencies.sort();
    println!(
        "| kube-emu watch-event latency ({WATCHES} watches, {} objects stored) | p50 {:.2} ms, p99 {:.2} ms |",
        OBJECTS + 1,
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0
    );
    for watcher in watchers {
        watcher.abort();
    }
    emu.shutdown().await;
    Ok(())
}
