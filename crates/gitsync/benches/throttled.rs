//! A sync through a throttling API server (issue 23 item 12), against its own baseline.
//!
//! One running gitsync, one arbor-kube-emu (in process, loopback HTTP). Two GitTracks, each
//! declaring `ARBOR_BENCH_THROTTLED_OBJECTS` ConfigMaps (default 20, divided by
//! `ARBOR_BENCH_SCALE`) in their own namespace:
//!
//! - **no faults**: the first source syncs on a quiet server — the baseline;
//! - **throttled**: then every request gitsync makes (its own identity; the harness's reads are
//!   not touched) meets the profile — 70 % answered 429 and 25 % answered 503, both with
//!   `Retry-After: 1` as the emulator sends them (deterministic rates, see
//!   `arbor_kube_emu::faults`: together about three requests in four are refused), 200 ms latency
//!   on each — and the second source syncs through it.
//!
//! Each figure runs from creating the source to the last of its ConfigMaps on the cluster, with
//! the harness asking for a round every 500 ms as `TriggerSync` would (a round that ends with
//! refused objects otherwise waits for the source's poll interval). A run is cut after
//! `ARBOR_BENCH_THROTTLED_LIMIT` seconds (default 300) and then reports the objects applied by
//! then, so a controller that crawls still gives a figure. The storm is unbounded and the figure
//! is bound by latency (Retry-After, backoff, 200 ms per request), not by CPU;
//! `ARBOR_BENCH_THROTTLED_REFUSALS=0` keeps the latency alone, which shows how far a round's
//! requests overlap apart from retries.
//!
//! Emits the shared results table ([`arbor_testkit::bench`]); run with
//! `cargo bench -p arbor-gitsync --bench throttled`.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use arbor_api::GitTrack;
use arbor_api::keys::SourceRef;
use arbor_gitsync::run::{Args, Running};
use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::faults::{Fault, FaultEffect};
use arbor_runtime::Component;
use arbor_testkit::GitRepo;
use arbor_testkit::bench::{self, Row, Table};
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const FILES: usize = 10;
/// The user gitsync authenticates as; the faults match only its requests.
const GITSYNC_USER: &str = "bench-gitsync";

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// How one source's sync went.
struct Run {
    applied: usize,
    elapsed: Duration,
    /// gitsync's requests the server answered with success during the run: what a sync costs
    /// in requests, each of which a throttling server makes wait.
    served: usize,
    /// The same requests by verb and resource, for telling where a sync's requests go.
    by_kind: std::collections::BTreeMap<String, usize>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.applied as f64 / self.elapsed.as_secs_f64()
    }
}

fn declare(repo: &GitRepo, count: usize) -> anyhow::Result<()> {
    for file in 0..FILES {
        let mut text = String::new();
        for index in (file..count).step_by(FILES) {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\ndata:\n  value: \"{index}\"\n"
            ));
        }
        repo.write(&format!("file-{file}.yaml"), &text)?;
    }
    repo.commit_all("bench")?;
    Ok(())
}

