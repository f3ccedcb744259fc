//! Syncing a large flat source into arbor-kube-emu (in process, loopback HTTP), each figure
//! beside its baseline from the same run.
//!
//! One GitTrack declares `ARBOR_BENCH_OBJECTS` ConfigMaps (default 10,000, divided by
//! `ARBOR_BENCH_SCALE`) in 100 multi-document
//! files. The figures:
//!
//! - **initial sync**: from creating the GitTrack to its status showing the commit; writes are
//!   the emulator's count of write requests (each object and its GitTrackObject, the source's
//!   finalizer and status, the round's Event). Its baseline is a bare kube-rs client making
//!   the same writes (per object: create a GitTrackObject, then server-side apply the
//!   ConfigMap) with the same concurrency (`--max-concurrent-writes`): the target is at most
//!   1.5 × that. The two take turns for [`ROUNDS`] rounds, each on a fresh emulator (and
//!   gitsync with an empty fetch cache); the times are the medians, the ratio the median of
//!   the rounds' ratios;
//! - **unchanged resync**: one full round (fetch, list, compare every object) on the same
//!   commit, by the last round's gitsync; writes must be 0;
//! - **commit to applied**: one object changed in a new commit, from the commit to the changed
//!   object on the cluster, with a round requested at the commit (as `TriggerSync` does). Its
//!   target is 2 × the unchanged resync plus one write (the bare client's median
//!   server-side apply of one ConfigMap).
//!
//! `ARBOR_BENCH_LARGE=1` runs the whole bench again at 100,000 objects
//! (`ARBOR_BENCH_LARGE_OBJECTS` changes that size) and sets the two sizes side by side: linear
//! means the same time and the same writes per object (issue 21 item 3).
//!
//! `ARBOR_BENCH_LOG=arbor_gitsync=debug` prints each round's `round timings` (fetch, checkout,
//! parse, inventory, live objects, plan, apply, prune). Emits the shared results table
//! ([`arbor_testkit::bench`]); run with `cargo bench -p arbor-gitsync --bench sync`.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use arbor_api::GitTrack;
use arbor_api::keys::SourceRef;
use arbor_gitsync::run::{Args, Running};
use arbor_kube_emu::KubeEmu;
use arbor_runtime::Component;
use arbor_testkit::GitRepo;
use arbor_testkit::bench::{self, Row, Table};
use clap::Parser;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const FILES: usize = 100;
const PATIENCE: Duration = Duration::from_secs(600);

/// Writes the ConfigMaps into `repo`, `changed` with another value, and commits.
fn commit(repo: &GitRepo, count: usize, changed: Option<usize>) -> anyhow::Result<String> {
    for file in 0..FILES {
        let mut text = String::new();
        for index in (file..count).step_by(FILES) {
            let value = if changed == Some(index) {
                "changed"
            } else {
                "initial"
            };
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\ndata:\n  value: {value}\n"
            ));
        }
        repo.write(&format!("file-{file}.yaml"), &text)?;
    }
    Ok(repo.commit_all("bench")?)
}

async fn wait_for<F, Fut>(what: &str, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + PATIENCE;
    while !probe().await? {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// The baseline: `count` objects written by a bare kube-rs client into `namespace`, `width`
/// at a time, each as gitsync writes one: its GitTrackObject created, then the ConfigMap
/// server-side applied, both with the metadata gitsync gives them (the management label, the
/// source and file annotations; the tracking object's owner, finalizer and deletion policy),
/// so that the API server does the same work for either. Its replies are decoded whole, as
/// kube-rs's `Api` does; gitsync reads only the metadata of its replies (part of what it is
/// measured on). Returns the time taken.
async fn bare_client(
    client: &Client,
    namespace: &str,
    count: usize,
    width: usize,
) -> anyhow::Result<Duration> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let tracking: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &arbor_runtime::decode::api_resource::<arbor_api::GitTrackObject>(),
    );
    let params = PatchParams::apply("bench-baseline");
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|index| {
            let (configmaps, tracking, params) = (&configmaps, &tracking, &params);
            async move {
                let name = format!("cm-{index}");
                let object = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {
                        "name": name, "namespace": namespace,
                        "labels": {"arbor.dev/managed": "enabled"},
                        "annotations": {
                            "arbor.dev/source": format!("GitTrack/{namespace}/{SOURCE}"),
                            "arbor.dev/declared-in": format!("file-{}.yaml", index % FILES),
                        },
                    },
                    "data": {"value": "initial"},
                });
                let record: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrackObject",
                    "metadata": {
                        "name": format!("configmap.{name}"), "namespace": namespace,
                        "annotations": {"arbor.dev/deletion-policy": "Orphan"},
                        "finalizers": ["arbor.dev/gitsync"],
                        "ownerReferences": [{
                            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                            "name": SOURCE, "uid": "00000000-0000-0000-0000-000000000001",
                            "controller": true,
                        }],
                    },
                    "spec": {"name": name, "kind": "ConfigMap", "data": object},
                }))?;
                tracking.create(&PostParams::default(), &record).await?;
                configmaps
                    .patch(&name, params, &Patch::Apply(&object))
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(width)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(started.elapsed())
}

