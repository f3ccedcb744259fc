//! One round of one source (see the [module docs](super) for the steps).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arbor_api::condition::{ConditionUpdate, reasons};
use arbor_api::keys::{ArborKeys, SourceRef};
use arbor_api::source::{GitSourceStatus, PruneWindowStatus, SourceError};
use arbor_policy::object::{GroupVersionKind, ObjectKey};
use arbor_policy::sync::prune::{Claim, PruneBudget, PruneVerdict, PruneWindow, claim};
use arbor_policy::sync::round::{
    self, CommitLoad, DeclaredInput, LiveObject, Prune, PruneInput, RoundInput, RoundPlan, Rules,
    SourceInfo, StateToSync, TrackedObject, state_to_sync,
};
use arbor_policy::sync::{Action, CompareFields, Moment, Row};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::Context;
use super::error::{self, ControllerError};
use super::fetch_and_parse::{self, LoadRequest};
use super::held_state::HeldState;
use super::live_objects::Snapshot;
use super::notice;
use super::object_status::{self, Attempt, in_sync_condition};
use super::plan::{Part, Plan, PlannedObject, Planner, Why, crd_kinds, is_crd};
use super::registry::{Declared, GoodState, ObjectRecord, ObjectState, RecordsBuilder};
use super::source_handle::SourceHandle;
use super::status::{Changes, Counters, Outcome, RoundReport};
use super::tracking::{self, InventoryRead, Tracked};
use crate::apply::{Applier, ApplyError, ServedKind, Target};

/// What one round did.
#[derive(Debug, Default)]
pub struct RoundResult {
    /// `None` when the round found nothing to do (same commit, no resync due).
    pub report: Option<RoundReport>,
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    /// The commit applied for the first time in this round, with its time.
    pub new_commit: Option<(String, SystemTime)>,
    /// The round deleted more than the budget because of the allow-mass-prune annotation,
    /// which is therefore spent.
    pub allowance_used: bool,
    /// The status the round wrote while it ran (progress), when it did.
    pub in_flight: Option<GitSourceStatus>,
    /// Where the round's time went.
    pub timings: RoundTimings,
}

/// Where a round's time went, logged at debug level as `round timings` (the steps of the
/// [module docs](super)).
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundTimings {
    pub load: fetch_and_parse::LoadTimings,
    /// Listing the source's tracking objects.
    pub inventory: Duration,
    /// Discovery and listing the declared kinds' live objects.
    pub live: Duration,
    /// The round's plan and the planner's two parts.
    pub plan: Duration,
    /// Applying every declared object (tracking object, object, condition).
    pub apply: Duration,
    pub prune: Duration,
}

impl RoundTimings {
    fn log(&self, source: &SourceRef) {
        let ms = |duration: Duration| duration.as_millis();
        tracing::debug!(
            %source,
            fetch_ms = ms(self.load.fetch),
            checkout_ms = ms(self.load.checkout),
            parse_ms = ms(self.load.parse),
            inventory_ms = ms(self.inventory),
            live_ms = ms(self.live),
            plan_ms = ms(self.plan),
            apply_ms = ms(self.apply),
            prune_ms = ms(self.prune),
            "round timings"
        );
    }
}

impl RoundResult {
    /// Objects created, updated and deleted.
    pub fn changes(&self) -> Changes {
        Changes {
            created: self.created,
            updated: self.updated,
            deleted: self.deleted,
        }
    }

    fn stopped(outcome: Outcome, errors: Vec<SourceError>) -> Self {
        Self {
            report: Some(RoundReport::stopped(outcome, errors)),
            ..Self::default()
        }
    }
}

fn source_error(
    code: &str,
    file: Option<String>,
    object: Option<String>,
    message: String,
) -> SourceError {
    SourceError {
        code: code.to_owned(),
        file,
        object,
        message,
    }
}

fn stalled(reason: &'static str, code: &str, message: String) -> RoundResult {
    RoundResult::stopped(
        Outcome::Stalled {
            reason,
            message: message.clone(),
        },
        vec![source_error(code, None, None, message)],
    )
}

