//! The kube-rs controllers: one for GitTracks and one for ClusterGitTracks (each started only
//! when the instance's [`WatchScope`](arbor_policy::ownership::WatchScope) watches them, in the
//! namespace `--namespace` gives), and one per tracking kind for the finalizer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arbor_api::condition::reasons;
use arbor_api::keys::{ArborKeys, GITSYNC_FINALIZER, SourceRef};
use arbor_api::source::{
    GitSourceSpec, GitSourceStatus, NamespacedSecretRef, SecretRef, SourceError,
};
use arbor_api::{ClusterGitTrack, GitSource, GitTrack};
use arbor_policy::ownership::NamespaceScope;
use arbor_runtime::decode::{DecodeError, api_resource, decode_flattened, object_name};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::deletion;
use super::error::ControllerError;
use super::notice;
use super::registry::Records;
use super::round::{self, RoundResult};
use super::shard;
use super::source_handle::SourceHandle;
use super::status::{self, Outcome, RoundReport};
use super::tracking;
use super::tracking_record::{TrackingRecord, TrackingResource};

/// How soon a failed reconcile is retried.
const RETRY: Duration = Duration::from_secs(5);
/// Tracking objects finalized at once, per tracking kind.
const FINALIZER_CONCURRENCY: u16 = 16;
/// How soon a Terminating tracking object left to its source's deletion is looked at again.
const LEFT_TO_SOURCE: Duration = Duration::from_secs(30);
/// How often the cached tracking objects that are Terminating are reconciled again (see
/// [`reconcile_tracking`]).
const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// A source kind the controller reconciles.
pub trait SourceKind:
    GitSource
    + Resource<DynamicType = ()>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The source spec its `spec` flattens, to name the field that does not decode.
    type Spec: DeserializeOwned;

    fn decode(object: &DynamicObject) -> Result<Self, DecodeError> {
        decode_flattened::<Self, Self::Spec>(object)
    }

    /// The typed API of the source `handle` names.
    fn api(client: kube::Client, handle: &SourceHandle) -> Api<Self>;
}

impl SourceKind for GitTrack {
    type Spec = GitSourceSpec<SecretRef>;

    fn api(client: kube::Client, handle: &SourceHandle) -> Api<Self> {
        Api::namespaced(client, handle.namespace.as_deref().unwrap_or_default())
    }
}

impl SourceKind for ClusterGitTrack {
    type Spec = GitSourceSpec<NamespacedSecretRef>;

    fn api(client: kube::Client, _handle: &SourceHandle) -> Api<Self> {
        Api::all(client)
    }
}