/// The median time of one server-side apply that changes a ConfigMap, by the bare client.
async fn one_write(client: &Client, namespace: &str) -> anyhow::Result<Duration> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply("bench-baseline").force();
    let created = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm-0", "namespace": namespace},
        "data": {"value": "created"},
    });
    configmaps
        .patch("cm-0", &params, &Patch::Apply(&created))
        .await?;
    let mut times = Vec::new();
    for round in 0..21 {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm-0", "namespace": namespace},
            "data": {"value": format!("write-{round}")},
        });
        let started = Instant::now();
        configmaps
            .patch("cm-0", &params, &Patch::Apply(&object))
            .await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

async fn full_round(running: &Running, source: &SourceRef) {
    let registry = &running.context().registry;
    let before = registry.get(source).map_or(0, |record| record.rounds);
    registry.request_round(source);
    registry.wait_for_round(source, before, PATIENCE).await;
}

/// One round's initial sync and its baseline.
struct Round {
    initial: Duration,
    /// Writes to the ConfigMaps and their tracking objects.
    object_writes: u64,
    /// Writes to the GitTrack itself (finalizer, status and the progress written while the
    /// round runs) and Events.
    source_writes: u64,
    bare: Duration,
    bare_writes: u64,
}

/// One size's figures.
struct Figures {
    count: usize,
    width: usize,
    rounds: Vec<Round>,
    resync: Duration,
    resync_writes: u64,
    latency: Duration,
    write: Duration,
}

impl Figures {
    fn initial(&self) -> Duration {
        median(&self.rounds.iter().map(|r| r.initial).collect::<Vec<_>>())
    }

    fn bare(&self) -> Duration {
        median(&self.rounds.iter().map(|r| r.bare).collect::<Vec<_>>())
    }

    /// gitsync's time over the bare client's, the median of the rounds' ratios.
    fn ratio(&self) -> f64 {
        median(&self.ratios())
    }

    fn ratios(&self) -> Vec<f64> {
        self.rounds
            .iter()
            .map(|r| r.initial.as_secs_f64() / r.bare.as_secs_f64())
            .collect()
    }

    /// The most writes any round's sync made.
    fn initial_writes(&self) -> u64 {
        self.rounds
            .iter()
            .map(|r| r.object_writes)
            .max()
            .unwrap_or(0)
    }

    /// The fewest writes any round's baseline made.
    fn bare_writes(&self) -> u64 {
        self.rounds.iter().map(|r| r.bare_writes).min().unwrap_or(0)
    }

    fn source_writes(&self) -> u64 {
        median(
            &self
                .rounds
                .iter()
                .map(|r| r.source_writes)
                .collect::<Vec<_>>(),
        )
    }

    fn per_object(&self) -> Duration {
        self.initial() / self.count as u32
    }

    fn bare_per_object(&self) -> Duration {
        self.bare() / self.count as u32
    }
}

/// The resources of the writes a sync is held to (the baseline makes the same): the objects
/// and their tracking objects. The source's own writes (its finalizer, status, the progress a
/// long round writes every few seconds, Events) are counted apart.
const OBJECT_RESOURCES: [&str; 2] = ["configmaps", "gittrackobjects"];

/// Writes recorded to `resources`, whatever their verb, namespace or identity.
fn writes_to(requests: &arbor_kube_emu::accounting::Requests, resources: &[&str]) -> u64 {
    requests
        .counts()
        .iter()
        .filter(|(key, _)| {
            arbor_kube_emu::accounting::is_write_verb(&key.verb)
                && resources.contains(&key.resource.as_str())
        })
        .map(|(_, count)| count)
        .sum()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if let Ok(filter) = std::env::var("ARBOR_BENCH_LOG") {
        let _ = arbor_runtime::telemetry::init(&filter, arbor_runtime::telemetry::LogFormat::Text);
    }
    let count = bench::size("ARBOR_BENCH_OBJECTS", 10_000)?;
    let regular = measure(count).await?;
    report(&regular)?;
    if bench::large() {
        let large = measure(bench::size("ARBOR_BENCH_LARGE_OBJECTS", 100_000)?).await?;
        report(&large)?;
        linearity(&regular, &large)?;
    }
    Ok(())
}