/// Runs one round of `handle`.
pub async fn run(ctx: &Context, handle: &SourceHandle) -> RoundResult {
    ctx.registry.update(&handle.reference, |record| {
        record.repository = handle.repository.clone();
        record.revision = handle.revision_text.clone();
        record.suspended = handle.suspend;
        record.deletion_policy = handle.deletion_policy;
    });
    if let Some(message) = handle.spec_error_message() {
        return stalled(reasons::INVALID_SPEC, error::INVALID_SPEC, message);
    }
    if handle.suspend {
        return RoundResult::stopped(Outcome::Suspended, Vec::new());
    }
    let applier = match super::identity::applier_for(ctx, handle) {
        Ok(applier) => applier,
        Err(message) => return stalled(reasons::INVALID_SPEC, error::INVALID_SPEC, message),
    };
    let Some(reference) = handle.revision.clone() else {
        return stalled(
            reasons::INVALID_SPEC,
            error::INVALID_SPEC,
            "spec.reference names no revision".into(),
        );
    };
    let credentials = match super::credentials::read(&ctx.client, handle.auth.as_ref()).await {
        Ok(credentials) => credentials,
        Err(error) => return stalled(reasons::SECRET_INVALID, error.code(), error.to_string()),
    };
    // What the round reads of the source's record, not its objects: a copy of those would
    // live beside the registry's for the whole round.
    let record = ctx
        .registry
        .view(&handle.reference, |record| LastRound {
            good: record.good.clone(),
            generation: record.generation,
            last_full_round: record.last_full_round,
            full_round_requested: record.full_round_requested,
        })
        .unwrap_or_default();
    let request = LoadRequest {
        id: handle.fetch_id.clone(),
        url: handle.repository.clone(),
        reference,
        credentials,
        sub_path: handle.sub_path.clone(),
        layout: handle.layout,
        known_commit: record
            .good
            .as_ref()
            .filter(|_| record.generation == handle.generation)
            .map(|good| good.commit.clone()),
    };
    let loaded = match fetch_and_parse::fetch_and_load(&ctx.fetcher, request, &ctx.stopping).await {
        Ok(loaded) => loaded,
        // This replica stops: the shard's next holder fetches again; nothing to report.
        Err(ControllerError::ShardLeft) => {
            tracing::info!(source = %handle.reference, "the round's fetch was given up: this replica stops");
            return RoundResult::default();
        }
        Err(error) => {
            let message = error.to_string();
            return RoundResult::stopped(
                Outcome::Failed {
                    reason: reasons::FETCH_FAILED,
                    message: message.clone(),
                },
                vec![source_error(error.code(), None, None, message)],
            );
        }
    };
    let resync_due = record
        .last_full_round
        .is_none_or(|last| last.elapsed() >= ctx.settings.resync_period);
    if loaded.parsed.is_none() && !resync_due && !record.full_round_requested {
        return RoundResult::default();
    }
    ctx.registry.update(&handle.reference, |record| {
        record.full_round_requested = false
    });

    let started = Instant::now();
    let outcome = match &loaded.parsed {
        None => CommitLoad::Unchanged,
        Some(Ok(_)) => CommitLoad::Parsed,
        Some(Err(_)) => CommitLoad::ParseFailed,
    };
    let (good, parse_errors, new_commit) = match (
        state_to_sync(outcome, record.good.is_some()),
        loaded.parsed,
        record.good,
    ) {
        (StateToSync::New, Some(Ok(state)), _) => (
            GoodState {
                commit: loaded.commit.clone(),
                state: Arc::new(state),
            },
            Vec::new(),
            Some((loaded.commit.clone(), loaded.commit_time)),
        ),
        (StateToSync::LastGood, _, Some(good)) => (good, Vec::new(), None),
        (StateToSync::LastGoodDespiteErrors, Some(Err(errors)), Some(good)) => {
            (good, errors.iter().map(to_api_error).collect(), None)
        }
        (StateToSync::StallNothingGood, Some(Err(errors)), _) => {
            let errors: Vec<SourceError> = errors.iter().map(to_api_error).collect();
            let message = format!(
                "commit {} does not parse ({} error(s)); nothing was applied",
                loaded.commit,
                errors.len()
            );
            return RoundResult::stopped(
                Outcome::Stalled {
                    reason: reasons::PARSE_FAILED,
                    message,
                },
                errors,
            );
        }
        // `Nothing`, and no other combination: `state_to_sync` answers from these very values.
        _ => return RoundResult::default(),
    };
    ctx.registry.update(&handle.reference, |record| {
        record.good = Some(good.clone());
        record.generation = handle.generation;
    });
    let parse_failed = !parse_errors.is_empty();
    let mut timings = RoundTimings {
        load: loaded.timings,
        ..RoundTimings::default()
    };
    let mut result = match sync(ctx, handle, &applier, &good, parse_errors, &mut timings).await {
        Ok(result) => result,
        Err(error) => {
            let message = error.to_string();
            RoundResult::stopped(
                Outcome::Failed {
                    reason: reasons::APPLY_FAILED,
                    message: message.clone(),
                },
                vec![source_error(error.code(), None, None, message)],
            )
        }
    };
    if let Some(report) = result.report.as_mut()
        && parse_failed
        && report.outcome == Outcome::Synced
    {
        report.outcome = Outcome::Stalled {
            reason: reasons::PARSE_FAILED,
            message: format!(
                "the latest commit {} does not parse; the last good commit {} stays applied and \
                 nothing is deleted",
                loaded.commit, good.commit
            ),
        };
    }
    // A round that did not finish cleanly (blocked, failed objects) runs in full again at the
    // next poll or change of the source, even on the same commit.
    let retry = result.report.as_ref().is_some_and(|report| {
        report.outcome != Outcome::Synced
            || report
                .errors
                .iter()
                .any(|error| error.code != error::UNMANAGED_OBJECT)
    });
    ctx.registry.update(&handle.reference, |record| {
        record.last_full_round = Some(tokio::time::Instant::now());
        record.full_round_requested |= retry;
    });
    ctx.metrics
        .sync_duration
        .observe(started.elapsed().as_secs_f64());
    timings.log(&handle.reference);
    result.timings = timings;
    if result
        .report
        .as_ref()
        .is_some_and(|r| r.outcome == Outcome::Synced)
    {
        result.new_commit = new_commit;
    }
    result
}

fn to_api_error(error: &arbor_policy::layout::SourceError) -> SourceError {
    let message = match error.line {
        Some(line) => format!("line {line}: {}", error.message),
        None => error.message.clone(),
    };
    source_error(
        error.code.as_str(),
        Some(error.path.clone()).filter(|path| !path.is_empty()),
        error.object.clone(),
        message,
    )
}

/// The stored mass-prune window, as the budget reads it.
pub fn window_of(status: &PruneWindowStatus) -> PruneWindow {
    let count = |n: i64| usize::try_from(n).unwrap_or(0);
    PruneWindow {
        start: SystemTime::from(status.start.0),
        high_water: count(status.high_water_mark),
        pruned: count(status.pruned),
    }
}

fn window_status(window: PruneWindow) -> PruneWindowStatus {
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    PruneWindowStatus {
        start: Time(
            k8s_openapi::jiff::Timestamp::try_from(window.start)
                .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        ),
        high_water_mark: count(window.high_water),
        pruned: count(window.pruned),
    }
}