/// The controllers this instance's scope asks for, as one piece of work that runs until
/// `token` is cancelled (the replica begins to stop) and each controller has finished what it
/// was doing: the component's work, which its shutdown waits for before the Leases are given
/// up (`arbor_runtime::Component::run_until_stopped`). Their caches are registered at once,
/// the controllers start when the work is first polled, each as a task of its own so that they
/// use every worker thread; one that panics is logged and the others go on.
///
/// Every kind is watched as dynamic objects and each object decoded when it is reconciled
/// ([`arbor_runtime::decode`]): a source or tracking object of the wrong shape is reported and
/// skipped, and the others of its kind are reconciled as usual.
pub fn controllers(
    ctx: Context,
    triggers: mpsc::UnboundedReceiver<SourceRef>,
    token: &CancellationToken,
) -> impl Future<Output = ()> + Send + 'static + use<> {
    let mut controllers: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = Vec::new();
    let ctx = Arc::new(ctx);
    let watches = ctx.settings.scope.watches().clone();
    let (gittrack_triggers, gittrack_requests) = mpsc::unbounded_channel();
    let (cluster_triggers, cluster_requests) = mpsc::unbounded_channel();
    controllers.push(Box::pin(route_triggers(
        triggers,
        gittrack_triggers,
        cluster_triggers,
        token.clone(),
    )));
    controllers.push(Box::pin(shard::forget_lost_shards(
        ctx.clone(),
        token.clone(),
    )));

    if let Some(api) = scoped_api::<GitTrack>(&ctx.client, &watches.gittracks) {
        controllers.push(Box::pin(run_sources::<GitTrack>(
            api,
            ctx.clone(),
            gittrack_requests,
            token.clone(),
        )));
    }
    if watches.cluster_gittracks {
        let api = scoped_api::<ClusterGitTrack>(&ctx.client, &NamespaceScope::AllNamespaces);
        if let Some(api) = api {
            controllers.push(Box::pin(run_sources::<ClusterGitTrack>(
                api,
                ctx.clone(),
                cluster_requests,
                token.clone(),
            )));
        }
    }
    let tracking_scope = watches.gittrack_objects();
    let mut tracking_watches = Vec::new();
    match &tracking_scope {
        NamespaceScope::Nowhere => {}
        NamespaceScope::AllNamespaces => {
            tracking_watches.push((TrackingResource::GitTrackObject, None));
        }
        NamespaceScope::Only(namespace) => {
            tracking_watches.push((TrackingResource::GitTrackObject, Some(namespace.clone())));
        }
    }
    if watches.cluster_gittrack_objects {
        tracking_watches.push((TrackingResource::ClusterGitTrackObject, None));
    }
    for (resource, namespace) in tracking_watches {
        let api = resource.api(ctx.client.clone(), namespace.as_deref());
        let writer = Writer::new(resource);
        ctx.tracking
            .watch(resource, writer.as_reader(), tracking_scope.clone());
        controllers.push(Box::pin(run_tracking(
            api,
            writer,
            resource,
            ctx.clone(),
            token.clone(),
        )));
    }
    async move {
        let mut running = tokio::task::JoinSet::new();
        for controller in controllers {
            running.spawn(controller);
        }
        while let Some(joined) = running.join_next().await {
            if let Err(error) = joined
                && error.is_panic()
            {
                tracing::error!(%error, "a gitsync controller panicked");
            }
        }
    }
}

/// The dynamic API of `K` in `scope` (any scope is all objects for cluster-scoped kinds).
pub(super) fn scoped_api<K>(
    client: &kube::Client,
    scope: &NamespaceScope,
) -> Option<Api<DynamicObject>>
where
    K: Resource<DynamicType = ()>,
{
    let resource = api_resource::<K>();
    match scope {
        NamespaceScope::Nowhere => None,
        NamespaceScope::AllNamespaces => Some(Api::all_with(client.clone(), &resource)),
        NamespaceScope::Only(namespace) => {
            Some(Api::namespaced_with(client.clone(), namespace, &resource))
        }
    }
}

/// Sends each round request to the controller of its kind.
async fn route_triggers(
    mut triggers: mpsc::UnboundedReceiver<SourceRef>,
    gittracks: mpsc::UnboundedSender<SourceRef>,
    cluster_gittracks: mpsc::UnboundedSender<SourceRef>,
    token: CancellationToken,
) {
    loop {
        let source = tokio::select! {
            source = triggers.recv() => source,
            () = token.cancelled() => None,
        };
        let Some(source) = source else { break };
        let sender = match &source {
            SourceRef::GitTrack { .. } => &gittracks,
            SourceRef::ClusterGitTrack { .. } => &cluster_gittracks,
        };
        // A closed channel means that kind is not watched here: nothing to trigger.
        let _ = sender.send(source);
    }
}