fn report(f: &Figures) -> anyhow::Result<()> {
    let (count, width) = (f.count, f.width);
    let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    let target = 2.0 * ms(f.resync) + ms(f.write);
    let ratio = f.ratio();
    let each = |values: Vec<String>| values.join(", ");
    let mut table = Table::new(format!(
        "arbor-gitsync: sync into arbor-kube-emu, {count} ConfigMaps"
    ));
    table.note(format!(
        "{count} ConfigMaps in {FILES} files, one GitTrack; gitsync and the emulator in one \
         process (loopback HTTP), {width} writes at once. Baseline: a bare kube-rs client \
         making the same writes (per object a GitTrackObject create and a server-side apply) \
         with the same concurrency. The initial sync and the baseline take turns for {ROUNDS} \
         rounds, each on a fresh emulator; times are medians, the ratio the median of the \
         rounds' ratios."
    ));
    table
        .row(
            Row::new(
                "initial sync: time",
                format!(
                    "{} (rounds: {})",
                    bench::seconds(f.initial()),
                    each(f.rounds.iter().map(|r| bench::seconds(r.initial)).collect())
                ),
            )
            .baseline(format!(
                "bare kube-rs client: {} (rounds: {})",
                bench::seconds(f.bare()),
                each(f.rounds.iter().map(|r| bench::seconds(r.bare)).collect())
            ))
            .target(
                format!(
                    "≤ 1.5 × baseline (now {ratio:.2} ×; rounds: {})",
                    each(f.ratios().iter().map(|r| format!("{r:.2}")).collect())
                ),
                ratio <= 1.5,
            ),
        )
        .row(
            Row::new(
                "initial sync: writes to the objects and tracking objects",
                f.initial_writes().to_string(),
            )
            .baseline(format!("bare kube-rs client: {}", f.bare_writes()))
            .target("≤ baseline", f.initial_writes() <= f.bare_writes()),
        )
        .row(
            Row::new(
                "initial sync: the source's own writes (finalizer, status, progress, Events)",
                f.source_writes().to_string(),
            )
            .context("progress is written every few seconds of a round: grows with its length"),
        )
        .row(
            Row::new(
                "unchanged resync (full compare): time",
                bench::millis(f.resync),
            )
            .context("the unit of the commit → applied target"),
        )
        .row(
            Row::new("unchanged resync: writes", f.resync_writes.to_string())
                .target("0", f.resync_writes == 0),
        )
        .row(
            Row::new(
                "one object changed in a new commit: commit → applied",
                bench::millis(f.latency),
            )
            .baseline(format!(
                "2 × resync + one write ({}) = {target:.0} ms",
                bench::millis(f.write)
            ))
            .target(
                format!("≤ baseline (now {:.2} ×)", ms(f.latency) / target),
                ms(f.latency) <= target,
            ),
        );
    table.emit()?;
    Ok(())
}

/// Issue 21 item 3: the large run beside the regular one; linear means the time per object
/// stays put (within 1.25 ×, since a larger store costs a little more per lookup) and so do
/// the writes per object.
fn linearity(regular: &Figures, large: &Figures) -> anyhow::Result<()> {
    let mut table = Table::new(format!(
        "arbor-gitsync: linear in objects, {} beside {} ConfigMaps",
        large.count, regular.count
    ));
    table.note(
        "The same bench at both sizes (ARBOR_BENCH_LARGE=1). gitsync's peak RSS at the large \
         size, as its own process, is in the memory table.",
    );
    let time_ratio = large.per_object().as_secs_f64() / regular.per_object().as_secs_f64();
    let writes_per = |f: &Figures| f.initial_writes() as f64 / f.count as f64;
    let writes_ratio = writes_per(large) / writes_per(regular);
    table
        .row(
            Row::new(
                format!("initial sync time per object at {}", large.count),
                format!("{:.1} µs", large.per_object().as_secs_f64() * 1e6),
            )
            .baseline(format!(
                "at {}: {:.1} µs (the bare client: {:.1} µs at {}, {:.1} µs at {}, {:.2} ×)",
                regular.count,
                regular.per_object().as_secs_f64() * 1e6,
                regular.bare_per_object().as_secs_f64() * 1e6,
                regular.count,
                large.bare_per_object().as_secs_f64() * 1e6,
                large.count,
                large.bare_per_object().as_secs_f64() / regular.bare_per_object().as_secs_f64(),
            ))
            .target(
                format!("≤ 1.25 × baseline (now {time_ratio:.2} ×)"),
                time_ratio <= 1.25,
            ),
        )
        .row(
            Row::new(
                format!("writes per object at {}", large.count),
                format!("{:.3}", writes_per(large)),
            )
            .baseline(format!("at {}: {:.3}", regular.count, writes_per(regular)))
            .target(
                format!("≤ 1.01 × baseline (now {writes_ratio:.3} ×)"),
                writes_ratio <= 1.01,
            ),
        );
    table.emit()?;
    Ok(())
}