/// The parts of a round after parsing, which may fail as a whole only on listing.
struct Sync<'a> {
    known: Known<'a>,
    tally: Tally,
}

/// What a round knows before it applies anything; read, never changed, while its objects are
/// applied side by side.
struct Known<'a> {
    ctx: &'a Context,
    handle: &'a SourceHandle,
    /// Writes the source's objects, as its service account where it has one.
    applier: &'a Applier,
    state: &'a HeldState,
    /// The same state, shared with the records the round makes ([`Declared::Applied`]).
    shared_state: Arc<HeldState>,
    tracked: BTreeMap<ObjectKey, Tracked>,
    /// Tracking objects other sources manage: declaring one of their objects is a conflict.
    others: BTreeMap<ObjectKey, Tracked>,
    /// Tracking objects without a controller owner, which a declaring source adopts.
    unowned: BTreeSet<ObjectKey>,
    snapshot: Snapshot,
    listed: BTreeSet<GroupVersionKind>,
}

/// What a round has done so far.
struct Tally {
    /// Until [`Sync::publish`] hands them to the registry.
    records: RecordsBuilder,
    /// How many records are in each state, counted when they are published.
    by_state: Vec<(ObjectState, usize)>,
    errors: Vec<SourceError>,
    ignored_files: BTreeMap<String, String>,
    refused: Vec<String>,
    progress: Option<Progress>,
    result: RoundResult,
    /// The mass-prune window to store, when the round judged one.
    prune_window: Option<PruneWindowStatus>,
    /// Tracking objects the round created or adopted, and those it deleted: with the
    /// inventory it started from, what the source holds at its end (the prune window's
    /// high-water mark).
    tracking_created: usize,
    tracking_deleted: usize,
}

/// How far a round that applies a new commit (or generation) has got, written to the source's
/// status as it goes (see [`super::status::in_progress`]) once the round has run for
/// [`PROGRESS_EVERY`], and at most that often after.
struct Progress {
    commit: String,
    total: usize,
    done: usize,
    started: Instant,
    written: Option<Instant>,
    status: GitSourceStatus,
}

impl Progress {
    /// A round that finishes within [`PROGRESS_EVERY`] writes no progress: its finished status
    /// is its one write, and a reader misses no more than that second of `Reconciling`.
    fn due(&self) -> bool {
        self.written.unwrap_or(self.started).elapsed() >= PROGRESS_EVERY
    }
}

/// An object another source manages (its tracking object names that source): this source
/// leaves it alone.
struct Conflict {
    manager: String,
}

/// A progress write of a running round, with the status it writes.
type ProgressWrite =
    futures::future::BoxFuture<'static, (GitSourceStatus, Result<(), ControllerError>)>;

/// How often a running round writes its progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

async fn sync(
    ctx: &Context,
    handle: &SourceHandle,
    applier: &Applier,
    good: &GoodState,
    parse_errors: Vec<SourceError>,
    timings: &mut RoundTimings,
) -> Result<RoundResult, ControllerError> {
    let state = good.state.as_ref();
    let parse_failed = !parse_errors.is_empty();
    let mut step = Instant::now();
    let mut lap = || {
        let elapsed = step.elapsed();
        step = Instant::now();
        elapsed
    };
    // The inventory and the live objects do not depend on each other: read side by side (under
    // API throttling each read costs seconds of retries).
    let read_from = if ctx.registry.inventory_listed(&handle.reference) {
        InventoryRead::Watch
    } else {
        InventoryRead::Fresh
    };
    let ((inventory, inventory_took), (live, live_took)) = tokio::join!(
        timed(tracking::list_inventory(ctx, handle, read_from)),
        timed(async {
            let kinds = declared_kinds(ctx, state).await;
            Snapshot::read(ctx.applier.discovery(), &kinds, handle.namespace.as_deref())
                .await
                .map(|snapshot| (kinds, snapshot))
        }),
    );
    (timings.inventory, timings.live) = (inventory_took, live_took);
    let (inventory, (kinds, snapshot)) = (inventory?, live?);
    if read_from == InventoryRead::Fresh {
        ctx.registry
            .update(&handle.reference, |record| record.inventory_listed = true);
    }
    lap();
    let mut round = Sync {
        known: Known {
            ctx,
            handle,
            applier,
            state,
            shared_state: good.state.clone(),
            tracked: inventory.owned,
            others: inventory.others,
            unowned: inventory.unowned,
            snapshot,
            listed: kinds.keys().cloned().collect(),
        },
        tally: Tally {
            records: RecordsBuilder::with_capacity(state.objects.len()),
            by_state: Vec::new(),
            errors: parse_errors,
            ignored_files: BTreeMap::new(),
            refused: Vec::new(),
            progress: (handle.status.observed_commit.as_deref() != Some(good.commit.as_str())
                || handle.status.observed_generation != handle.generation)
                .then(|| Progress {
                    commit: good.commit.clone(),
                    total: state.objects.len(),
                    done: 0,
                    started: Instant::now(),
                    written: None,
                    status: handle.status.clone(),
                }),
            result: RoundResult::default(),
            prune_window: None,
            tracking_created: 0,
            tracking_deleted: 0,
        },
    };
    if let Some(progress) = &round.tally.progress {
        tracing::info!(source = %handle.reference, commit = %progress.commit, objects = progress.total, "applying a new commit");
    }
    let plan = round.known.plan(&kinds, parse_failed);
    let removals: Vec<Tracked> = plan
        .delete
        .iter()
        .filter_map(|key| round.known.tracked.get(key).cloned())
        .collect();
    let sweep: Vec<(ObjectKey, GroupVersionKind, Value)> = plan
        .sweep
        .iter()
        .filter_map(|key| {
            let (gvk, _) = served_of(&kinds, key)?;
            Some((
                key.clone(),
                gvk.clone(),
                round.known.snapshot.get(key)?.clone(),
            ))
        })
        .collect();
    if let Prune::Judged(verdict) = &plan.prune {
        let window = Some(window_status(verdict.window()));
        match verdict {
            PruneVerdict::Blocked { message, .. } => {
                let message = format!(
                    "{message}; nothing was changed. Annotate the source with {}=true to allow \
                     one round",
                    ctx.settings.keys.allow_mass_prune_annotation()
                );
                let mut blocked = stalled(
                    reasons::MASS_PRUNE_BLOCKED,
                    error::MASS_PRUNE_BLOCKED,
                    message,
                );
                if let Some(report) = blocked.report.as_mut() {
                    report.prune_window = window;
                }
                return Ok(blocked);
            }
            PruneVerdict::Allowed { by_annotation, .. } => {
                round.tally.result.allowance_used = *by_annotation;
                round.tally.prune_window = window;
            }
        }
    }
    let planner = Planner {
        discovery: ctx.applier.discovery(),
        scope: &ctx.settings.scope,
        keys: &ctx.settings.keys,
        label: &ctx.settings.label,
    };
    let foundation = planner.plan(handle, state, Part::Foundation).await;
    timings.plan = lap();
    let wrote_crd = round.apply_plan(&foundation).await;
    if !round.known.may_write() {
        return Err(ControllerError::ShardLeft);
    }
    if wrote_crd {
        round.known.wait_for_new_kinds(&foundation).await;
    }
    timings.apply = lap();
    let rest = planner.plan(handle, state, Part::Rest).await;
    timings.plan += lap();
    round.apply_plan(&rest).await;
    timings.apply += lap();
    // Their records are made: the plans go before what comes next allocates.
    drop((foundation, rest));
    // Stopped midway: what the round did not apply is not recorded as this commit's state.
    if !round.known.may_write() {
        return Err(ControllerError::ShardLeft);
    }

    // The finalizers of pruned tracking objects read the new declarations from the registry.
    round.publish();
    if plan.prune.allows() {
        round.prune(&removals, &sweep).await;
    }
    timings.prune = lap();
    Ok(round.finish(good))
}