/// Creates a GitTrack for `repo` in `namespace` and waits until its `count` ConfigMaps exist or
/// `limit` passes, asking for a round every 500 ms.
async fn sync(
    emu: &KubeEmu,
    admin: &Client,
    running: &Running,
    namespace: &str,
    repo: &GitRepo,
    count: usize,
    limit: Duration,
) -> anyhow::Result<Run> {
    arbor_testkit::cluster::ensure_namespace(admin, namespace).await?;
    let sources: Api<GitTrack> = Api::namespaced(admin.clone(), namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    let source = SourceRef::GitTrack {
        namespace: namespace.into(),
        name: "bench".into(),
    };
    emu.requests().reset();
    let started = Instant::now();
    sources
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": "bench", "namespace": namespace},
                "spec": {"repository": repo.file_url(),
                         "reference": {"branch": "main"}, "layout": "Flat", "pollInterval": "1h"},
            }))?,
        )
        .await?;
    loop {
        let applied = configmaps
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|object| {
                object
                    .metadata
                    .name
                    .as_deref()
                    .is_some_and(|name| name.starts_with("cm-"))
            })
            .count();
        let elapsed = started.elapsed();
        if applied == count || elapsed > limit {
            let records = emu.requests().snapshot();
            let served: Vec<_> = records
                .iter()
                .filter(|record| record.identity == GITSYNC_USER && record.code < 300)
                .collect();
            let mut by_kind = std::collections::BTreeMap::new();
            for record in &served {
                let resource = match record.subresource.as_str() {
                    "" => record.resource.clone(),
                    sub => format!("{}/{sub}", record.resource),
                };
                *by_kind
                    .entry(format!("{} {resource}", record.verb))
                    .or_insert(0) += 1;
            }
            return Ok(Run {
                applied,
                elapsed,
                served: served.len(),
                by_kind,
            });
        }
        running.context().registry.request_round(&source);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count = bench::size("ARBOR_BENCH_THROTTLED_OBJECTS", 20)?;
    let limit = Duration::from_secs(setting("ARBOR_BENCH_THROTTLED_LIMIT", 300));
    let refusals = setting("ARBOR_BENCH_THROTTLED_REFUSALS", 1) != 0;
    let emu = KubeEmu::start().await?;
    let admin = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
    arbor_testkit::cluster::install_crds(&admin, limit).await?;
    let token = emu.token_for(GITSYNC_USER, &["system:masters"]);
    let config =
        arbor_runtime::client::config_from_kubeconfig_yaml(&emu.kubeconfig_yaml_for(&token))
            .await?;

    let repos = tempfile::tempdir()?;
    let quiet = GitRepo::init(repos.path().join("quiet"))?;
    declare(&quiet, count)?;
    let throttled = GitRepo::init(repos.path().join("throttled"))?;
    declare(&throttled, count)?;

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
    let component = Component::with_config("gitsync", args.common.clone(), config)?;
    let running = arbor_gitsync::run::start(component, settings)
        .await?
        .context("stopped while starting")?;

    let baseline = sync(&emu, &admin, &running, "quiet", &quiet, count, limit).await?;

    let faults = emu.faults();
    faults.inject(
        Fault::new(FaultEffect::Latency(Duration::from_millis(200))).identities(&[GITSYNC_USER]),
    );
    // `ARBOR_BENCH_THROTTLED_REFUSALS=0` keeps the latency alone: how far the requests of a
    // round overlap, apart from retries.
    if refusals {
        for (code, rate) in [(429, 0.7), (503, 0.25)] {
            faults.inject(
                Fault::new(FaultEffect::Status {
                    code,
                    rate,
                    times: None,
                })
                .identities(&[GITSYNC_USER]),
            );
        }
    }
    let storm = sync(
        &emu,
        &admin,
        &running,
        "throttled",
        &throttled,
        count,
        limit,
    )
    .await?;
    let fired = faults.fired();
    faults.clear();

    let mut table = Table::new(format!(
        "arbor-gitsync: a sync under throttling, {count} ConfigMaps"
    ));
    table.note(format!(
        "{count} ConfigMaps in {FILES} files, one GitTrack each run, in-process emulator. \
         Baseline: the same sync on a quiet server. Throttled: {}; cut after {} s.",
        if refusals {
            "gitsync's requests answered 429 at rate 0.7 and 503 at rate 0.25 (both \
             `Retry-After: 1`), 200 ms latency on each"
        } else {
            "200 ms latency on each of gitsync's requests, none refused"
        },
        limit.as_secs()
    ));
    let breakdown: Vec<String> = baseline
        .by_kind
        .iter()
        .map(|(kind, count)| format!("{kind} {count}"))
        .collect();
    table.note(format!(
        "Requests served in the baseline, by verb and resource: {}.",
        breakdown.join(", ")
    ));
    let run = |run: &Run| {
        format!(
            "{}/{count} applied in {:.1} s: {:.2} objects/s",
            run.applied,
            run.elapsed.as_secs_f64(),
            run.rate()
        )
    };
    table
        .row(
            Row::new("throttled sync", run(&storm))
                .baseline(format!("no faults: {}", run(&baseline)))
                .context("issue 23 item 12: about 0.2 objects/s before; no target set"),
        )
        .row(
            Row::new("gitsync requests served", storm.served.to_string())
                .baseline(format!("no faults: {}", baseline.served)),
        )
        .row(Row::new(
            "requests refused while throttled",
            format!(
                "429: {}, 503: {}",
                fired.get(1).copied().unwrap_or(0),
                fired.get(2).copied().unwrap_or(0)
            ),
        ));
    table.emit()?;
    running.stop().await;
    emu.shutdown().await;
    if baseline.applied != count {
        bail!(
            "the baseline applied {}/{count} objects within {limit:?}",
            baseline.applied
        );
    }
    Ok(())
}