/// A fresh emulator with Arbor's CRDs and `namespace`, and a client to it.
struct Bed {
    emu: KubeEmu,
    config: kube::Config,
    client: Client,
}

impl Bed {
    async fn new(namespace: &str) -> anyhow::Result<Bed> {
        let emu = KubeEmu::start().await?;
        let config =
            arbor_runtime::client::config_from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
        let client = arbor_runtime::client::with_retries(config.clone())?;
        arbor_testkit::cluster::install_crds(&client, PATIENCE).await?;
        arbor_testkit::cluster::ensure_namespace(&client, namespace).await?;
        Ok(Bed {
            emu,
            config,
            client,
        })
    }
}

/// gitsync's flags in the bench: file repositories allowed, GitTracks only, `cache` its
/// fetch cache, every other flag at its default (the write concurrency among them).
fn gitsync_args(cache: &std::path::Path) -> anyhow::Result<Args> {
    let cache_flag = format!("--cache-dir={}", cache.display());
    Ok(Args::try_parse_from([
        "arbor-gitsync",
        "--leader-election=false",
        "--grpc-addr=127.0.0.1:0",
        "--admin-addr=127.0.0.1:0",
        "--allow-file-repositories",
        "--gittrack-mode=Enabled",
        "--clustergittrack-mode=Disabled",
        &cache_flag,
    ])?)
}

/// One initial sync: a fresh gitsync (empty fetch cache) on a fresh emulator, from creating
/// the GitTrack to its status showing `commit`. The emulator and gitsync stay up for the
/// figures measured after it.
struct InitialSync {
    bed: Bed,
    running: Running,
    _cache: tempfile::TempDir,
    time: Duration,
    object_writes: u64,
    source_writes: u64,
}

const SOURCE: &str = "bench";

fn source() -> SourceRef {
    SourceRef::GitTrack {
        namespace: SOURCE.into(),
        name: SOURCE.into(),
    }
}

async fn initial_sync(repo: &GitRepo, commit: &str) -> anyhow::Result<InitialSync> {
    let bed = Bed::new(SOURCE).await?;
    let cache = tempfile::tempdir()?;
    let args = gitsync_args(cache.path())?;
    let settings = args.settings()?;
    let component = Component::with_config("gitsync", args.common.clone(), bed.config.clone())?;
    let running = arbor_gitsync::run::start(component, settings)
        .await?
        .context("stopped while starting")?;

    let sources: Api<GitTrack> = Api::namespaced(bed.client.clone(), SOURCE);
    bed.emu.requests().reset();
    let started = Instant::now();
    sources
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": SOURCE, "namespace": SOURCE},
                "spec": {"repository": repo.file_url(),
                         "reference": {"branch": "main"}, "layout": "Flat", "pollInterval": "1h"},
            }))?,
        )
        .await?;
    wait_for("the initial sync", || async {
        let status = sources.get(SOURCE).await?.status.unwrap_or_default();
        Ok(status.observed_commit.as_deref() == Some(commit))
    })
    .await?;
    let time = started.elapsed();
    let all_writes = bed.emu.requests().writes();
    let object_writes = writes_to(bed.emu.requests(), &OBJECT_RESOURCES);
    // The status shows the commit just before the round is counted as finished: wait for the
    // count, so that a round requested after this one is a new one.
    running
        .context()
        .registry
        .wait_for_round(&source(), 0, PATIENCE)
        .await;
    Ok(InitialSync {
        bed,
        running,
        _cache: cache,
        time,
        object_writes,
        source_writes: all_writes - object_writes,
    })
}