/// What a round reads of its source's record ([`super::registry::SourceRecord`]).
#[derive(Debug, Default)]
struct LastRound {
    good: Option<GoodState>,
    generation: Option<i64>,
    last_full_round: Option<tokio::time::Instant>,
    full_round_requested: bool,
}

/// `read`'s answer and how long it took.
async fn timed<T>(read: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let answer = read.await;
    (answer, started.elapsed())
}

/// Every declared kind with a version to list it by, and how the cluster serves it.
pub(super) async fn declared_kinds(
    ctx: &Context,
    state: &HeldState,
) -> BTreeMap<GroupVersionKind, ServedKind> {
    let mut versions: BTreeMap<GroupVersionKind, ()> = BTreeMap::new();
    for declared in state.objects.values() {
        if let Some(gvk) = &declared.gvk {
            versions.insert(gvk.clone(), ());
        }
    }
    for kind in state.kinds.values() {
        let listed = versions
            .keys()
            .any(|gvk| gvk.group_kind() == kind.group_kind);
        if let (false, Some(version)) = (listed, kind.versions.first()) {
            versions.insert(
                GroupVersionKind {
                    group: kind.group_kind.group.clone(),
                    version: version.as_str().into(),
                    kind: kind.group_kind.kind.clone(),
                },
                (),
            );
        }
    }
    let mut served = BTreeMap::new();
    for gvk in versions.into_keys() {
        if let Ok(kind) = ctx.applier.discovery().served(&gvk).await {
            served.insert(gvk, kind);
        }
    }
    served
}

/// What a round (or a preview) observed before it plans.
pub(super) struct Observed<'a> {
    pub state: &'a HeldState,
    /// The source's inventory.
    pub tracked: &'a BTreeMap<ObjectKey, Tracked>,
    pub snapshot: &'a Snapshot,
    pub kinds: &'a BTreeMap<GroupVersionKind, ServedKind>,
}

/// Asks `arbor_policy::sync::round::plan` about `observed`, with `declared` objects to decide
/// against their live objects (none for a round, which decides each as it writes it).
pub(super) fn plan_round(
    ctx: &Context,
    handle: &SourceHandle,
    observed: &Observed<'_>,
    declared: &[DeclaredInput<'_>],
    parse_failed: bool,
) -> RoundPlan {
    let settings = &ctx.settings;
    let source_annotation = settings.keys.source_annotation();
    let reference = handle.reference.to_string();
    let tracked: Vec<TrackedObject> = observed
        .tracked
        .values()
        .map(|tracked| TrackedObject {
            key: tracked.key().clone(),
            deleting: tracked.deleting(),
        })
        .collect();
    let live: Vec<LiveObject<'_>> = observed
        .snapshot
        .iter()
        .filter_map(|(key, object)| {
            let (_, served) = served_of(observed.kinds, key)?;
            Some(LiveObject {
                key,
                object,
                namespaced: served.namespaced,
            })
        })
        .collect();
    round::plan(&RoundInput {
        state: observed.state,
        source: SourceInfo {
            owner: &handle.owner,
            reference: &reference,
            namespace: handle.namespace.as_deref(),
        },
        rules: Rules {
            scope: &settings.scope,
            label: &settings.label,
            source_annotation: &source_annotation,
        },
        tracked: &tracked,
        declared,
        live: &live,
        prune: PruneInput {
            enabled: handle.prune,
            parse_failed,
            budget: PruneBudget {
                max_fraction: settings.max_prune_fraction,
                window: settings.prune_window,
            },
            previous: handle.status.prune_window.as_ref().map(window_of),
            allowed: handle.allow_mass_prune,
            now: SystemTime::now(),
        },
    })
}

/// The version a kind is listed by, and how it is served.
pub(super) fn served_of<'k>(
    kinds: &'k BTreeMap<GroupVersionKind, ServedKind>,
    key: &ObjectKey,
) -> Option<(&'k GroupVersionKind, &'k ServedKind)> {
    kinds
        .iter()
        .find(|(gvk, _)| gvk.group_kind() == key.group_kind)
}

