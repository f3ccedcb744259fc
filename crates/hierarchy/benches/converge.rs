//! `make bench`: how fast arbor-hierarchy converges, against arbor-kube-emu in process.
//!
//! One root with 1,000 sub-namespaces, laid out flat and as chains of depth 10, and one
//! Secret propagated with `update` from the root. For each layout: the time until every
//! sub-namespace holds its copy, the writes that took (the revision delta, which must equal
//! the copies needed: a controller that rewrites what is in place shows here), and the time
//! for an edit of the source to reach every copy (the median of several edits; for chains
//! also split into the first level and each further one, the cost of one hop: copy written,
//! heard on the watch, next level reconciled). Copies are counted off a watch of Secrets as
//! they land. Emits the shared results table
//! ([`arbor_testkit::bench`]). `ARBOR_BENCH_NAMESPACES` (or the shared `ARBOR_BENCH_SCALE`)
//! changes the count, for a quick check.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use arbor_hierarchy::Settings;
use arbor_hierarchy::metrics::Metrics;
use arbor_kube_emu::KubeEmu;
use arbor_policy::keys::Keys;
use arbor_policy::propagation::{PropagationConfig, WatchedKind};
use arbor_testkit::bench::{self, Row, Table};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const DEPTH: usize = 10;
const BOUND: Duration = Duration::from_secs(600);
/// Edits timed per layout (`ARBOR_BENCH_EDITS` changes it): one edit's time swings by a
/// fifth between runs on a busy machine, so the figure is the median of several.
const EDITS: usize = 7;

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

    /// How many levels the sub-namespaces are below the root.
    fn depth(self) -> usize {
        match self {
            Self::Flat => 1,
            Self::Chains => DEPTH,
        }
    }

    /// The level of sub-namespace `i` below the root, 0 for a child of the root.
    fn level(self, i: usize) -> usize {
        match self {
            Self::Flat => 0,
            Self::Chains => i % DEPTH,
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
    /// How many edits were timed.
    edits: usize,
    /// The median time for an edit of the source to reach every copy.
    edit: Duration,
    /// The median time for an edit to reach every copy one level below the root.
    first_level: Duration,
    /// The median time each further level added (chains only).
    further_level: Option<Duration>,
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
                format!(
                    "{name}: one source edit reaches every copy (median of {})",
                    figures.edits
                ),
                bench::millis(figures.edit),
            ));
        let levels = match figures.further_level {
            Some(further) => format!(
                "first level {}, each further level {}",
                bench::millis(figures.first_level),
                bench::millis(further)
            ),
            None => bench::millis(figures.first_level),
        };
        table.row(Row::new(
            format!("{name}: one source edit, where the time goes (medians)"),
            levels,
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

    let mut arrivals = Arrivals::watch(&client).await?;
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
    arrivals.until(count, "1").await?;
    let converge = started.elapsed();
    quiesce(&emu).await?;
    // The source itself is one write.
    let writes = emu.resource_version() - before - 1;

    let mut edits = Vec::new();
    let mut first_levels = Vec::new();
    let mut further_levels = Vec::new();
    for edit in 0..bench::size("ARBOR_BENCH_EDITS", EDITS)? {
        let value = (edit + 2).to_string();
        let started = Instant::now();
        secrets
            .patch(
                "shared",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"value": BASE64.encode(&value)}})),
            )
            .await?;
        let arrived = arrivals.until(count, &value).await?;
        edits.push(started.elapsed());
        // When the last copy of each level landed, from the edit.
        let mut levels = vec![Duration::ZERO; layout.depth()];
        for (namespace, at) in &arrived {
            let index: usize = namespace.trim_start_matches("ns-").parse()?;
            let level = &mut levels[layout.level(index)];
            *level = (*level).max(at.duration_since(started));
        }
        first_levels.push(levels[0]);
        if let [first, .., last] = levels[..] {
            further_levels.push((last - first) / (levels.len() as u32 - 1));
        }
        quiesce(&emu).await?;
    }

    running.stop().await;
    emu.shutdown().await;
    Ok(Figures {
        converge,
        writes,
        edits: edits.len(),
        edit: median(edits),
        first_level: median(first_levels),
        further_level: (!further_levels.is_empty()).then(|| median(further_levels)),
    })
}

/// When each copy of `shared` (outside the root) came to hold each value, as a watch of
/// Secrets hears it: the copies are counted off the watch as they land, not by listing every
/// Secret over and over, which would load the two cores the controller runs on and add the
/// poll interval to every figure.
struct Arrivals {
    events: mpsc::UnboundedReceiver<(String, Vec<u8>, Instant)>,
    task: tokio::task::JoinHandle<()>,
}

impl Arrivals {
    /// Starts watching and returns once the watch has listed, so no later write is missed.
    async fn watch(client: &Client) -> Result<Arrivals> {
        let api: Api<Secret> = Api::all(client.clone());
        let config = watcher::Config::default().fields("metadata.name=shared");
        let mut stream = watcher::watcher(api, config).boxed();
        let (sender, events) = mpsc::unbounded_channel();
        loop {
            match stream.try_next().await? {
                Some(watcher::Event::InitDone) => break,
                Some(_) => continue,
                None => bail!("the watch of Secrets ended before it listed"),
            }
        }
        let task = tokio::spawn(async move {
            while let Ok(Some(event)) = stream.try_next().await {
                let watcher::Event::Apply(secret) = event else {
                    continue;
                };
                let namespace = secret.metadata.namespace.clone().unwrap_or_default();
                if namespace == "root" {
                    continue;
                }
                let value = secret
                    .data
                    .as_ref()
                    .and_then(|data| data.get("value"))
                    .map(|value| value.0.clone())
                    .unwrap_or_default();
                if sender.send((namespace, value, Instant::now())).is_err() {
                    return;
                }
            }
        });
        Ok(Arrivals { events, task })
    }

    /// Waits until `count` copies hold `value`; returns when each came to hold it.
    async fn until(&mut self, count: usize, value: &str) -> Result<HashMap<String, Instant>> {
        let mut holding = HashMap::new();
        let deadline = tokio::time::Instant::now() + BOUND;
        while holding.len() < count {
            let event = tokio::time::timeout_at(deadline, self.events.recv()).await;
            let Ok(Some((namespace, held, at))) = event else {
                bail!(
                    "{} of {count} copies hold {value:?} after {BOUND:?}",
                    holding.len()
                );
            };
            if held == value.as_bytes() {
                holding.entry(namespace).or_insert(at);
            } else {
                holding.remove(&namespace);
            }
        }
        Ok(holding)
    }
}

impl Drop for Arrivals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The median of `durations` (not empty).
fn median(mut durations: Vec<Duration>) -> Duration {
    durations.sort();
    durations[durations.len() / 2]
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