impl InitialSync {
    async fn stop(self) {
        self.running.stop().await;
        self.bed.emu.shutdown().await;
    }
}

/// The bare client's baseline on a fresh emulator: its time and its writes.
async fn bare_round(count: usize, width: usize) -> anyhow::Result<(Duration, u64)> {
    let bed = Bed::new("baseline").await?;
    bed.emu.requests().reset();
    let time = bare_client(&bed.client, "baseline", count, width).await?;
    let writes = writes_to(bed.emu.requests(), &OBJECT_RESOURCES);
    bed.emu.shutdown().await;
    Ok((time, writes))
}

/// How many times the initial sync and its baseline are each measured. One run of either
/// moves by a fifth with whatever else the machine does (at 100,000 objects, gitsync 20-25 s
/// and the bare client 16-20 s in four runs of one build), so they take turns, each on a fresh
/// emulator, and the figure is the median of the rounds (as the webhook bench does).
const ROUNDS: usize = 3;

/// The size of the warm-up sync and baseline before the rounds.
const WARM_UP: usize = 10_000;

fn median<T: Copy + PartialOrd>(values: &[T]) -> T {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    sorted[sorted.len() / 2]
}

/// gitsync's initial sync of `count` ConfigMaps and the bare client's baseline, taking turns
/// for [`ROUNDS`] rounds; then, on the last round's gitsync, the unchanged resync and the
/// one-object commit.
async fn measure(count: usize) -> anyhow::Result<Figures> {
    let repo_dir = tempfile::tempdir()?;
    let repo = GitRepo::init(repo_dir.path().join("repo"))?;
    // gitsync's default write concurrency, which the baseline uses too.
    let width = gitsync_args(tempfile::tempdir()?.path())?
        .settings()?
        .max_concurrent_writes;

    // Warm-up: the process's first sync and first baseline run slower (a fifth at 10,000:
    // the allocator's and the runtime's first growth), whichever goes first.
    let warm_up = count.min(WARM_UP);
    let warm_up_commit = commit(&repo, warm_up, None)?;
    InitialSync::stop(initial_sync(&repo, &warm_up_commit).await?).await;
    bare_round(warm_up, width).await?;
    let first = if warm_up == count {
        warm_up_commit
    } else {
        commit(&repo, count, None)?
    };

    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut kept = None;
    for round in 0..ROUNDS {
        // Which goes first alternates, so a drift of the machine over the run falls on both;
        // the last round's baseline goes first, so that its gitsync is the one kept for the
        // figures after the rounds and nothing runs beside any measurement.
        let last = round + 1 == ROUNDS;
        let bare_first = (ROUNDS - 1 - round).is_multiple_of(2);
        let mut bare = if bare_first {
            Some(bare_round(count, width).await?)
        } else {
            None
        };
        let synced = initial_sync(&repo, &first).await?;
        let (initial, object_writes, source_writes) =
            (synced.time, synced.object_writes, synced.source_writes);
        if last {
            kept = Some(synced);
        } else {
            synced.stop().await;
        }
        let (bare_time, bare_writes) = match bare.take() {
            Some(figures) => figures,
            None => bare_round(count, width).await?,
        };
        rounds.push(Round {
            initial,
            object_writes,
            source_writes,
            bare: bare_time,
            bare_writes,
        });
    }
    let synced = kept.context("no round ran")?;
    let (running, client) = (&synced.running, &synced.bed.client);

    // Let the events of the first round land before measuring the resync.
    full_round(running, &source()).await;
    synced.bed.emu.requests().reset();
    let started = Instant::now();
    full_round(running, &source()).await;
    let resync = started.elapsed();
    let resync_writes = synced.bed.emu.requests().writes();

    let changed = count / 2;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), SOURCE);
    let started = Instant::now();
    commit(&repo, count, Some(changed))?;
    running.context().registry.request_round(&source());
    wait_for("the changed object", || async {
        let live = configmaps.get(&format!("cm-{changed}")).await?;
        Ok(live
            .data
            .unwrap_or_default()
            .get("value")
            .map(String::as_str)
            == Some("changed"))
    })
    .await?;
    let latency = started.elapsed();

    arbor_testkit::cluster::ensure_namespace(client, "baseline").await?;
    let write = one_write(client, "baseline").await?;
    synced.stop().await;
    Ok(Figures {
        count,
        width,
        rounds,
        resync,
        resync_writes,
        latency,
        write,
    })
}