impl Known<'_> {
    /// The round's plan (`arbor_policy::sync::round`): what it deletes and sweeps, and whether
    /// the guards let it delete. Declared objects are decided one by one as they are written
    /// (`Applier::decide`, the same table): a kind the round did not list (one the
    /// foundation's CustomResourceDefinitions just made served) is read then.
    fn plan(
        &self,
        kinds: &BTreeMap<GroupVersionKind, ServedKind>,
        parse_failed: bool,
    ) -> RoundPlan {
        let observed = Observed {
            state: self.state,
            tracked: &self.tracked,
            snapshot: &self.snapshot,
            kinds,
        };
        plan_round(self.ctx, self.handle, &observed, &[], parse_failed)
    }

    /// The live object of `planned`: the snapshot's, borrowed (a round compares every object,
    /// most of them unchanged), or read now.
    async fn live_of(
        &self,
        planned: &PlannedObject,
        target: &Target<'_>,
    ) -> Result<Option<Cow<'_, Value>>, ApplyError> {
        if self.listed.contains(&planned.gvk) {
            return Ok(self.snapshot.get(&planned.key).map(Cow::Borrowed));
        }
        Ok(self.ctx.applier.live(target).await?.map(Cow::Owned))
    }

    /// Applies `planned` unless another source manages it, holding a write permit meanwhile.
    async fn attempt<'p>(
        &self,
        planned: &'p PlannedObject,
    ) -> (
        &'p PlannedObject,
        Result<Result<crate::apply::Outcome, ControllerError>, Conflict>,
    ) {
        // An object another source manages is never applied by this one.
        if let Some(manager) = self.conflict(planned) {
            return (planned, Err(Conflict { manager }));
        }
        // The semaphore is never closed; without a permit the write still goes, unbounded.
        let _permit = self.ctx.writes.acquire().await.ok();
        // Waiting for the permit may have outlasted the shard (or this replica began to stop).
        if !self.may_write() {
            return (planned, Ok(Err(ControllerError::ShardLeft)));
        }
        (planned, Ok(self.execute(planned).await))
    }

    /// Whether the round may start another write: its source's shard is still held for work
    /// here, which it no longer is once this replica begins to stop ([`arbor_runtime::shards`]).
    /// A write already sent is waited for, never dropped; the rest is left to the next holder.
    fn may_write(&self) -> bool {
        super::shard::works_on(self.ctx, self.handle)
    }

    /// Ensures the tracking object of `planned`, applies it and writes the tracking object's
    /// `ObjectInSync` condition. The table's decision is kept apart from carrying it out, so
    /// that a failed write still says which row failed in that condition.
    async fn execute(
        &self,
        planned: &PlannedObject,
    ) -> Result<crate::apply::Outcome, ControllerError> {
        let mut decided = None;
        let desired = planned.applied_form(
            self.state,
            &self.ctx.settings.keys,
            &self.ctx.settings.label,
            &self.handle.reference,
        );
        let outcome = async {
            tracking::ensure(
                self.ctx,
                self.handle,
                planned,
                &desired,
                self.tracked.get(&planned.key),
                self.unowned.contains(&planned.key),
            )
            .await?;
            let target = Target {
                gvk: &planned.gvk,
                namespace: planned.namespace(),
                name: &planned.key.name,
                sync_declared: self.state.declares_kind(&planned.key.group_kind),
                desired: Some(&desired),
                compare: &planned.compare,
            };
            let live = self.live_of(planned, &target).await?;
            if !self.may_write() {
                return Err(ControllerError::ShardLeft);
            }
            // Decided once: the decision names the row in the condition if the write fails.
            let decision = self.applier.decide(&target, live.as_deref()).1;
            decided = Some(decision);
            Ok::<_, ControllerError>(
                self.applier
                    .carry_out(&target, live.as_deref(), decision)
                    .await?,
            )
        }
        .await;
        let failure = outcome.as_ref().err().map(ToString::to_string);
        let attempt = match (&outcome, decided, failure.as_deref()) {
            (Ok(outcome), _, _) => Attempt::Done(outcome.decision),
            (Err(_), Some(decision), Some(error)) => Attempt::ActionFailed(decision, error),
            (Err(_), _, error) => Attempt::Failed(error.unwrap_or_default()),
        };
        self.record_condition(planned, in_sync_condition(attempt))
            .await;
        outcome
    }

    /// The other source that manages `planned`'s object, if one does (the conflict rule).
    fn conflict(&self, planned: &PlannedObject) -> Option<String> {
        let holder = self.others.get(&planned.key).and_then(tracking::manager);
        match claim(
            holder
                .as_ref()
                .map(|(name, uid)| (name.as_str(), uid.as_str())),
            &self.handle.uid,
        ) {
            Claim::ManagedBy(manager) => Some(manager),
            Claim::Free | Claim::Ours => None,
        }
    }

    /// Writes the `ObjectInSync` condition of `planned`'s tracking object when it says
    /// something the tracking object does not ([`object_status::conditions_to_write`]). A
    /// failed write is logged and counted, and the next round tries again: the object itself
    /// was handled.
    async fn record_condition(&self, planned: &PlannedObject, condition: ConditionUpdate) {
        if !self.may_write() {
            return;
        }
        let stored = self.tracked.get(&planned.key).map_or(&[][..], |tracked| {
            tracked.declaration().conditions.as_slice()
        });
        let name = tracking::tracking_name(&planned.key);
        if let Err(failure) =
            object_status::record(self.ctx, &planned.tracking, &name, stored, condition).await
        {
            self.ctx.metrics.count_error(failure.code());
            tracing::warn!(object = %planned.key, error = %failure, "writing the ObjectInSync condition failed");
        }
    }

    /// Waits until the kinds of the source's CustomResourceDefinitions are served.
    async fn wait_for_new_kinds(&self, foundation: &Plan) {
        let discovery = self.ctx.applier.discovery();
        discovery.refresh();
        for planned in foundation
            .objects
            .iter()
            .filter(|p| is_crd(&p.key.group_kind))
        {
            let Some(declared) = self.state.objects.get(&planned.declared) else {
                continue;
            };
            for gvk in crd_kinds(&declared.object()) {
                if let Err(error) = discovery
                    .wait_served(&gvk, self.ctx.settings.crd_patience)
                    .await
                {
                    tracing::warn!(%error, "a CustomResourceDefinition's kind is not served yet");
                }
            }
        }
    }
}