async fn run_sources<K: SourceKind>(
    api: Api<DynamicObject>,
    ctx: Arc<Context>,
    requests: mpsc::UnboundedReceiver<SourceRef>,
    token: CancellationToken,
) {
    let resource = api_resource::<K>();
    // Requests (TriggerSync, ReportDrift, a tracking object deleted by hand) are reconciles of
    // the controller's cached object like any other: the controller never runs two of one
    // source at once, and a request that comes while one runs is run after it.
    let requested = UnboundedReceiverStream::new(requests)
        .take_until(token.clone().cancelled_owned())
        .map(move |request| match request {
            SourceRef::GitTrack { namespace, name } => {
                ObjectRef::new_with(&name, resource.clone()).within(&namespace)
            }
            SourceRef::ClusterGitTrack { name } => ObjectRef::new_with(&name, resource.clone()),
        });
    // The controller's own reflector, so that the source cache knows when its first list has
    // arrived (an empty cache then means no source of the kind, not "not listed yet").
    let writer = reflector::store::Writer::new(api_resource::<K>());
    let reader = writer.as_reader();
    let listed = ctx.sources.set::<K>(reader.clone());
    let events = reflector(writer, watcher(api, watcher::Config::default()))
        .inspect_ok(move |event| {
            if matches!(event, watcher::Event::InitDone) {
                listed.store(true, Ordering::Release);
            }
        })
        .applied_objects();
    Controller::for_stream_with(events, reader, api_resource::<K>())
        .reconcile_on(requested)
        // A shard this replica gains brings its sources' rounds at once.
        .reconcile_all_on(ctx.shards.gains())
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile_source::<K>, retry_source::<K>, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// Admits the source when this replica holds its shard ([`shard`]), and reconciles it while
/// the shard stays held.
async fn reconcile_source<K: SourceKind>(
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ControllerError> {
    let Some(admitted) = shard::admit(&ctx, &object).await else {
        return Ok(Action::await_change());
    };
    admitted
        .while_held(reconcile_admitted::<K>(object, ctx.clone(), &admitted))
        .await
        .unwrap_or(Ok(Action::await_change()))
}

async fn reconcile_admitted<K: SourceKind>(
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
    admitted: &shard::Admitted,
) -> Result<Action, ControllerError> {
    let source = match K::decode(&object) {
        Ok(source) => source,
        Err(error) => {
            undecodable_source::<K>(&ctx, &object, &error).await?;
            return Ok(Action::await_change());
        }
    };
    let handle = SourceHandle::of(&source, &ctx.settings.keys);
    // A preview of the source (`arborctl diff`) and its round do not run at once.
    let lock = ctx.registry.round_lock(&handle.reference);
    let _round = lock.lock().await;
    // The cached object may be older than the last round's status write.
    let (api, _) = status::source_api(&ctx.client, &handle.reference);
    let current = match api.get_opt(&source.name_any()).await {
        Ok(Some(current)) => current,
        Ok(None) => {
            ctx.registry.remove(&handle.reference);
            return Ok(Action::await_change());
        }
        Err(error) => {
            return Err(ControllerError::kube(
                "read source",
                handle.reference.to_string(),
                error,
            ));
        }
    };
    let source = match K::decode(&current) {
        Ok(source) => source,
        Err(error) => {
            if admitted.guard.still_held() {
                undecodable_source::<K>(&ctx, &current, &error).await?;
            }
            return Ok(Action::await_change());
        }
    };
    let mut handle = SourceHandle::of(&source, &ctx.settings.keys);
    // The status on the cluster is the truth the gRPC view starts from (after a restart, before
    // the first round finishes, and when a round changes nothing).
    ctx.registry.update(&handle.reference, |record| {
        record.status = handle.status.clone();
    });
    // A reconcile that waited for the source's round lock may get it after stopping began.
    if !shard::works_on(&ctx, &handle) {
        return Ok(Action::await_change());
    }
    if source.meta().deletion_timestamp.is_some() {
        return deletion::run(&ctx, &source, &handle).await;
    }
    deletion::ensure_finalizer(&ctx, &source, &handle).await?;
    admitted.stamp(&ctx, &mut handle).await?;
    let result = catch_round(&handle.reference, round::run(&ctx, &handle)).await;
    if !admitted.guard.still_held() {
        return Ok(Action::await_change());
    }
    let written = report(&ctx, &handle, &result).await;
    ctx.registry.round_finished(&handle.reference);
    // Made whatever became of the report (a failed status write, stopping begun): a mass-prune
    // allowance the round used must not be left for a later round or the next holder to use
    // again (the write only removes an annotation).
    let unremoved = ctx.registry.update(&handle.reference, |record| {
        std::mem::take(&mut record.allowance_unremoved)
    });
    let consumed = if result.allowance_used || (unremoved && handle.allow_mass_prune) {
        let consumed = consume_allowance(&ctx, &source, &handle).await;
        if let Err(error) = &consumed {
            ctx.registry.update(&handle.reference, |record| {
                record.allowance_unremoved = true;
            });
            if written.is_err() {
                // Only the report's error is returned: this one is said here.
                tracing::warn!(source = %handle.reference, %error, "the mass-prune allowance a round used could not be removed; it is removed after the next round");
            }
        }
        consumed
    } else {
        Ok(())
    };
    written?;
    consumed?;
    Ok(Action::requeue(
        handle.poll_interval.min(ctx.settings.resync_period),
    ))
}

/// Runs one round, turning a panic into a failure of this source alone: the controller's
/// stream drives every source of the kind, so an unwinding round would stop them all.
async fn catch_round(
    source: &SourceRef,
    round: impl std::future::Future<Output = RoundResult>,
) -> RoundResult {
    // The round's shared state (registry, caches) is behind poison-tolerant locks and is
    // rebuilt by the next round, so observing it after an unwind is safe.
    match futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(round)).await {
        Ok(result) => result,
        Err(panic) => {
            let message = format!(
                "the round of {} stopped unexpectedly ({}); the other sources are unaffected and \
                 this one is retried",
                source,
                panic_message(panic.as_ref())
            );
            tracing::error!(%source, %message, "round panicked");
            round_failure(message)
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("panic")
}

fn round_failure(message: String) -> RoundResult {
    RoundResult {
        report: Some(status::RoundReport::stopped(
            Outcome::Failed {
                reason: arbor_api::condition::reasons::APPLY_FAILED,
                message: message.clone(),
            },
            vec![arbor_api::source::SourceError {
                code: super::error::ROUND_PANICKED.to_owned(),
                file: None,
                object: None,
                message,
            }],
        )),
        ..RoundResult::default()
    }
}

/// Removes the allow-mass-prune annotation after the round it let past the guard: it allows one
/// round, not every later one.
async fn consume_allowance<K: SourceKind>(
    ctx: &Context,
    source: &K,
    handle: &SourceHandle,
) -> Result<(), ControllerError> {
    let annotation = ctx.settings.keys.allow_mass_prune_annotation();
    let patch = json!({"metadata": {"annotations": {annotation.clone(): null}}});
    K::api(ctx.client.clone(), handle)
        .patch(
            &source.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|error| {
            ControllerError::kube(
                "remove the allow annotation from",
                handle.reference.to_string(),
                error,
            )
        })?;
    let note = format!(
        "{annotation} allowed one round past the mass-prune guard and was removed; the guard \
         applies again from what is left"
    );
    tracing::info!(source = %handle.reference, "{note}");
    let event = Event {
        type_: EventType::Normal,
        reason: "MassPruneAllowed".into(),
        note: Some(note),
        action: "Prune".into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &source.object_ref(&())).await {
        tracing::warn!(%error, source = %handle.reference, "cannot publish an event");
    }
    Ok(())
}

/// A source whose spec does not decode: reported (log line, Event, metric), and
/// `Ready=False`/`Stalled=True` with reason `InvalidSpec` and the field path, written once per
/// generation. Nothing of it is synced; what it applied before stays as it is.
async fn undecodable_source<K: SourceKind>(
    ctx: &Context,
    object: &DynamicObject,
    error: &DecodeError,
) -> Result<(), ControllerError> {
    let resource = api_resource::<K>();
    let reference = match object.metadata.namespace.clone() {
        Some(namespace) => SourceRef::GitTrack {
            namespace,
            name: object.name_any(),
        },
        None => SourceRef::ClusterGitTrack {
            name: object.name_any(),
        },
    };
    let generation = object.metadata.generation;
    let first_report = ctx.registry.update(&reference, |record| {
        let first = record.undecodable_generation != generation || generation.is_none();
        record.undecodable_generation = generation;
        record.good = None;
        record.objects = Records::default();
        first
    });
    if first_report {
        ctx.metrics
            .undecodable
            .report(&ctx.recorder, &resource, object, error)
            .await;
    }
    // The status may still read: keep what it says beyond the conditions.
    let previous: GitSourceStatus = object
        .data
        .get("status")
        .and_then(|status| serde_json::from_value(status.clone()).ok())
        .unwrap_or_default();
    let message = format!("{}: {}", error.path, error.message);
    let report = RoundReport::stopped(
        Outcome::Stalled {
            reason: reasons::INVALID_SPEC,
            message: message.clone(),
        },
        vec![SourceError {
            code: super::error::INVALID_SPEC.to_owned(),
            file: None,
            object: Some(reference.to_string()),
            message,
        }],
    );
    let now = Time(Timestamp::now());
    if let Some(next) = status::next_status(&previous, &report, generation, now) {
        let (api, resource) = status::source_api(&ctx.client, &reference);
        status::write(&api, &resource, &object.name_any(), &next).await?;
        ctx.registry
            .update(&reference, |record| record.status = next.clone());
    }
    Ok(())
}

/// Writes the status, announces what changed (log line and Event) and records the latency of a
/// new commit.
async fn report(
    ctx: &Context,
    handle: &SourceHandle,
    result: &RoundResult,
) -> Result<(), ControllerError> {
    let Some(report) = &result.report else {
        return Ok(());
    };
    for error in &report.errors {
        if report.counters.is_none() {
            ctx.metrics.count_error(&error.code);
        }
    }
    if let Some((_, commit_time)) = &result.new_commit
        && let Ok(latency) = commit_time.elapsed()
    {
        ctx.metrics.commit_to_applied.observe(latency.as_secs_f64());
    }
    let now = Time(Timestamp::now());
    // What the cluster holds now: the progress the round wrote, or the status it started from.
    let previous = result.in_flight.as_ref().unwrap_or(&handle.status);
    let Some(next) = status::next_status(previous, report, handle.generation, now) else {
        return Ok(());
    };
    let name = handle.owner_reference.name.clone();
    let (api, resource) = status::source_api(&ctx.client, &handle.reference);
    status::write(&api, &resource, &name, &next).await?;
    ctx.registry
        .update(&handle.reference, |record| record.status = next.clone());
    let subject = handle.reference.to_string();
    for notice in status::notices(previous, &next, report, result.changes()) {
        notice::publish(ctx, &handle.object_ref(), &subject, &notice).await;
    }
    let conflicts = report
        .errors
        .iter()
        .filter(|error| error.code == super::error::MANAGEMENT_CONFLICT);
    for error in conflicts {
        let event = Event {
            type_: EventType::Warning,
            reason: reasons::MANAGEMENT_CONFLICT.into(),
            note: Some(
                format!(
                    "{}: {}",
                    error.object.as_deref().unwrap_or_default(),
                    error.message
                )
                .chars()
                .take(1000)
                .collect(),
            ),
            action: "Sync".into(),
            secondary: None,
        };
        if let Err(error) = ctx.recorder.publish(&event, &handle.object_ref()).await {
            tracing::warn!(%error, source = %handle.reference, "cannot publish an event");
        }
    }
    Ok(())
}

fn retry_source<K: SourceKind>(
    source: Arc<DynamicObject>,
    error: &ControllerError,
    ctx: Arc<Context>,
) -> Action {
    if ended_by_stop(error) {
        tracing::info!(kind = %K::kind(&()), source = %object_name(&*source), %error, "reconcile ended early: this replica stops or gave the source's shard up; its next holder reconciles it");
        return Action::await_change();
    }
    tracing::warn!(kind = %K::kind(&()), source = %object_name(&*source), %error, "reconcile failed");
    ctx.metrics.count_error(error.code());
    Action::requeue(RETRY)
}

/// Whether `error` ended a reconcile because this replica stops or gave the shard up (a graceful
/// stop, a hand-over: every write path answers `ShardLeft` then), a normal outcome: neither
/// logged as a failure nor counted as an error, nor retried here; the shard's next holder
/// reconciles the object. Any other error, even one seen while stopping, is a failure.
fn ended_by_stop(error: &ControllerError) -> bool {
    matches!(error, ControllerError::ShardLeft)
}

async fn run_tracking(
    api: Api<TrackingRecord>,
    writer: Writer<TrackingRecord>,
    resource: TrackingResource,
    ctx: Arc<Context>,
    token: CancellationToken,
) {
    // The watch's store is also the rounds' inventory ([`tracking_store`]): each copy is a
    // compact record of what the finalizer and the rounds read.
    let reader = writer.as_reader();
    // Only a Terminating tracking object holding gitsync's finalizer has work here, so only
    // those are scheduled, by the watch and by the sweep. Scheduling every one (a reconcile that
    // returns at once) held a queued reference per tracking object, with its kind's names, for
    // each event and every sweep: about 10 MB at 10,000 objects, and their tasks besides.
    let sweep_store = reader.clone();
    let sweeps = futures::stream::unfold((), |()| async {
        tokio::time::sleep(SWEEP_EVERY).await;
        Some(((), ()))
    })
    .flat_map(move |()| {
        futures::stream::iter(
            sweep_store
                .state()
                .into_iter()
                .filter(|record| needs_finalizing(record))
                .map(move |record| ObjectRef::from_obj_with(&*record, resource)),
        )
    });
    let namespaced = resource == TrackingResource::GitTrackObject;
    let stores = ctx.tracking.clone();
    let mut relisted = None;
    let watched = watcher(api, watcher::Config::default())
        .reflect(writer)
        // Told only once the store holds the event (see `tracking_store`): a relist's objects
        // replace the store together at its end.
        .inspect_ok(move |event| match event {
            watcher::Event::Apply(record) | watcher::Event::Delete(record) => {
                stores.saw(namespaced, record.version());
            }
            watcher::Event::Init => relisted = None,
            watcher::Event::InitApply(record) => relisted = relisted.max(record.version()),
            watcher::Event::InitDone => stores.saw(namespaced, relisted.take()),
        })
        .applied_objects()
        .try_filter(|record| futures::future::ready(needs_finalizing(record)));
    // Bounded: a prune or a garbage-collected source turns thousands of tracking objects
    // Terminating at once, and unbounded, each would open its own requests to the API server
    // together (sockets, and the server's patience, run out before any finishes). A bounded
    // pool works through them steadily.
    Controller::for_stream_with(watched, reader, resource)
        .with_config(controller::Config::default().concurrency(FINALIZER_CONCURRENCY))
        .reconcile_on(sweeps)
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile_tracking, retry_tracking, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// Whether a tracking object has work for gitsync's finalizer: it is Terminating and still
/// holds the finalizer.
fn needs_finalizing(record: &TrackingRecord) -> bool {
    record.meta().deletion_timestamp.is_some()
        && record.finalizers().iter().any(|f| f == GITSYNC_FINALIZER)
}

/// Decides on the watch's copy of a tracking object, without a request: only a Terminating one
/// holding gitsync's finalizer needs work ([`needs_finalizing`]), and only such objects are
/// scheduled here; every tracking object is created, applied and given a condition by the
/// rounds.
///
/// The copy can be older than the cluster in one case: after a watch expires (410) the
/// controller relists and reconciles every object as the list arrives, against the cache of
/// before the relist until the list is complete, so a tracking object whose turn to
/// Terminating fell into that gap looks alive here (the stall of a large source deleted at
/// once, when this was answered `await_change` and never looked at again). The sweep every
/// [`SWEEP_EVERY`] reconciles every cached object that is Terminating again, against the cache
/// as relisted.
async fn reconcile_tracking(
    record: Arc<TrackingRecord>,
    ctx: Arc<Context>,
) -> Result<Action, ControllerError> {
    if !needs_finalizing(&record) {
        return Ok(Action::await_change());
    }
    // A tracking object that does not decode cannot say what it tracks: its finalizer stays
    // (nothing is deleted on a guess) and it is reported until someone repairs or removes it.
    if let Some(error) = record.unreadable() {
        tracking::report_unreadable(&ctx, &record, &error).await;
        return Ok(Action::await_change());
    }
    if !tracking::watched_owner(&ctx, &record) {
        return Ok(Action::await_change());
    }
    let Some(admitted) = shard::admit_owner(&ctx, &record).await else {
        return Ok(Action::await_change());
    };
    // A shard lost meanwhile stops the finalizer before its next write; the new holder's sweep
    // takes the tracking object up.
    admitted
        .while_held(finalize_tracking(record, ctx.clone(), &admitted))
        .await
        .unwrap_or(Ok(Action::await_change()))
}

/// Decides for a Terminating tracking object of an admitted source and carries it out.
async fn finalize_tracking(
    record: Arc<TrackingRecord>,
    ctx: Arc<Context>,
    admitted: &shard::Admitted,
) -> Result<Action, ControllerError> {
    // Finalizing writes (the object, the finalizer): it shares the instance's write permits.
    let _permit = ctx.writes.acquire().await.ok();
    let finalizing = tracking::Finalizing::decide(&ctx, &record).await?;
    if finalizing.waits(&ctx) {
        // Look again in case that round never comes.
        return Ok(Action::requeue(LEFT_TO_SOURCE));
    }
    if !admitted.guard.still_held() {
        return Ok(Action::await_change());
    }
    // The cleanup first, then gitsync's finalizer goes, by a JSON patch that tests the entry
    // first (no resourceVersion needed, and a finalizer someone else added is never dropped).
    let rounds = finalizing.carry_out(&ctx).await?;
    // The clean-up took a read and a write: stopping may have begun meanwhile. The finalizer
    // then stays for the shard's next holder, whose decision finds the clean-up done.
    if !admitted.guard.still_held() {
        return Ok(Action::await_change());
    }
    tracking::remove_finalizer(&ctx, &record.name_any(), record.meta()).await?;
    // Rounds are asked for once the tracking object is let go, so that they make a new one.
    for source in &rounds {
        ctx.registry.request_round(source);
    }
    Ok(Action::await_change())
}

fn retry_tracking(
    record: Arc<TrackingRecord>,
    error: &ControllerError,
    ctx: Arc<Context>,
) -> Action {
    if ended_by_stop(error) {
        tracing::info!(kind = %record.resource().kind(), object = %object_name(&record.as_dynamic()), %error, "finalizer ended early: this replica stops or gave the shard up; its next holder finalizes the object");
        return Action::await_change();
    }
    tracing::warn!(kind = %record.resource().kind(), object = %object_name(&record.as_dynamic()), %error, "finalizer failed");
    ctx.metrics.count_error(error.code());
    Action::requeue(RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracking_object(terminating: bool, finalizers: &[&str]) -> TrackingRecord {
        serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrackObject",
            "metadata": {
                "name": "configmap-cm-1", "namespace": "shop",
                "finalizers": finalizers,
                "deletionTimestamp": terminating.then_some("2026-01-01T00:00:00Z"),
            },
        }))
        .expect("a tracking object")
    }

    #[test]
    fn only_a_terminating_tracking_object_holding_the_finalizer_is_scheduled() {
        assert!(needs_finalizing(&tracking_object(
            true,
            &[GITSYNC_FINALIZER]
        )));
        assert!(needs_finalizing(&tracking_object(
            true,
            &["example.com/other", GITSYNC_FINALIZER]
        )));
        // Live, or Terminating with gitsync's finalizer already removed: nothing to do.
        assert!(!needs_finalizing(&tracking_object(
            false,
            &[GITSYNC_FINALIZER]
        )));
        assert!(!needs_finalizing(&tracking_object(
            true,
            &["example.com/other"]
        )));
        assert!(!needs_finalizing(&tracking_object(true, &[])));
    }

    #[tokio::test]
    async fn a_panicking_round_fails_its_source_alone() {
        let source = SourceRef::GitTrack {
            namespace: "shop".into(),
            name: "app".into(),
        };
        let result = catch_round(&source, async { panic!("deliberate") }).await;
        let report = result.report.expect("a panicked round is reported");
        let Outcome::Failed { message, .. } = &report.outcome else {
            panic!("expected a failure, got {:?}", report.outcome);
        };
        assert!(message.contains("GitTrack/shop/app"), "{message}");
        assert!(message.contains("deliberate"), "{message}");
        assert_eq!(report.errors[0].code, super::super::error::ROUND_PANICKED);

        let fine = catch_round(&source, async { RoundResult::default() }).await;
        assert!(fine.report.is_none());
    }
}
