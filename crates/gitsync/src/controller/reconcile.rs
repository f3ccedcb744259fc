//! The kube-rs controllers: one for GitTracks and one for ClusterGitTracks (each started only
//! when the instance's [`WatchScope`](arbor_policy::ownership::WatchScope) watches them, in the
//! namespace `--namespace` gives), and one per tracking kind for the finalizer.

use std::sync::Arc;
use std::time::Duration;

use arbor_api::condition::reasons;
use arbor_api::keys::{ArborKeys, GITSYNC_FINALIZER, SourceRef};
use arbor_api::{ClusterGitTrack, ClusterGitTrackObject, GitSource, GitTrack, GitTrackObject};
use arbor_policy::ownership::NamespaceScope;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::deletion;
use super::error::ControllerError;
use super::handle::SourceHandle;
use super::round::{self, RoundResult};
use super::status::{self, Outcome};
use super::tracking::{self, TrackingKind};

/// How soon a failed reconcile is retried.
const RETRY: Duration = Duration::from_secs(5);
/// Tracking objects finalized at once, per tracking kind.
const FINALIZER_CONCURRENCY: u16 = 16;
/// How soon a Terminating tracking object left to its source's deletion is looked at again.
const LEFT_TO_SOURCE: Duration = Duration::from_secs(30);

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
    /// The API to write the status of `handle` through.
    fn api(client: kube::Client, handle: &SourceHandle) -> Api<Self>;
}

impl SourceKind for GitTrack {
    fn api(client: kube::Client, handle: &SourceHandle) -> Api<Self> {
        Api::namespaced(client, handle.namespace.as_deref().unwrap_or_default())
    }
}

impl SourceKind for ClusterGitTrack {
    fn api(client: kube::Client, _handle: &SourceHandle) -> Api<Self> {
        Api::all(client)
    }
}

/// Starts the controllers this instance's scope asks for; they stop when `token` is cancelled.
pub fn spawn(
    ctx: Context,
    triggers: mpsc::UnboundedReceiver<SourceRef>,
    token: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let ctx = Arc::new(ctx);
    let watches = ctx.settings.scope.watches().clone();
    let (gittrack_triggers, gittrack_requests) = mpsc::unbounded_channel();
    let (cluster_triggers, cluster_requests) = mpsc::unbounded_channel();
    let mut tasks = vec![tokio::spawn(route_triggers(
        triggers,
        gittrack_triggers,
        cluster_triggers,
        token.clone(),
    ))];

    if let Some(api) = scoped_api::<GitTrack>(&ctx.client, &watches.gittracks) {
        tasks.push(tokio::spawn(run_sources(
            api,
            ctx.clone(),
            gittrack_requests,
            token.clone(),
        )));
    }
    if watches.cluster_gittracks {
        let api = Api::<ClusterGitTrack>::all(ctx.client.clone());
        tasks.push(tokio::spawn(run_sources(
            api,
            ctx.clone(),
            cluster_requests,
            token.clone(),
        )));
    }
    if let Some(api) = scoped_api::<GitTrackObject>(&ctx.client, &watches.gittrack_objects()) {
        tasks.push(tokio::spawn(run_tracking(api, ctx.clone(), token.clone())));
    }
    if watches.cluster_gittrack_objects {
        let api = Api::<ClusterGitTrackObject>::all(ctx.client.clone());
        tasks.push(tokio::spawn(run_tracking(api, ctx.clone(), token.clone())));
    }
    tasks
}

fn scoped_api<K>(client: &kube::Client, scope: &NamespaceScope) -> Option<Api<K>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match scope {
        NamespaceScope::Nowhere => None,
        NamespaceScope::AllNamespaces => Some(Api::all(client.clone())),
        NamespaceScope::Only(namespace) => Some(Api::namespaced(client.clone(), namespace)),
    }
}

/// Sends each round request to the controller of its kind.
async fn route_triggers(
    mut triggers: mpsc::UnboundedReceiver<SourceRef>,
    gittracks: mpsc::UnboundedSender<ObjectRef<GitTrack>>,
    cluster_gittracks: mpsc::UnboundedSender<ObjectRef<ClusterGitTrack>>,
    token: CancellationToken,
) {
    loop {
        let source = tokio::select! {
            source = triggers.recv() => source,
            () = token.cancelled() => None,
        };
        let Some(source) = source else { break };
        // A closed channel means that kind is not watched here: nothing to trigger.
        let _ = match source {
            SourceRef::GitTrack { namespace, name } => gittracks
                .send(ObjectRef::new(&name).within(&namespace))
                .map_err(drop),
            SourceRef::ClusterGitTrack { name } => cluster_triggers_send(&cluster_gittracks, &name),
        };
    }
}

fn cluster_triggers_send(
    sender: &mpsc::UnboundedSender<ObjectRef<ClusterGitTrack>>,
    name: &str,
) -> Result<(), ()> {
    sender.send(ObjectRef::new(name)).map_err(drop)
}

async fn run_sources<K: SourceKind>(
    api: Api<K>,
    ctx: Arc<Context>,
    requests: mpsc::UnboundedReceiver<ObjectRef<K>>,
    token: CancellationToken,
) {
    let controller = Controller::new(api, watcher::Config::default());
    // Requests (TriggerSync, ReportDrift, a tracking object deleted by hand) run the same
    // reconcile on the controller's cached object; the per-source round lock keeps them from
    // overlapping with the controller's own rounds.
    let store = controller.store();
    let requested = {
        let ctx = ctx.clone();
        let mut requests = UnboundedReceiverStream::new(requests);
        let token = token.clone();
        tokio::spawn(async move {
            loop {
                let request = tokio::select! {
                    request = requests.next() => request,
                    () = token.cancelled() => None,
                };
                let Some(request) = request else { break };
                if let Some(source) = store.get(&request)
                    && let Err(error) = reconcile_source(source, ctx.clone()).await
                {
                    tracing::warn!(%error, "requested round failed");
                }
            }
        })
    };
    controller
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile_source::<K>, retry_source::<K>, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
    requested.abort();
}