/// Results of a round's writes that finished ahead of an earlier one, held until they can be
/// recorded in the plan's order. Bounded: while `cap` wait, the round starts no new write, so
/// one held write (a throttled one retries for minutes) cannot make a round of 100k objects
/// keep nearly all their results in memory.
struct InPlanOrder<T> {
    waiting: BTreeMap<usize, T>,
    next: usize,
    cap: usize,
}

impl<T> InPlanOrder<T> {
    /// Room for 64 windows of `width` writes, and never less than 4096 results.
    fn new(width: usize) -> Self {
        Self {
            waiting: BTreeMap::new(),
            next: 0,
            cap: width.saturating_mul(64).max(4096),
        }
    }

    /// Whether another write may start.
    fn has_room(&self) -> bool {
        self.waiting.len() < self.cap
    }

    /// The result of the plan's object number `index`.
    fn insert(&mut self, index: usize, result: T) {
        self.waiting.insert(index, result);
    }

    /// The next result in the plan's order, once it has finished.
    fn next_in_order(&mut self) -> Option<T> {
        let result = self.waiting.remove(&self.next)?;
        self.next += 1;
        Some(result)
    }

    fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

impl Tally {
    /// The progress write that is due, if one is. It is owned and runs beside the round's
    /// object writes: a status write the API server throttles (each refusal waits for
    /// `Retry-After`) must not hold the objects back.
    fn progress_write(&mut self, known: &Known<'_>) -> Option<ProgressWrite> {
        let progress = self.progress.as_mut()?;
        if !progress.due() {
            return None;
        }
        progress.written = Some(Instant::now());
        let next = super::status::in_progress(
            &progress.status,
            &progress.commit,
            (progress.done, progress.total),
            known.handle.generation,
            Time(k8s_openapi::jiff::Timestamp::now()),
        );
        let (api, resource) = super::status::source_api(&known.ctx.client, &known.handle.reference);
        let name = known.handle.owner_reference.name.clone();
        Some(Box::pin(async move {
            let written = super::status::write(&api, &resource, &name, &next).await;
            (next, written)
        }))
    }

    /// Records a finished progress write; a failed one is logged and the round goes on.
    fn progress_written(
        &mut self,
        known: &Known<'_>,
        (next, written): (GitSourceStatus, Result<(), ControllerError>),
    ) {
        let Some(progress) = self.progress.as_mut() else {
            return;
        };
        progress.written = Some(Instant::now());
        match written {
            Ok(()) => {
                progress.status = next.clone();
                self.result.in_flight = Some(next);
            }
            Err(error) => {
                tracing::warn!(source = %known.handle.reference, %error, "writing the progress failed");
            }
        }
    }

    /// Records what [`Known::execute`] did with `planned`: its record, errors and counts.
    fn apply_one(
        &mut self,
        known: &Known<'_>,
        planned: &PlannedObject,
        outcome: Result<Result<crate::apply::Outcome, ControllerError>, Conflict>,
    ) -> bool {
        let mut record = ObjectRecord {
            gvk: planned.gvk.clone(),
            file: planned.file.clone(),
            inherited_from: planned.inherited_from.clone(),
            declared: Declared::Applied {
                state: known.shared_state.clone(),
                key: planned.declared.clone(),
            },
            compare_fields: planned.compare_fields.clone(),
            state: ObjectState::Pending,
            message: Cow::Borrowed(""),
            decision: None,
            last_applied: None,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(Conflict { manager }) => {
                let message = format!(
                    "management conflict: {manager} manages this object (its tracking object {} \
                     names it); {} declares it too and leaves it alone. Remove it from one of the two \
                     sources",
                    tracking::tracking_name(&planned.key),
                    known.handle.reference
                );
                self.errors.push(source_error(
                    error::MANAGEMENT_CONFLICT,
                    Some(planned.file.to_string()),
                    Some(planned.key.to_string()),
                    message.clone(),
                ));
                record.state = ObjectState::Failed;
                record.message = message.into();
                self.records.insert(planned.key.clone(), record);
                return false;
            }
        };
        let wrote = match outcome {
            Ok(outcome) => {
                record.decision = Some(outcome.decision);
                record.message = outcome.decision.row.reason().into();
                if outcome.decision.row == Row::DeclaredButUnmanaged {
                    self.errors.push(source_error(
                        error::UNMANAGED_OBJECT,
                        Some(planned.file.to_string()),
                        Some(planned.key.to_string()),
                        format!(
                            "exists on the cluster without the management label {}; Arbor \
                             leaves it alone (label it to let Arbor manage it)",
                            known.ctx.settings.label
                        ),
                    ));
                }
                // Rows 5 and 7 are for undeclared objects: a declared one always has a state.
                record.state = ObjectState::of(outcome.decision.row, Moment::CarriedOut)
                    .unwrap_or(ObjectState::Pending);
                if !known.tracked.contains_key(&planned.key) {
                    self.tracking_created += 1;
                }
                match outcome.decision.action {
                    Action::Create => self.result.created += 1,
                    Action::Update => self.result.updated += 1,
                    Action::Delete | Action::NoAction => {}
                }
                if outcome.wrote {
                    record.last_applied = Some(SystemTime::now());
                }
                outcome.wrote
            }
            Err(failure) => {
                if !matches!(failure, ControllerError::ShardLeft) {
                    known.ctx.metrics.count_error(failure.code());
                }
                record.state = ObjectState::Failed;
                record.message = failure.to_string().into();
                self.errors.push(source_error(
                    failure.code(),
                    Some(planned.file.to_string()),
                    Some(planned.key.to_string()),
                    failure.to_string(),
                ));
                false
            }
        };
        self.records.insert(planned.key.clone(), record);
        wrote
    }

