//! `make bench`: how fast arbor-hierarchy converges, against arbor-kube-emu in process.
//!
//! One root with 1,000 sub-namespaces, laid out flat and as chains of depth 10, and one
//! Secret propagated with `update` from the root. For each layout: the time until every
//! sub-namespace holds its copy, the writes that took (the revision delta, which must equal
//! the copies needed: a controller that rewrites what is in place shows here), and the time
//! for one edit of the source to reach every copy. Emits the shared results table
//! ([`arbor_testkit::bench`]). `ARBOR_BENCH_NAMESPACES` (or the shared `ARBOR_BENCH_SCALE`)
//! changes the count, for a quick check.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use arbor_hierarchy::Settings;
use arbor_hierarchy::metrics::Metrics;
use arbor_kube_emu::KubeEmu;
use arbor_policy::keys::Keys;
use arbor_policy::propagation::{PropagationConfig, WatchedKind};
use arbor_testkit::bench::{self, Row, Table};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const DEPTH: usize = 10;
const BOUND: Duration = Duration::from_secs(600);

#[derive(Clone, Copy)]
enum Layout {
    Flat,
    Chains,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Self::Flat => "flat",
            Self::Chains => "chains of depth 10",
        }
    }

    /// The parent of sub-namespace `i` (`ns-i`).
    fn parent(self, i: usize) -> String {
        match self {
            Self::Flat => "root".into(),
            Self::Chains if i.is_multiple_of(DEPTH) => "root".into(),
            Self::Chains => format!("ns-{}", i - 1),
        }
    }
}

struct Figures {
    converge: Duration,
    writes: u64,
    edit: Duration,
}

#[tokio::main]
async fn main() -> Result<()> {
    let count = bench::size("ARBOR_BENCH_NAMESPACES", 1000)?;
    let mut table = Table::new(format!(
        "arbor-hierarchy: one root, {count} sub-namespaces, one Secret with propagate=update"
    ));
    table.note(
        "arbor-hierarchy and the emulator in one process. Writes are the emulator's revision \
         delta; the baseline is the copies needed, one per sub-namespace.",
    );
    for layout in [Layout::Flat, Layout::Chains] {
        let figures = measure(layout, count).await?;
        let name = layout.name();
        table
            .row(Row::new(
                format!("{name}: time to converge"),
                bench::millis(figures.converge),
            ))
            .row(
                Row::new(format!("{name}: writes"), figures.writes.to_string())
                    .baseline(format!("copies needed: {count}"))
                    .target("= copies needed", figures.writes == count as u64),
            )
            .row(Row::new(
                format!("{name}: one source edit reaches every copy"),
                bench::millis(figures.edit),
            ));
    }
    table.emit()?;
    Ok(())
}

async fn measure(layout: Layout, count: usize) -> Result<Figures> {
    let emu = KubeEmu::start().await?;
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &arbor_api::subnamespace::sub_namespace_crd(),
        )
        .await?;
    let keys = Keys::default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let create = |name: String, labels: serde_json::Value| {
        let namespaces = namespaces.clone();
        async move {
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": name, "labels": labels}});
            namespaces
                .create(&PostParams::default(), &serde_json::from_value(namespace)?)
                .await?;
            anyhow::Ok(())
        }
    };
    create("root".into(), json!({keys.type_label.clone(): "root"})).await?;
    for i in 0..count {
        create(
            format!("ns-{i}"),
            json!({keys.parent_label.clone(): layout.parent(i)}),
        )
        .await?;
    }

    let config = PropagationConfig {
        watches: vec![WatchedKind {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
        }],
        ..PropagationConfig::default()
    };
    let running = arbor_hierarchy::start(
        client.clone(),
        Settings {
            domain: keys.domain().to_owned(),
            config,
            reporter: kube::runtime::events::Reporter {
                controller: arbor_api::keys::HIERARCHY_FIELD_MANAGER.into(),
                instance: None,
            },
        },
        Metrics::default(),
        CancellationToken::new(),
    )
    .await?;
    running.synced().await;
    quiesce(&emu).await?;

    let before = emu.resource_version();
    let started = Instant::now();
    let source = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "shared", "namespace": "root",
                     "annotations": {keys.propagate_annotation.clone(): "update"}},
        "data": {"value": "MQ=="},
    });
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "root");
    secrets
        .patch(
            "shared",
            &PatchParams::apply("bench"),
            &Patch::Apply(&source),
        )
        .await?;
    wait_copies(&client, count, "1").await?;
    let converge = started.elapsed();
    quiesce(&emu).await?;
    // The source itself is one write.
    let writes = emu.resource_version() - before - 1;

    let started = Instant::now();
    secrets
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "Mg=="}})),
        )
        .await?;
    wait_copies(&client, count, "2").await?;
    let edit = started.elapsed();

    running.stop().await;
    emu.shutdown().await;
    Ok(Figures {
        converge,
        writes,
        edit,
    })
}

/// Waits until `count` copies of `shared` hold `value`.
async fn wait_copies(client: &Client, count: usize, value: &str) -> Result<()> {
    let all: Api<Secret> = Api::all(client.clone());
    let deadline = Instant::now() + BOUND;
    loop {
        let copies = all
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|s| s.metadata.name.as_deref() == Some("shared"))
            .filter(|s| s.metadata.namespace.as_deref() != Some("root"))
            .filter(|s| {
                s.data
                    .as_ref()
                    .and_then(|d| d.get("value"))
                    .is_some_and(|v| v.0 == value.as_bytes())
            })
            .count();
        if copies == count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{copies} of {count} copies hold {value:?} after {BOUND:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the revision stops moving (no write for half a second).
async fn quiesce(emu: &KubeEmu) -> Result<()> {
    let deadline = Instant::now() + BOUND;
    let mut last = emu.resource_version();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = emu.resource_version();
        if now == last {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the cluster kept changing for {BOUND:?}");
        }
        last = now;
    }
}