async fn reconcile_source<K: SourceKind>(
    source: Arc<K>,
    ctx: Arc<Context>,
) -> Result<Action, ControllerError> {
    let handle = SourceHandle::of(source.as_ref(), &ctx.settings.keys);
    let lock = ctx.registry.round_lock(&handle.reference);
    let _round = lock.lock().await;
    // The cached object may be older than the last round's status write.
    let (current, handle) = match K::api(ctx.client.clone(), &handle)
        .get_opt(&source.name_any())
        .await
    {
        Ok(Some(current)) => {
            let handle = SourceHandle::of(&current, &ctx.settings.keys);
            (current, handle)
        }
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
    if current.meta().deletion_timestamp.is_some() {
        return deletion::run(&ctx, &current, &handle).await;
    }
    deletion::ensure_finalizer(&ctx, &current, &handle).await?;
    let result = round::run(&ctx, &handle).await;
    let written = report(&ctx, source.as_ref(), &handle, &result).await;
    ctx.registry.round_finished(&handle.reference);
    written?;
    if result.allowance_used {
        consume_allowance(&ctx, &current, &handle).await?;
    }
    Ok(Action::requeue(
        handle.poll_interval.min(ctx.settings.resync_period),
    ))
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

/// Writes the status, publishes Events and records the latency of a new commit.
async fn report<K: SourceKind>(
    ctx: &Context,
    source: &K,
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
    let Some(next) = status::next_status(&handle.status, report, handle.generation, now) else {
        return Ok(());
    };
    status::write(
        &K::api(ctx.client.clone(), handle),
        &source.name_any(),
        &next,
    )
    .await?;
    ctx.registry
        .update(&handle.reference, |record| record.status = next.clone());
    let event = match &report.outcome {
        Outcome::Synced if result.created + result.updated + result.deleted > 0 => Some(Event {
            type_: EventType::Normal,
            reason: "Synced".into(),
            note: Some(format!(
                "commit {}: {} created, {} updated, {} pruned",
                report.commit.as_deref().unwrap_or(""),
                result.created,
                result.updated,
                result.deleted
            )),
            action: "Sync".into(),
            secondary: None,
        }),
        Outcome::Synced | Outcome::Suspended => None,
        Outcome::Stalled { reason, message } | Outcome::Failed { reason, message } => Some(Event {
            type_: EventType::Warning,
            reason: (*reason).to_owned(),
            note: Some(message.chars().take(1000).collect()),
            action: "Sync".into(),
            secondary: None,
        }),
    };
    let conflicts = report
        .errors
        .iter()
        .filter(|error| error.code == super::error::MANAGEMENT_CONFLICT)
        .map(|error| Event {
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
        });
    for event in event.into_iter().chain(conflicts) {
        if let Err(error) = ctx.recorder.publish(&event, &source.object_ref(&())).await {
            tracing::warn!(%error, source = %handle.reference, "cannot publish an event");
        }
    }
    Ok(())
}

fn retry_source<K: SourceKind>(
    source: Arc<K>,
    error: &ControllerError,
    ctx: Arc<Context>,
) -> Action {
    tracing::warn!(source = %source.name_any(), %error, "reconcile failed");
    ctx.metrics.count_error(error.code());
    Action::requeue(RETRY)
}

async fn run_tracking<K>(api: Api<K>, ctx: Arc<Context>, token: CancellationToken)
where
    K: TrackingKind + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    // Bounded: a prune or a garbage-collected source turns thousands of tracking objects
    // Terminating at once, and unbounded, each would open its own requests to the API server
    // together (sockets, and the server's patience, run out before any finishes). A bounded
    // pool works through them steadily.
    Controller::new(api, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(FINALIZER_CONCURRENCY))
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile_tracking::<K>, retry_tracking::<K>, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

async fn reconcile_tracking<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, ControllerError>
where
    K: TrackingKind + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    // The cached copy can be older than the cluster: after a watch expires (410) the
    // controller relists and reconciles every object at once, against the cache of before
    // the relist until the list is complete. A tracking object whose turn to Terminating fell
    // into that gap looked alive, was answered `await_change`, and was never looked at again
    // (the stall of a large source deleted at once). The decision is therefore made on the
    // object as the API server has it now.
    let name = object.name_any();
    let current = K::api(ctx.client.clone(), object.meta().namespace.as_deref())
        .get_opt(&name)
        .await
        .map_err(|error| ControllerError::kube("read tracking object", name, error))?;
    let Some(object) = current else {
        return Ok(Action::await_change());
    };
    let finalizing = object.meta().deletion_timestamp.is_some()
        && object.finalizers().iter().any(|f| f == GITSYNC_FINALIZER);
    if finalizing
        && tracking::watched_owner(&ctx, &object)
        && !tracking::finalize(&ctx, &object).await?
    {
        // Left to its source's deletion; look again in case that never comes.
        return Ok(Action::requeue(LEFT_TO_SOURCE));
    }
    Ok(Action::await_change())
}

fn retry_tracking<K: TrackingKind>(
    object: Arc<K>,
    error: &ControllerError,
    ctx: Arc<Context>,
) -> Action {
    tracing::warn!(object = %object.name_any(), %error, "finalizer failed");
    ctx.metrics.count_error(error.code());
    Action::requeue(RETRY)
}