    /// Counts one more object of the plan finished, recorded yet or not: a held object, that
    /// the ones after it wait for to be recorded, does not stop the progress a reader sees.
    fn count_finished(&mut self) {
        if let Some(progress) = self.progress.as_mut() {
            progress.done += 1;
        }
    }

    /// Ignored objects go to `ignoredFiles`; objects of unserved kinds are one error per kind.
    fn record_unapplied(&mut self, known: &Known<'_>, plan: &Plan) {
        let mut unserved: BTreeMap<String, (usize, String, String)> = BTreeMap::new();
        for unapplied in &plan.unapplied {
            let (state, message) = match &unapplied.why {
                Why::Ignored(reason) => {
                    self.refused.push(reason.clone());
                    let entry = self
                        .ignored_files
                        .entry(unapplied.file.to_string())
                        .or_default();
                    if !entry.is_empty() {
                        entry.push_str("; ");
                    }
                    entry.push_str(reason);
                    (ObjectState::Ignored, reason.clone())
                }
                Why::Failed(failure) => {
                    let entry = unserved.entry(failure.to_string()).or_insert_with(|| {
                        (0, unapplied.file.to_string(), failure.code().to_owned())
                    });
                    entry.0 += 1;
                    (ObjectState::Failed, failure.to_string())
                }
            };
            let gvk = unapplied.gvk.clone().unwrap_or(GroupVersionKind {
                group: unapplied.key.group_kind.group.clone(),
                version: Default::default(),
                kind: unapplied.key.group_kind.kind.clone(),
            });
            self.records.insert(
                unapplied.key.clone(),
                ObjectRecord {
                    gvk,
                    file: unapplied.file.clone(),
                    inherited_from: None,
                    declared: Declared::AsWritten(unapplied.declared.clone()),
                    compare_fields: Vec::new(),
                    state,
                    message: message.into(),
                    decision: None,
                    last_applied: None,
                },
            );
        }
        for (message, (count, file, code)) in unserved {
            known.ctx.metrics.count_error(&code);
            self.errors.push(source_error(
                &code,
                Some(file),
                None,
                format!("{message}: {count} object(s) of the kind not applied; the rest of the source syncs"),
            ));
        }
    }
}

impl Sync<'_> {
    /// Applies every object of `plan`; returns whether a CustomResourceDefinition was written.
    ///
    /// Objects are applied through a sliding window as wide as `--max-concurrent-writes`, and
    /// each holds one of the instance's write permits while it is written: when the API server
    /// throttles or delays one request (its retries wait for `Retry-After`), that object keeps
    /// only its own slot and the rest of the round keeps moving. Objects of one part do not
    /// depend on each other (CRDs and Namespaces are a part of their own, applied first).
    /// Outcomes are recorded in the plan's order: one finished before an earlier one waits for
    /// it outside the window ([`InPlanOrder`], bounded), so a slow object never keeps finished
    /// ones' slots. Progress counts objects as they finish, in any order.
    async fn apply_plan(&mut self, plan: &Plan) -> bool {
        use futures::StreamExt as _;
        let Sync { known, tally } = self;
        let known = &*known;
        let width = known.ctx.settings.max_concurrent_writes.max(1);
        let mut waiting = plan.objects.iter().enumerate();
        let mut window = futures::stream::FuturesUnordered::new();
        let mut finished = InPlanOrder::new(width);
        let mut wrote_crd = false;
        let mut progress: Option<ProgressWrite> = None;
        loop {
            while let Some((planned, outcome)) = finished.next_in_order() {
                let wrote = tally.apply_one(known, planned, outcome);
                wrote_crd |= wrote && is_crd(&planned.key.group_kind);
            }
            // The earliest unrecorded object is in the window whenever results wait, so a full
            // `finished` never leaves the window empty.
            while window.len() < width && finished.has_room() && known.may_write() {
                let Some((index, planned)) = waiting.next() else {
                    break;
                };
                window.push(async move { (index, known.attempt(planned).await) });
            }
            if progress.is_none() && known.may_write() {
                progress = tally.progress_write(known);
            }
            let next = match progress.as_mut() {
                Some(write) => tokio::select! {
                    written = write => Err(written),
                    next = window.next() => Ok(next),
                },
                None => Ok(window.next().await),
            };
            match next {
                Ok(Some((index, done))) => {
                    tally.count_finished();
                    finished.insert(index, done);
                }
                Ok(None) => break,
                Err(written) => {
                    progress = None;
                    tally.progress_written(known, written);
                }
            }
        }
        debug_assert!(finished.is_empty(), "every finished object is recorded");
        // A progress write still in flight is finished, never dropped: the API server may carry
        // out a request its client gave up on, after the round's finished status, and as both
        // apply the whole status under one field manager the late one would take the commit
        // and Ready away again.
        if let Some(write) = progress {
            let written = write.await;
            tally.progress_written(known, written);
        }
        tally.record_unapplied(known, plan);
        wrote_crd
    }

