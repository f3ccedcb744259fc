//! Throughput of arbor-kube-emu through a kube-rs client: creates per second while filling the
//! store with 10,000 ConfigMaps, a list of them, creates per second of a custom resource whose
//! CRD has a structural schema (types, bounds, enum, pattern, required, a CEL rule: the
//! validation path every Arbor CRD takes), then watch-event latency with 50 concurrent watches.
//! Emits the shared results table ([`arbor_testkit::bench`]); run with
//! `cargo bench -p arbor-kube-emu --bench throughput`.
//!
//! `ARBOR_BENCH_EMU_OBJECTS`, `ARBOR_BENCH_EMU_CUSTOM` and `ARBOR_BENCH_EMU_PROBES` (or the
//! shared `ARBOR_BENCH_SCALE`) shrink the runs (for example under `valgrind --tool=callgrind`, where instructions per create are the
//! difference of two counts divided by the difference of creates).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbor_kube_emu::KubeEmu;
use arbor_testkit::bench::{self, Row, Table};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

const CONCURRENT_CREATES: usize = 16;
const WATCHES: usize = 50;

/// A CRD whose schema exercises the structural validation and one CEL rule.
fn widget_crd() -> anyhow::Result<CustomResourceDefinition> {
    let spec = json!({
        "type": "object",
        "required": ["size", "color"],
        "x-kubernetes-validations": [
            {"rule": "!has(self.limit) || self.size <= self.limit", "message": "size exceeds limit"}
        ],
        "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 1000},
            "limit": {"type": "integer", "default": 1000},
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "owner": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 63},
            "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "minLength": 1}},
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name", "port"],
                    "properties": {
                        "name": {"type": "string"},
                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    },
                },
            },
            "resources": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
        },
    });
    let schema = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": spec,
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    });
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.bench.arbor.dev"},
        "spec": {
            "group": "bench.arbor.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }))?)
}

fn widget(index: usize) -> anyhow::Result<DynamicObject> {
    let color = ["red", "green", "blue"][index % 3];
    Ok(serde_json::from_value(json!({
        "apiVersion": "bench.arbor.dev/v1",
        "kind": "Widget",
        "metadata": {"name": format!("w-{index:05}")},
        "spec": {
            "size": 1 + index % 1000,
            "color": color,
            "owner": format!("team-{}", index % 7),
            "tags": ["a", "b", "c"],
            "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}],
            "resources": {"cpu": "100m", "memory": 128}
        }
    }))?)
}

/// Creates `count` objects made by `make`, `CONCURRENT_CREATES` in flight; creates per second.
async fn create_all<K, F>(api: &Api<K>, count: usize, make: F) -> anyhow::Result<f64>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    F: Fn(usize) -> anyhow::Result<K>,
{
    let objects = (0..count).map(make).collect::<anyhow::Result<Vec<_>>>()?;
    let started = Instant::now();
    stream::iter(objects)
        .map(|object| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &object).await }
        })
        .buffer_unordered(CONCURRENT_CREATES)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

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
    let objects = bench::size("ARBOR_BENCH_EMU_OBJECTS", 10_000)?;
    let custom = bench::size("ARBOR_BENCH_EMU_CUSTOM", 2_000)?;
    let probes = bench::size("ARBOR_BENCH_EMU_PROBES", 200)?;
    let mut table = Table::new("arbor-kube-emu: throughput through a kube-rs client");
    table.note(format!(
        "In process, loopback HTTP; {CONCURRENT_CREATES} creates in flight, {WATCHES} watches. \
         The custom resource's CRD has a structural schema and a CEL rule: its baseline is the \
         ConfigMap rate of the same run."
    ));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let rate = create_all(&api, objects, |index| {
        Ok(config_map(format!("cm-{index:05}"), index.to_string()))
    })
    .await?;
    let configmap_rate = rate;
    table.row(Row::new(
        format!("creates, {objects} ConfigMaps"),
        format!("{rate:.0} creates/s"),
    ));

    let list_started = Instant::now();
    let listed = api.list(&Default::default()).await?;
    table.row(Row::new(
        format!("list of {} objects", listed.items.len()),
        bench::millis(list_started.elapsed()),
    ));

    if custom > 0 {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.create(&PostParams::default(), &widget_crd()?).await?;
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("bench.arbor.dev", "v1", "Widget"),
            "widgets",
        );
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &resource);
        // The CRD is served once registered; wait for it rather than count a refusal.
        let deadline = Instant::now() + Duration::from_secs(30);
        while widgets.list(&Default::default()).await.is_err() {
            if Instant::now() > deadline {
                anyhow::bail!("the Widget CRD was never served");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let rate = create_all(&widgets, custom, widget).await?;
        table.row(
            Row::new(
                format!("creates, {custom} custom resources with a validated schema"),
                format!("{rate:.0} creates/s"),
            )
            .baseline(format!("ConfigMaps: {configmap_rate:.0} creates/s")),
        );
    }

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
    let mut latencies = Vec::with_capacity(probes * WATCHES);
    for sequence in 0..probes {
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
    if !latencies.is_empty() {
        table.row(Row::new(
            format!(
                "watch-event latency, {WATCHES} watches, {} objects stored",
                objects + 1
            ),
            format!(
                "p50 {}, p99 {}",
                bench::millis(percentile(&latencies, 0.5)),
                bench::millis(percentile(&latencies, 0.99))
            ),
        ));
    }
    for watcher in watchers {
        watcher.abort();
    }
    emu.shutdown().await;
    table.emit()?;
    Ok(())
}
