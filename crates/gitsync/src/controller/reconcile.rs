//! The kube-rs controllers: one for GitTracks and one for ClusterGitTracks (each started only
//! when the instance's [`WatchScope`](arbor_policy::ownership::WatchScope) watches them, in the
//! namespace `--namespace` gives), and one per tracking kind for the finalizer.

use std::sync::Arc;
use std::time::Duration;

use arbor_api::condition::reasons;
use arbor_api::keys::{GITSYNC_FINALIZER, SourceRef};
use arbor_api::source::{
    GitSourceSpec, GitSourceStatus, NamespacedSecretRef, SecretRef, SourceError,
};
use arbor_api::{ClusterGitTrack, ClusterGitTrackObject, GitSource, GitTrack, GitTrackObject};
use arbor_policy::ownership::NamespaceScope;
use arbor_runtime::decode::{DecodeError, api_resource, decode_flattened, object_name};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::error::ControllerError;
use super::handle::SourceHandle;
use super::notice;
use super::round::{self, RoundResult};
use super::status::{self, Outcome, RoundReport};
use super::tracking::{self, TrackingKind};

/// How soon a failed reconcile is retried.
const RETRY: Duration = Duration::from_secs(5);

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
}

impl SourceKind for GitTrack {
    type Spec = GitSourceSpec<SecretRef>;
}

impl SourceKind for ClusterGitTrack {
    type Spec = GitSourceSpec<NamespacedSecretRef>;
}

/// Starts the controllers this instance's scope asks for; they stop when `token` is cancelled.
///
/// Every kind is watched as dynamic objects and each object decoded when it is reconciled
/// ([`arbor_runtime::decode`]): a source or tracking object of the wrong shape is reported and
/// skipped, and the others of its kind are reconciled as usual.
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
        tasks.push(tokio::spawn(run_sources::<GitTrack>(
            api,
            ctx.clone(),
            gittrack_requests,
            token.clone(),
        )));
    }
    if watches.cluster_gittracks {
        let api = scoped_api::<ClusterGitTrack>(&ctx.client, &NamespaceScope::AllNamespaces);
        tasks.extend(api.map(|api| {
            tokio::spawn(run_sources::<ClusterGitTrack>(
                api,
                ctx.clone(),
                cluster_requests,
                token.clone(),
            ))
        }));
    }
    if let Some(api) = scoped_api::<GitTrackObject>(&ctx.client, &watches.gittrack_objects()) {
        tasks.push(tokio::spawn(run_tracking::<GitTrackObject>(
            api,
            ctx.clone(),
            token.clone(),
        )));
    }
    if watches.cluster_gittrack_objects {
        let api = scoped_api::<ClusterGitTrackObject>(&ctx.client, &NamespaceScope::AllNamespaces);
        tasks.extend(api.map(|api| {
            tokio::spawn(run_tracking::<ClusterGitTrackObject>(
                api,
                ctx.clone(),
                token.clone(),
            ))
        }));
    }
    tasks
}

/// The dynamic API of `K` in `scope` (any scope is all objects for cluster-scoped kinds).
fn scoped_api<K>(client: &kube::Client, scope: &NamespaceScope) -> Option<Api<DynamicObject>>
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
    let controller = Controller::new_with(api, watcher::Config::default(), resource.clone());
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
                let key = match &request {
                    SourceRef::GitTrack { namespace, name } => {
                        ObjectRef::new_with(name, resource.clone()).within(namespace)
                    }
                    SourceRef::ClusterGitTrack { name } => {
                        ObjectRef::new_with(name, resource.clone())
                    }
                };
                if let Some(source) = store.get(&key)
                    && let Err(error) = reconcile_source::<K>(source, ctx.clone()).await
                {
                    tracing::warn!(source = %request, %error, "requested round failed");
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
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ControllerError> {
    let source = match K::decode(&object) {
        Ok(source) => source,
        Err(error) => {
            undecodable_source::<K>(&ctx, &object, &error).await?;
            return Ok(Action::await_change());
        }
    };
    let handle = SourceHandle::of(&source, &ctx.settings.keys);
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
            undecodable_source::<K>(&ctx, &current, &error).await?;
            return Ok(Action::await_change());
        }
    };
    let handle = SourceHandle::of(&source, &ctx.settings.keys);
    // The status on the cluster is the truth the gRPC view starts from (after a restart, before
    // the first round finishes, and when a round changes nothing).
    ctx.registry.update(&handle.reference, |record| {
        record.status = handle.status.clone();
    });
    if source.meta().deletion_timestamp.is_some() {
        ctx.registry.remove(&handle.reference);
        return Ok(Action::await_change());
    }
    let result = round::run(&ctx, &handle).await;
    let written = report(&ctx, &handle, &result).await;
    ctx.registry.round_finished(&handle.reference);
    written?;
    Ok(Action::requeue(
        handle.poll_interval.min(ctx.settings.resync_period),
    ))
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
        record.objects.clear();
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
    Ok(())
}

fn retry_source<K: SourceKind>(
    source: Arc<DynamicObject>,
    error: &ControllerError,
    ctx: Arc<Context>,
) -> Action {
    tracing::warn!(kind = %K::kind(&()), source = %object_name(&source), %error, "reconcile failed");
    ctx.metrics.count_error(error.code());
    Action::requeue(RETRY)
}

async fn run_tracking<K>(api: Api<DynamicObject>, ctx: Arc<Context>, token: CancellationToken)
where
    K: TrackingKind + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    Controller::new_with(api, watcher::Config::default(), api_resource::<K>())
        .graceful_shutdown_on(token.cancelled_owned())
        .run(reconcile_tracking::<K>, retry_tracking::<K>, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

async fn reconcile_tracking<K>(
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ControllerError>
where
    K: TrackingKind + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let finalizing = object.meta().deletion_timestamp.is_some()
        && object.finalizers().iter().any(|f| f == GITSYNC_FINALIZER);
    if !finalizing {
        return Ok(Action::await_change());
    }
    // A tracking object that does not decode cannot say what it tracks: its finalizer stays
    // (nothing is deleted on a guess) and it is reported until someone repairs or removes it.
    let tracking = match tracking::decode_tracking::<K>(&object) {
        Ok(tracking) => tracking,
        Err(error) => {
            ctx.metrics
                .undecodable
                .report(&ctx.recorder, &api_resource::<K>(), &object, &error)
                .await;
            return Ok(Action::await_change());
        }
    };
    if tracking::watched_owner(&ctx, &tracking) {
        tracking::finalize(&ctx, &tracking).await?;
    }
    Ok(Action::await_change())
}

fn retry_tracking<K: TrackingKind>(
    object: Arc<DynamicObject>,
    error: &ControllerError,
    ctx: Arc<Context>,
) -> Action {
    tracing::warn!(kind = %K::kind(&()), object = %object_name(&object), %error, "finalizer failed");
    ctx.metrics.count_error(error.code());
    Action::requeue(RETRY)
}