    /// Deletes the tracking objects of removed declarations (their finalizers apply the table)
    /// and the labelled objects nothing explains.
    async fn prune(
        &mut self,
        removals: &[Tracked],
        sweep: &[(ObjectKey, GroupVersionKind, Value)],
    ) {
        for tracked in removals {
            if tracked.deleting() {
                continue;
            }
            let permit = self.known.ctx.writes.acquire().await.ok();
            if !self.known.may_write() {
                return;
            }
            let deleted = tracking::delete(self.known.ctx, tracked).await;
            drop(permit);
            match deleted {
                Ok(()) => {
                    self.tally.result.deleted += 1;
                    self.tally.tracking_deleted += 1;
                }
                Err(failure) => self.tally.errors.push(source_error(
                    failure.code(),
                    None,
                    Some(tracked.key().to_string()),
                    failure.to_string(),
                )),
            }
        }
        let compare = CompareFields::AllDeclared;
        for (key, gvk, live) in sweep {
            let target = Target {
                gvk,
                namespace: key.namespace.as_deref(),
                name: &key.name,
                sync_declared: true,
                desired: None,
                compare: &compare,
            };
            let permit = self.known.ctx.writes.acquire().await.ok();
            if !self.known.may_write() {
                return;
            }
            let swept = self.known.applier.sync_object(&target, Some(live)).await;
            drop(permit);
            match swept {
                Ok(outcome) if outcome.decision.action == Action::Delete => {
                    self.tally.result.deleted += 1;
                    let why = format!(
                        "it carries the management label, its kind is declared and no \
                         declaration or tracking object explains it (seeds/000 row {}: {})",
                        outcome.decision.row.number(),
                        outcome.decision.row.reason()
                    );
                    notice::deleted(
                        self.known.ctx,
                        &self.known.handle.reference,
                        &self.known.handle.uid,
                        &notice::describe(key),
                        &why,
                    )
                    .await;
                }
                Ok(_) => {}
                Err(failure) => self.tally.errors.push(source_error(
                    failure.code(),
                    None,
                    Some(key.to_string()),
                    failure.to_string(),
                )),
            }
        }
    }

    /// Hands the round's records to the registry, keeping only how many are in each state (a
    /// copy of every record would live beside the registry's until the round ends).
    fn publish(&mut self) {
        let records = std::mem::take(&mut self.tally.records).finish();
        self.tally.by_state = ObjectState::ALL
            .iter()
            .map(|state| {
                (
                    *state,
                    records.values().filter(|r| r.state == *state).count(),
                )
            })
            .collect();
        self.known
            .ctx
            .registry
            .update(&self.known.handle.reference, |record| {
                record.objects = records
            });
    }

    /// The round's result; after [`Sync::publish`].
    fn finish(self, good: &GoodState) -> RoundResult {
        let count = |state: ObjectState| {
            self.tally
                .by_state
                .iter()
                .find(|(counted, _)| *counted == state)
                .map_or(0, |(_, count)| *count)
        };
        let counters = Counters {
            discovered: self.known.state.objects.len(),
            applied: count(ObjectState::InSync),
            ignored: count(ObjectState::Ignored),
            in_sync: count(ObjectState::InSync),
        };
        let source = self.known.handle.reference.to_string();
        self.known
            .ctx
            .metrics
            .set_objects(&source, &self.tally.by_state);
        let held = self
            .known
            .tracked
            .values()
            .filter(|tracked| !tracked.deleting())
            .count()
            .saturating_add(self.tally.tracking_created)
            .saturating_sub(self.tally.tracking_deleted);
        let prune_window = self
            .tally
            .prune_window
            .map(|window| window_status(window_of(&window).after_round(held)));
        let mut result = self.tally.result;
        result.report = Some(RoundReport {
            outcome: Outcome::Synced,
            commit: Some(good.commit.clone()),
            counters: Some(counters),
            ignored_files: self.tally.ignored_files,
            errors: self.tally.errors,
            prune_window,
            refused: self.tally.refused,
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::InPlanOrder;

    #[test]
    fn results_finished_out_of_order_come_out_in_the_plans_order() {
        let mut finished = InPlanOrder::new(2);
        finished.insert(2, "c");
        finished.insert(1, "b");
        assert_eq!(finished.next_in_order(), None, "object 0 has not finished");
        finished.insert(0, "a");
        let recorded: Vec<_> = std::iter::from_fn(|| finished.next_in_order()).collect();
        assert_eq!(recorded, ["a", "b", "c"]);
        assert!(finished.is_empty());
    }

    /// A held object 0: the results after it fill `finished` up to its cap (4096 for a narrow
    /// window, 64 windows for a wide one), then no new write starts until object 0 finishes.
    #[test]
    fn no_write_starts_while_the_cap_of_results_wait_for_an_earlier_one() {
        for (width, cap) in [(1, 4096), (16, 4096), (100, 6400)] {
            let mut finished = InPlanOrder::new(width);
            for index in 1..cap {
                finished.insert(index, index);
                assert!(finished.has_room(), "width {width}: {index} waiting");
            }
            finished.insert(cap, cap);
            assert!(!finished.has_room(), "width {width}: {cap} waiting");
            finished.insert(0, 0);
            let recorded: Vec<_> = std::iter::from_fn(|| finished.next_in_order()).collect();
            assert_eq!(recorded, (0..=cap).collect::<Vec<_>>());
            assert!(finished.has_room() && finished.is_empty());
        }
    }
}
