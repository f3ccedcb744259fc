//! `SyncService` (proto/arbor/v1/sync.proto): what gitsync knows, for arborctl, the webhook and
//! the observer.
//!
//! | method | behaviour |
//! |---|---|
//! | GetStatus | the stored status of one source or of every source gitsync reconciles |
//! | ListManaged | every declared object with its state (in sync, unmanaged, ignored, failed, …), filtered by source, namespace, kind and state |
//! | Explain | the declarations of an object and the row of seeds/000's table that applies to it now: the inputs (columns), the action, the rule (`seeds/000 row N`) and the reason with the row's id |
//! | TriggerSync | a full round of the source now; with `wait`, answers after it finished (at most two minutes) |
//! | ReportDrift | re-applies each reported object at once through the table (an unlabelled object is still left alone), under its source's shard and round lock, as the source declares it after any round in progress; when a round holds the source longer than 2 s, or the re-apply cannot be made (a failed write, no client for the source's user), it asks for a full round of the source, which re-applies the object after the round in progress; objects no source declares come back as `unknown`, and one whose record lacks its declaration is logged, not counted as accepted, and left to a full round asked for; a re-apply that panics is left to a full round asked for, the rest of the batch still corrected; a report that stopping (here, or at a replica it was passed to) left partly undone answers `Unavailable`, for the reporter to send it again |
//! | GetDeclared | the object as gitsync applies it (a Secret without `data` and `stringData`), with its source, file, commit and compare fields, for the webhook's drift prevention |
//! | Preview | what a round would do with a revision or sent files ([`crate::controller::preview`]): each object's change, seeds/000 row and the fields an update changes (a Secret's by path only), and the guards that would stop it; writes nothing |
//!
//! Everything is read from the controllers' [`Registry`](crate::controller::Registry) except
//! the live objects Explain and ReportDrift need, which are read from the API server.
//!
//! ## With `--shards`
//!
//! A replica's registry holds the sources of its shards only, so whichever replica the Service
//! picks passes on what it cannot answer ([`PeerReplicas`]): TriggerSync goes to the holder of
//! the source's shard; GetStatus and ListManaged gather every live replica's answer;
//! GetDeclared, Explain and ReportDrift ask the others about objects no source declares here.
//! A replica that should answer and does not makes the request fail (`Unavailable` naming it)
//! rather than answer from part of the sources; so does a shard whose holder has not finished a
//! round of each of its sources since it took the shard ([`shard::answered_shards`]), and every
//! answer names the shards it covers ([`ANSWERED_SHARDS`]). A replica answers only from the
//! records of the shards it answers for ([`shard::answers_for_source`]): while it stops, until
//! its shard Leases are given up (the server closes after that), and never after. A stopping
//! replica starts no work for a request (TriggerSync, ReportDrift): those answer `Unavailable`,
//! to be retried at another replica. So does a drift report that stopping caught midway, here
//! or at the replica it was passed to: its events are sent again (re-applying one already
//! corrected changes nothing), and the next holder of the shard corrects the rest at once
//! instead of leaving them to its periodic round. Where the holder cannot be reached (it did not
//! advertise an address), TriggerSync answers `FailedPrecondition` naming it (also in the
//! `arbor-shard-holder` metadata), or `Unavailable` while no replica holds the shard.
//!
//! ## A drift re-apply and the Leases
//!
//! A re-apply is work the replica's shutdown waits for before it gives up its Leases
//! ([`arbor_runtime::shutdown`]), so the next holder's first round never writes beside it.
//! Once stopping begins no re-apply starts, one waiting for its round lock or reading the
//! object sends no write (the report then answers `Unavailable`, see above), and one
//! whose write was sent is waited for at most [`CORRECTION_STOP_PATIENCE`]; after that it is
//! given up, logged and counted (`arbor_gitsync_drift_corrections_abandoned_total`), and since
//! the API server may still carry the write out, the Lease is left to expire rather than
//! released. Either way the report is answered before the server closes.
//!
//! Each event's re-apply runs in a task of its own: one that panics is answered as left to a
//! full round of its source (asked for at once; logged and counted,
//! `arbor_gitsync_drift_corrections_panicked_total`) and the rest of the batch is corrected.

use std::collections::BTreeSet;
use std::time::Duration;

use arbor_api::keys::SourceRef;
use arbor_policy::object::{GroupKind, GroupVersionKind, ObjectKey};
use arbor_policy::sync::{
    Action, CompareFields, DeclaredOnCluster, Difference, Moment, Row, Situation,
    UndeclaredOnCluster,
};
use arbor_proto::from_kube;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::sync_service_server::{SyncService, SyncServiceServer};
use arbor_proto::v1::{self as proto, ManagedState};
use arbor_runtime::Shutdown;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::apply::{ApplyError, Target};
use crate::controller::preview::{self, Change, PreviewError};
use crate::controller::registry::{ObjectRecord, ObjectState, SourceRecord};
use crate::controller::{Context, identity, shard};
use crate::peer_replicas::{
    ADMISSION_PATIENCE, ANSWERED_SHARDS, Coverage, PeerAnswer, PeerReplicas, QUESTION_PATIENCE,
    encode_shards,
};

/// How long `TriggerSync` with `wait` waits for the round.
const TRIGGER_PATIENCE: Duration = Duration::from_secs(120);
/// How long a drift report waits for rounds of its sources in progress: the observer's report
/// must not hang on a long round, and one passed on by another replica must be answered within
/// its `QUESTION_PATIENCE`. A round of the source after the one in progress corrects what is
/// left.
const DRIFT_ROUND_PATIENCE: Duration = Duration::from_secs(2);
/// How long a drift re-apply whose write was sent may take to be answered once the replica
/// begins to stop: one write (the client's own timeouts bound it too, but far later), well
/// within the shutdown grace period (20 s by default), so that stopping stays bounded.
pub const CORRECTION_STOP_PATIENCE: Duration = Duration::from_secs(10);
/// The gRPC metadata key naming the replica that holds a source's shard, when a request
/// reached another one.
pub const SHARD_HOLDER: &str = "arbor-shard-holder";

/// The service, over the controllers' shared context.
#[derive(Debug, Clone)]
pub struct SyncServiceImpl {
    ctx: Context,
    peers: PeerReplicas,
    /// The replica's shutdown: once it starts, no new work; a drift correction runs as work
    /// it waits for before the Leases are given up.
    shutdown: Shutdown,
}

impl SyncServiceImpl {
    pub fn new(ctx: Context, peers: PeerReplicas, shutdown: Shutdown) -> Self {
        Self {
            ctx,
            peers,
            shutdown,
        }
    }

    /// Refuses a request that would start work once this replica is stopping.
    fn refuse_while_stopping(&self) -> Result<(), Status> {
        if self.shutdown.is_shutting_down() {
            return Err(Status::unavailable(format!(
                "replica {} is stopping and starts no work; retry at another replica",
                self.ctx.shards.identity()
            )));
        }
        Ok(())
    }

    /// The declarations of `key` in the records of the sources this replica answers for.
    fn declarations(&self, key: &ObjectKey) -> Vec<(SourceRef, String, ObjectRecord)> {
        let mut declarations = self.ctx.registry.declarations(key);
        declarations.retain(|(source, _, _)| shard::answers_for_source(&self.ctx, source));
        declarations
    }

    /// The records of the sources this replica answers for.
    fn sources(&self) -> Vec<(SourceRef, SourceRecord)> {
        let mut sources = self.ctx.registry.sources();
        sources.retain(|(source, _)| shard::answers_for_source(&self.ctx, source));
        sources
    }

    /// Asks every other replica `message` through `call` and gathers their answers
    /// ([`PeerReplicas::gather`]: `expected` is the refusal that still counts as an answer),
    /// this replica answering for `answered_here`.
    async fn ask_others<T, R, F, Fut>(
        &self,
        message: &T,
        patience: Duration,
        call: F,
        expected: tonic::Code,
        answered_here: &BTreeSet<u32>,
    ) -> Result<Vec<R>, Status>
    where
        T: Clone,
        F: Fn(SyncServiceClient<Channel>, Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<Response<R>, Status>>,
    {
        let answers = self.peers.ask_all(message, patience, call).await;
        self.peers.gather(answers, expected, answered_here)
    }

    pub fn into_server(self) -> SyncServiceServer<Self> {
        SyncServiceServer::new(self)
    }

    /// The object `source` declares as `key`, as it applies it.
    fn desired_of(
        &self,
        source: &SourceRef,
        key: &ObjectKey,
        record: &ObjectRecord,
    ) -> Result<serde_json::Value, Status> {
        record
            .desired(&self.ctx.settings, source, key.namespace.as_deref())
            .ok_or_else(|| {
                Status::internal(format!(
                    "the declaration of {key} is missing from the state of {source}"
                ))
            })
    }

    /// Decides for `key` now: the declaration (if any), the live object, the table's row.
    async fn assess(
        &self,
        key: &ObjectKey,
        version: &str,
    ) -> Result<
        (
            Vec<(SourceRef, String, ObjectRecord)>,
            Situation,
            Row,
            GroupVersionKind,
        ),
        Status,
    > {
        let declarations = self.declarations(key);
        let declared = declarations
            .iter()
            .find(|(_, _, record)| record.state.may_manage());
        let mut gvk = match declared {
            Some((_, _, record)) if version.is_empty() => record.gvk.clone(),
            _ => GroupVersionKind {
                group: key.group_kind.group.clone(),
                version: version.into(),
                kind: key.group_kind.kind.clone(),
            },
        };
        if gvk.version.is_empty() {
            // Named by kind alone and declared nowhere: the object is whatever the API server
            // serves under that kind, at the version it recommends.
            gvk.version = self
                .ctx
                .applier
                .discovery()
                .recommended_version(&gvk.group, &gvk.kind)
                .await
                .map_err(|error| Status::unavailable(error.to_string()))?
                .ok_or_else(|| {
                    Status::not_found(format!(
                        "the API server serves no kind {}{}{}",
                        gvk.kind,
                        if gvk.group.is_empty() { "" } else { "." },
                        gvk.group
                    ))
                })?
                .into();
        }
        let compare = declared
            .and_then(|(_, _, record)| CompareFields::parse(&record.compare_fields).ok())
            .unwrap_or_default();
        let sync_declared = match declared {
            Some((source, _, _)) => self
                .ctx
                .registry
                .declares_kind(source, &key.group_kind)
                .unwrap_or(true),
            None => self.ctx.registry.any_declares_kind(&key.group_kind),
        };
        let desired = declared
            .map(|(source, _, record)| self.desired_of(source, key, record))
            .transpose()?;
        let target = Target {
            gvk: &gvk,
            namespace: key.namespace.as_deref(),
            name: &key.name,
            sync_declared,
            desired: desired.as_ref(),
            compare: &compare,
        };
        let live = match self.ctx.applier.live(&target).await {
            Ok(live) => live,
            Err(ApplyError::KindNotServed { .. }) => None,
            Err(error) => return Err(Status::unavailable(error.to_string())),
        };
        let (situation, decision) = self.ctx.applier.decide(&target, live.as_ref());
        Ok((declarations, situation, decision.row, gvk))
    }
}

/// What became of one reported drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Correction {
    /// Re-applied as the source declares the object now, or already handled by the round that
    /// held the lock, which no longer applies it.
    Corrected,
    /// Not written here: a round of the source ran longer than the report may wait, or the
    /// re-apply could not be made (no client for the source's user, a failed read or write).
    /// A full round of the source was asked for; it runs after the one in progress, if any,
    /// and compares every object with git, this one included.
    LeftToRound,
    /// Not corrected here: the source's record of the object has no declaration (logged). A
    /// full round, asked for, rebuilds the record from the source's last good state.
    Declined,
    /// The shard of the source was lost or given up before the write was sent: its next
    /// holder's first round, a full one, corrects the object.
    ShardLeft,
    /// Not written because this replica began to stop first: the report answers `Unavailable`
    /// so that its sender reports the object again, to the shard's next holder.
    Stopped,
    /// The write was sent, but not answered within [`CORRECTION_STOP_PATIENCE`] once this
    /// replica began to stop, and was given up (logged, counted): it may still land, so the
    /// Lease of the source's shard is left to expire rather than released
    /// ([`arbor_runtime::ShardGuard::withhold_release`]).
    Abandoned,
}

/// Re-applies `key`, reported drifted by `reporter`, as `source` declares it, in a task of its
/// own: an RPC cancelled midway (its caller gone, or a forwarding replica's patience spent)
/// drops its handler, and a correction dropped with it would release the round lock with its
/// write still in flight, which could then land after the next round's write. The task is
/// work the replica's shutdown waits for before it gives up its Leases, so the next holder's
/// first round never runs beside its write: once stopping begins, a correction that has not
/// sent its write sends none, and one that has is waited for at most
/// [`CORRECTION_STOP_PATIENCE`]. A correction that panics is this event's failure alone: it is
/// left to a full round of the source, asked for here (the task released the round lock and
/// the shard as it unwound).
async fn correct_drift_detached(
    ctx: &Context,
    shutdown: &Shutdown,
    admitted: shard::Admitted,
    source: &SourceRef,
    key: &ObjectKey,
    reporter: &str,
    deadline: tokio::time::Instant,
) -> Correction {
    let shard = admitted.guard.shard();
    let (task_ctx, task_source, task_key, reporter) = (
        ctx.clone(),
        source.clone(),
        key.clone(),
        reporter.to_owned(),
    );
    let stopping = shutdown.clone();
    let correction = shutdown.spawn(async move {
        let (ctx, source, key) = (task_ctx, task_source, task_key);
        admitted
            .while_held(correct_drift(
                &ctx, &stopping, &admitted, &source, &key, &reporter, deadline,
            ))
            .await
            .unwrap_or_else(|| {
                tracing::info!(object = %key, %source, "shard lost while re-applying a drifted object");
                Correction::ShardLeft
            })
    });
    match correction.await {
        Ok(correction) => correction,
        // Caught here: unwinding would fail the rest of the batch, and end the connection's
        // task with every other stream on the connection.
        Err(error) if error.is_panic() => {
            ctx.metrics.drift_corrections_panicked.inc();
            tracing::error!(object = %key, %source, %error, "re-applying a drifted object panicked; it is left to a round of its source");
            Job {
                ctx,
                shutdown,
                shard,
                source,
                key,
            }
            .leave_to_round(Correction::LeftToRound)
        }
        // Cancelled only as the runtime shuts down, the replica with it.
        Err(_) => Correction::Stopped,
    }
}

/// Re-applies `key` as `source` declares it. Runs under the source's round lock, as its rounds
/// do, and reads the declaration only once holding it: a re-apply computed from one commit
/// never lands after a round applied the next. A source whose round holds the lock is waited
/// for until `deadline`. Whatever is not written here is left to a full round of the source,
/// asked for before returning. Every step before the write stops as soon as `shutdown` begins
/// (checked inside the tracked task, so a correction spawned after the shutdown's wait for its
/// work ended sees it begun too, and writes nothing).
async fn correct_drift(
    ctx: &Context,
    shutdown: &Shutdown,
    admitted: &shard::Admitted,
    source: &SourceRef,
    key: &ObjectKey,
    reporter: &str,
    deadline: tokio::time::Instant,
) -> Correction {
    let job = Job {
        ctx,
        shutdown,
        shard: admitted.guard.shard(),
        source,
        key,
    };
    let stopping = shutdown.token();
    let lock = ctx.registry.round_lock(source);
    let Some(locked) = stopping
        .run_until_cancelled(tokio::time::timeout_at(deadline, lock.lock_owned()))
        .await
    else {
        return stopped(source, key);
    };
    let Ok(_round) = locked else {
        tracing::info!(object = %key, %source, "drift reported while a round of its source runs; a round after it corrects the object");
        return job.leave_to_round(Correction::LeftToRound);
    };
    // The wait may have outlasted the shard, or this replica's work: its next holder
    // corrects the object.
    if let Some(left) = job.not_worked_on() {
        return left;
    }
    let Some((record, apply_as)) = ctx
        .registry
        .declaration(source, key)
        .filter(|(record, _)| drift_corrected(record))
    else {
        // The round that held the lock changed what the source declares: it wrote the
        // object (or pruned it, or leaves it alone) after the drift.
        tracing::info!(object = %key, %source, "drift reported for an object its source's last round no longer applies");
        return Correction::Corrected;
    };
    let Some(desired) = record.desired(&ctx.settings, source, key.namespace.as_deref()) else {
        tracing::warn!(object = %key, %source, "drift not corrected: the declaration of the object is missing from the state of its source; a round of the source, asked for now, rebuilds it");
        return job.leave_to_round(Correction::Declined);
    };
    let compare = CompareFields::parse(&record.compare_fields).unwrap_or_default();
    let target = Target {
        gvk: &record.gvk,
        namespace: key.namespace.as_deref(),
        name: &key.name,
        sync_declared: ctx
            .registry
            .declares_kind(source, &key.group_kind)
            .unwrap_or(true),
        desired: Some(&desired),
        compare: &compare,
    };
    // Written as the source writes in its rounds (its service account, if any).
    let applier = match identity::applier_as(ctx, apply_as.as_deref()) {
        Ok(applier) => applier,
        Err(message) => {
            tracing::warn!(object = %key, %source, %message, "cannot re-apply a drifted object; a round of the source, asked for now, does");
            return job.leave_to_round(Correction::LeftToRound);
        }
    };
    let Some(live) = stopping.run_until_cancelled(applier.live(&target)).await else {
        return stopped(source, key);
    };
    let synced = match live {
        // No write begins once stopping; one begun is waited for, within a bound.
        Ok(_) if stopping.is_cancelled() => return stopped(source, key),
        Ok(live) => {
            let Some(synced) =
                answered_while_stopping(shutdown, applier.sync_object(&target, live.as_ref()))
                    .await
            else {
                ctx.metrics.drift_corrections_abandoned.inc();
                tracing::warn!(object = %key, %source, patience = ?CORRECTION_STOP_PATIENCE, "re-applying a drifted object was not answered in time as this replica stops, and was given up; the write may still land, so the Lease is left to expire rather than released");
                admitted.guard.withhold_release(shutdown);
                return Correction::Abandoned;
            };
            synced
        }
        Err(error) => Err(error),
    };
    match synced {
        Ok(outcome) => {
            tracing::info!(object = %key, %source, row = outcome.decision.row.number(), action = %outcome.decision.action, %reporter, "drift reported");
            Correction::Corrected
        }
        Err(error) => {
            ctx.metrics.count_error(error.code());
            tracing::warn!(object = %key, %error, "re-applying a drifted object failed; a round of the source, asked for now, writes it again");
            job.leave_to_round(Correction::LeftToRound)
        }
    }
}

/// Waits for `write`, already sent or about to be, however long while this replica runs, and
/// at most [`CORRECTION_STOP_PATIENCE`] once `shutdown` begins; `None` when that ran out.
async fn answered_while_stopping<F: std::future::Future>(
    shutdown: &Shutdown,
    write: F,
) -> Option<F::Output> {
    let stopping = shutdown.token();
    tokio::pin!(write);
    tokio::select! {
        biased;
        answer = &mut write => Some(answer),
        () = stopping.cancelled() => tokio::time::timeout(CORRECTION_STOP_PATIENCE, write).await.ok(),
    }
}

/// A correction not made because this replica stops (logged): the report answers
/// `Unavailable`, and its sender reports the object again to the next holder of the shard.
fn stopped(source: &SourceRef, key: &ObjectKey) -> Correction {
    tracing::info!(object = %key, %source, "drift reported as this replica stops; its reporter is asked to report it again to the next holder of the shard");
    Correction::Stopped
}

/// One drift correction's place: what deciding where it is left needs.
struct Job<'a> {
    ctx: &'a Context,
    shutdown: &'a Shutdown,
    /// The shard of the source.
    shard: u32,
    source: &'a SourceRef,
    key: &'a ObjectKey,
}

impl Job<'_> {
    /// Leaves the object to a full round of its source, asked for now, as `left`; unless this
    /// replica no longer works on the source's shard ([`Job::not_worked_on`]), which then asks
    /// for nothing: it forgets the sources of shards it gave up.
    fn leave_to_round(&self, left: Correction) -> Correction {
        if let Some(not_here) = self.not_worked_on() {
            return not_here;
        }
        self.ctx.registry.request_round(self.source);
        left
    }

    /// Why this replica no longer works on the shard of the source, if it does not: it stops
    /// ([`Correction::Stopped`]), or the shard was lost or given up ([`Correction::ShardLeft`]).
    fn not_worked_on(&self) -> Option<Correction> {
        let (source, key) = (self.source, self.key);
        if self.shutdown.is_shutting_down() {
            return Some(stopped(source, key));
        }
        if self.ctx.shards.holds(self.shard) {
            return None;
        }
        tracing::info!(object = %key, %source, "drift reported for a source whose shard this replica is giving up");
        Some(Correction::ShardLeft)
    }
}

/// Whether a drift of an object in this state is corrected: not an ignored one, nor one that
/// failed (its round reports why).
fn drift_corrected(record: &ObjectRecord) -> bool {
    !matches!(record.state, ObjectState::Ignored | ObjectState::Failed)
}

/// What makes two objects of the gRPC API the same object: group, kind, namespace, name.
type ObjectIdentity = (String, String, String, String);
/// What makes two sources the same: kind, namespace, name.
type SourceIdentity = (i32, String, String);

/// What makes two objects of the gRPC API the same object.
fn object_ref_key(object: &proto::ObjectRef) -> ObjectIdentity {
    (
        object.group.clone(),
        object.kind.clone(),
        object.namespace.clone(),
        object.name.clone(),
    )
}

/// What makes two entries of ListManaged the same: the object and its source.
fn managed_key(object: &proto::ManagedObject) -> (Option<ObjectIdentity>, Option<SourceIdentity>) {
    (
        object.object.as_ref().map(object_ref_key),
        object
            .source
            .as_ref()
            .map(|source| (source.kind, source.namespace.clone(), source.name.clone())),
    )
}

/// `result`, saying in its metadata that it answers for `answered` ([`ANSWERED_SHARDS`]).
fn answering<T>(
    answered: &BTreeSet<u32>,
    result: Result<Response<T>, Status>,
) -> Result<Response<T>, Status> {
    let Ok(value) = encode_shards(answered).parse() else {
        return result;
    };
    match result {
        Ok(mut response) => {
            response.metadata_mut().insert(ANSWERED_SHARDS, value);
            Ok(response)
        }
        Err(mut status) => {
            status.metadata_mut().insert(ANSWERED_SHARDS, value);
            Err(status)
        }
    }
}

/// The answer to a request about `source` that reached a replica not holding its shard.
fn held_elsewhere(ctx: &Context, source: &SourceRef, elsewhere: &shard::HeldElsewhere) -> Status {
    let me = ctx.shards.identity();
    let Some(holder) = &elsewhere.holder else {
        return Status::unavailable(format!(
            "{source} is in shard {}, which no replica holds right now (this is {me}); retry in \
             a lease duration",
            elsewhere.shard
        ));
    };
    let mut status = Status::failed_precondition(format!(
        "{source} is in shard {}, which replica {holder} syncs, not this one ({me}): send the \
         request to {holder}",
        elsewhere.shard
    ));
    if let Ok(value) = holder.parse() {
        status.metadata_mut().insert(SHARD_HOLDER, value);
    }
    status
}

fn source_ref_from(proto: Option<&proto::SourceRef>) -> Result<Option<SourceRef>, Status> {
    let Some(source) = proto else {
        return Ok(None);
    };
    match proto::SourceKind::try_from(source.kind) {
        Ok(proto::SourceKind::GitTrack) => Ok(Some(SourceRef::GitTrack {
            namespace: source.namespace.clone(),
            name: source.name.clone(),
        })),
        Ok(proto::SourceKind::ClusterGitTrack) => Ok(Some(SourceRef::ClusterGitTrack {
            name: source.name.clone(),
        })),
        _ if source.name.is_empty() => Ok(None),
        _ => Err(Status::invalid_argument(
            "source.kind must be GitTrack or ClusterGitTrack",
        )),
    }
}

fn source_ref_to(source: &SourceRef) -> proto::SourceRef {
    match source {
        SourceRef::GitTrack { namespace, name } => proto::SourceRef {
            kind: proto::SourceKind::GitTrack.into(),
            namespace: namespace.clone(),
            name: name.clone(),
        },
        SourceRef::ClusterGitTrack { name } => proto::SourceRef {
            kind: proto::SourceKind::ClusterGitTrack.into(),
            namespace: String::new(),
            name: name.clone(),
        },
    }
}

fn object_key(object: Option<&proto::ObjectRef>) -> Result<(ObjectKey, String), Status> {
    let object = object.ok_or_else(|| Status::invalid_argument("object is required"))?;
    if object.kind.is_empty() || object.name.is_empty() {
        return Err(Status::invalid_argument(
            "object.kind and object.name are required",
        ));
    }
    Ok((
        ObjectKey {
            group_kind: GroupKind::new(&object.group, &object.kind),
            namespace: Some(object.namespace.as_str())
                .filter(|ns| !ns.is_empty())
                .map(Into::into),
            name: object.name.as_str().into(),
        },
        object.version.clone(),
    ))
}

fn object_ref(key: &ObjectKey, version: &str) -> proto::ObjectRef {
    proto::ObjectRef {
        group: key.group_kind.group.to_string(),
        version: version.to_owned(),
        kind: key.group_kind.kind.to_string(),
        namespace: key.namespace.as_deref().unwrap_or_default().to_owned(),
        name: key.name.to_string(),
    }
}

fn managed_state(state: ObjectState) -> ManagedState {
    match state {
        ObjectState::InSync => ManagedState::InSync,
        ObjectState::Drifted => ManagedState::Drifted,
        ObjectState::Pending => ManagedState::Pending,
        ObjectState::Unmanaged => ManagedState::Unmanaged,
        ObjectState::Ignored => ManagedState::Ignored,
        ObjectState::Failed => ManagedState::Failed,
        ObjectState::Pruning => ManagedState::Pruning,
    }
}

/// The state a table row finds an object in, before acting on it.
fn row_state(row: Row) -> ManagedState {
    ObjectState::of(row, Moment::Found).map_or(ManagedState::Unspecified, managed_state)
}

fn action(action: Action) -> proto::Action {
    match action {
        Action::NoAction => proto::Action::None,
        Action::Create => proto::Action::Create,
        Action::Update => proto::Action::Update,
        Action::Delete => proto::Action::Delete,
    }
}

/// The table's columns for `situation`; `None` is the seed's "N/A".
fn inputs(situation: &Situation) -> proto::ActionInputs {
    let (sync_declared, resource_declared, on_cluster, has_label, matches) = match situation {
        Situation::SyncNotDeclared => (false, false, false, None, None),
        Situation::ResourceDeclared(DeclaredOnCluster::NotOnCluster) => {
            (true, true, false, None, None)
        }
        Situation::ResourceDeclared(DeclaredOnCluster::Unmanaged(_)) => {
            (true, true, true, Some(false), None)
        }
        Situation::ResourceDeclared(DeclaredOnCluster::Managed(comparison)) => {
            (true, true, true, Some(true), Some(comparison.matches()))
        }
        Situation::ResourceNotDeclared(UndeclaredOnCluster::NotOnCluster) => {
            (true, false, false, None, None)
        }
        Situation::ResourceNotDeclared(UndeclaredOnCluster::Unmanaged(_)) => {
            (true, false, true, Some(false), None)
        }
        Situation::ResourceNotDeclared(UndeclaredOnCluster::Managed) => {
            (true, false, true, Some(true), None)
        }
    };
    proto::ActionInputs {
        sync_declared,
        resource_declared,
        on_cluster,
        has_label,
        matches,
    }
}

/// Why the row applies: its id and reason, and what differs or why the label does not count.
/// Whether `key` names a core Secret, whose values an answer never shows.
fn is_secret_kind(key: &ObjectKey) -> bool {
    key.group_kind.group.is_empty() && key.group_kind.kind == "Secret"
}

/// The table's reason, with the differences found; for a Secret only their paths, never the
/// values (its payload stays inside Secret protection, see [`arbor_policy::secret`]).
fn reason(situation: &Situation, row: Row, hide_values: bool) -> String {
    let detail = match situation {
        Situation::ResourceDeclared(DeclaredOnCluster::Managed(comparison))
            if !comparison.matches() =>
        {
            let differences: Vec<String> = comparison
                .differences
                .iter()
                .map(|difference| {
                    if hide_values {
                        format!("{} differs", difference.path())
                    } else {
                        difference.to_string()
                    }
                })
                .collect();
            format!(" Differences: {}.", differences.join("; "))
        }
        Situation::ResourceDeclared(DeclaredOnCluster::Unmanaged(why))
        | Situation::ResourceNotDeclared(UndeclaredOnCluster::Unmanaged(why)) => {
            format!(" ({why})")
        }
        _ => String::new(),
    };
    format!("[{}] {}.{detail}", row.id(), row.reason())
}

fn preview_change(change: Change) -> proto::PreviewChange {
    match change {
        Change::Create => proto::PreviewChange::Create,
        Change::Update => proto::PreviewChange::Update,
        Change::Delete => proto::PreviewChange::Delete,
        Change::Unchanged => proto::PreviewChange::Unchanged,
        Change::Unmanaged => proto::PreviewChange::Unmanaged,
        Change::Ignored => proto::PreviewChange::Ignored,
    }
}

/// The fields an update changes; a Secret's by path only.
fn field_diffs(situation: &Situation, hide_values: bool) -> Vec<proto::FieldDiff> {
    let Situation::ResourceDeclared(DeclaredOnCluster::Managed(comparison)) = situation else {
        return Vec::new();
    };
    let json = |value: &serde_json::Value| {
        if hide_values {
            String::new()
        } else {
            value.to_string()
        }
    };
    comparison
        .differences
        .iter()
        .map(|difference| {
            let (live, declared) = match difference {
                Difference::Missing { declared, .. } => (String::new(), json(declared)),
                Difference::Differs { declared, live, .. } => (json(live), json(declared)),
                Difference::LengthDiffers { declared, live, .. } => {
                    (format!("a list of {live}"), format!("a list of {declared}"))
                }
            };
            proto::FieldDiff {
                path: difference.path().to_string(),
                live,
                declared,
            }
        })
        .collect()
}

fn preview_object(object: &preview::PreviewObject) -> proto::PlannedObject {
    let hide = is_secret_kind(&object.key);
    let (rule, reason, fields) = match &object.decided {
        Some((situation, row)) => {
            let mut reason = reason(situation, *row, hide);
            if !object.message.is_empty() {
                reason = format!("{reason} {}", object.message);
            }
            (
                format!("seeds/000 row {}", row.number()),
                reason,
                field_diffs(situation, hide),
            )
        }
        None => (String::new(), object.message.clone(), Vec::new()),
    };
    proto::PlannedObject {
        object: Some(object_ref(&object.key, &object.version)),
        change: preview_change(object.change).into(),
        rule,
        reason,
        file: object.file.clone(),
        fields,
        held: object.held,
    }
}

fn preview_status(error: PreviewError) -> Status {
    match &error {
        PreviewError::NotFound(_) => Status::not_found(error.to_string()),
        PreviewError::InvalidSpec { .. } => Status::failed_precondition(error.to_string()),
        PreviewError::InvalidRevision { .. }
        | PreviewError::InvalidFile { .. }
        | PreviewError::TooLarge { .. } => Status::invalid_argument(error.to_string()),
        PreviewError::Controller(_) => Status::unavailable(error.to_string()),
    }
}

fn count(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

fn source_status(source: &SourceRef, record: &SourceRecord) -> proto::SourceStatus {
    let status = &record.status;
    proto::SourceStatus {
        source: Some(source_ref_to(source)),
        repository: record.repository.clone(),
        reference: record.revision.clone(),
        observed_commit: status.observed_commit.clone().unwrap_or_default(),
        last_sync_time: status.last_sync_time.as_ref().map(from_kube::time),
        counters: Some(proto::ObjectCounters {
            discovered: count(status.objects_discovered),
            applied: count(status.objects_applied),
            ignored: count(status.objects_ignored),
            in_sync: count(status.objects_in_sync),
        }),
        ignored_files: status.ignored_files.clone().into_iter().collect(),
        errors: status
            .errors
            .iter()
            .map(|error| proto::SourceError {
                code: error.code.clone(),
                file: error.file.clone().unwrap_or_default(),
                object: error.object.clone().unwrap_or_default(),
                message: error.message.clone(),
            })
            .collect(),
        conditions: status.conditions.iter().map(from_kube::condition).collect(),
        suspended: record.suspended,
        shard: status.shard,
        handled_by: status.handled_by.clone().unwrap_or_default(),
    }
}

#[tonic::async_trait]
impl SyncService for SyncServiceImpl {
    async fn get_status(
        &self,
        request: Request<proto::GetStatusRequest>,
    ) -> Result<Response<proto::GetStatusResponse>, Status> {
        let answered = shard::answered_shards(&self.ctx);
        let result: Result<Response<proto::GetStatusResponse>, Status> = async {
            let wanted = source_ref_from(request.get_ref().source.as_ref())?;
            let mut sources: Vec<proto::SourceStatus> = self
                .sources()
                .iter()
                .filter(|(source, _)| wanted.as_ref().is_none_or(|wanted| wanted == source))
                .map(|(source, record)| source_status(source, record))
                .collect();
            if !PeerReplicas::forwarded(&request) && (wanted.is_none() || sources.is_empty()) {
                let answers = self
                    .ask_others(
                        request.get_ref(),
                        QUESTION_PATIENCE,
                        |mut client, request| async move { client.get_status(request).await },
                        tonic::Code::NotFound,
                        &answered,
                    )
                    .await?;
                for answer in answers {
                    for status in answer.sources {
                        // A source in hand-over may show on two replicas for a moment: once.
                        if !sources.iter().any(|known| known.source == status.source) {
                            sources.push(status);
                        }
                    }
                }
            }
            if sources.is_empty()
                && let Some(wanted) = wanted
            {
                return Err(Status::not_found(format!(
                    "{wanted} is not reconciled by this instance"
                )));
            }
            Ok(Response::new(proto::GetStatusResponse { sources }))
        }
        .await;
        answering(&answered, result)
    }

    async fn list_managed(
        &self,
        request: Request<proto::ListManagedRequest>,
    ) -> Result<Response<proto::ListManagedResponse>, Status> {
        let answered = shard::answered_shards(&self.ctx);
        let result: Result<Response<proto::ListManagedResponse>, Status> = async {
            let filter = request.get_ref();
            let wanted = source_ref_from(filter.source.as_ref())?;
            // A source held here is answered from here; otherwise every shard may hold objects.
            let local = wanted.as_ref().is_some_and(|wanted| {
                shard::answers_for_source(&self.ctx, wanted)
                    && self.ctx.registry.state_known(wanted)
            });
            let elsewhere = if PeerReplicas::forwarded(&request) || local {
                Vec::new()
            } else {
                self.ask_others(
                    filter,
                    QUESTION_PATIENCE,
                    |mut client, request| async move { client.list_managed(request).await },
                    tonic::Code::Ok,
                    &answered,
                )
                .await?
            };
            let mut objects = Vec::new();
            for (source, record) in self.sources() {
                if wanted.as_ref().is_some_and(|wanted| *wanted != source) {
                    continue;
                }
                for (key, object) in &record.objects {
                    let state = managed_state(object.state);
                    let keep = (filter.namespace.is_empty()
                        || key.namespace.as_deref() == Some(filter.namespace.as_str()))
                        && (filter.kind.is_empty() || key.group_kind.kind == filter.kind)
                        && (filter.state == 0 || filter.state == i32::from(state));
                    if keep {
                        objects.push(proto::ManagedObject {
                            object: Some(object_ref(key, &object.gvk.version)),
                            source: Some(source_ref_to(&source)),
                            file: object.file.to_string(),
                            state: state.into(),
                            message: object.message.to_string(),
                            last_applied_time: object.last_applied.map(from_kube::timestamp),
                        });
                    }
                }
            }
            // A source in hand-over may show on two replicas for a moment: once.
            let mut seen: std::collections::HashSet<_> = objects.iter().map(managed_key).collect();
            for answer in elsewhere {
                for object in answer.objects {
                    if seen.insert(managed_key(&object)) {
                        objects.push(object);
                    }
                }
            }
            Ok(Response::new(proto::ListManagedResponse { objects }))
        }
        .await;
        answering(&answered, result)
    }

    async fn explain(
        &self,
        request: Request<proto::ExplainRequest>,
    ) -> Result<Response<proto::ExplainResponse>, Status> {
        let answered = shard::answered_shards(&self.ctx);
        let result: Result<Response<proto::ExplainResponse>, Status> = async {
            let (key, version) = object_key(request.get_ref().object.as_ref())?;
            let (declarations, situation, row, gvk) = self.assess(&key, &version).await?;
            if declarations.is_empty() && !PeerReplicas::forwarded(&request) {
                // Declared by a source of another replica's shard: that replica explains it.
                let declared = self
                    .ask_others(
                        request.get_ref(),
                        QUESTION_PATIENCE,
                        |mut client, request| async move { client.explain(request).await },
                        tonic::Code::Ok,
                        &answered,
                    )
                    .await?
                    .into_iter()
                    .find(|answer| !answer.declarations.is_empty());
                if let Some(answer) = declared {
                    return Ok(Response::new(answer));
                }
            }
            let decision = proto::Decision {
                allowed: false,
                action: action(row.action()).into(),
                rule: format!("seeds/000 row {}", row.number()),
                reason: reason(&situation, row, is_secret_kind(&key)),
            };
            Ok(Response::new(proto::ExplainResponse {
                object: Some(object_ref(&key, &gvk.version)),
                declarations: declarations
                    .iter()
                    .map(|(source, commit, record)| proto::Declaration {
                        source: Some(source_ref_to(source)),
                        file: record.file.to_string(),
                        commit: commit.clone(),
                        inherited_from: record.inherited_from.clone().unwrap_or_default(),
                    })
                    .collect(),
                inputs: Some(inputs(&situation)),
                decision: Some(decision),
                state: row_state(row).into(),
            }))
        }
        .await;
        answering(&answered, result)
    }

    async fn trigger_sync(
        &self,
        request: Request<proto::TriggerSyncRequest>,
    ) -> Result<Response<proto::TriggerSyncResponse>, Status> {
        self.refuse_while_stopping()?;
        let forwarded = PeerReplicas::forwarded(&request);
        let request = request.into_inner();
        let source = source_ref_from(request.source.as_ref())?
            .ok_or_else(|| Status::invalid_argument("source is required"))?;
        if let Some(elsewhere) = shard::held_elsewhere(&self.ctx, &source) {
            if let Some(holder) = elsewhere.holder.as_deref().filter(|_| !forwarded) {
                let answer = self
                    .peers
                    .ask(
                        holder,
                        request,
                        TRIGGER_PATIENCE + Duration::from_secs(10),
                        |mut client, request| async move { client.trigger_sync(request).await },
                    )
                    .await;
                if let Some(answer) = answer {
                    return answer.map(Response::new);
                }
            }
            return Err(held_elsewhere(&self.ctx, &source, &elsewhere));
        }
        // Read in place: a record holds one entry per declared object.
        let Some(before) = self.ctx.registry.view(&source, |record| {
            (record.rounds, source_status(&source, record))
        }) else {
            return Err(Status::not_found(format!(
                "{source} is not reconciled by this instance"
            )));
        };
        self.ctx.registry.request_round(&source);
        let completed = request.wait
            && self
                .ctx
                .registry
                .wait_for_round(&source, before.0, TRIGGER_PATIENCE)
                .await;
        let status = self
            .ctx
            .registry
            .view(&source, |record| source_status(&source, record))
            .unwrap_or(before.1);
        Ok(Response::new(proto::TriggerSyncResponse {
            completed,
            status: Some(status),
        }))
    }

    async fn report_drift(
        &self,
        request: Request<proto::ReportDriftRequest>,
    ) -> Result<Response<proto::ReportDriftResponse>, Status> {
        self.refuse_while_stopping()?;
        // One bound for the whole batch: however many of its sources are in a round, the
        // report is answered about DRIFT_ROUND_PATIENCE after it came.
        let deadline = tokio::time::Instant::now() + DRIFT_ROUND_PATIENCE;
        let mut accepted = 0;
        // Events left because this replica began to stop: the whole report is then refused,
        // so that its sender reports them again at the shard's next holder.
        let mut left_by_stop = 0usize;
        // Events about objects no source declares here, or whose source's shard this replica
        // does not hold: another replica may place them.
        let mut unplaced = Vec::new();
        let events = &request.get_ref().events;
        for event in events {
            // Stopping may start midway through a batch: nothing more starts here.
            if self.shutdown.is_shutting_down() {
                left_by_stop += 1;
                continue;
            }
            let (key, _) = object_key(event.object.as_ref())?;
            let declarations = self.ctx.registry.declarations(&key);
            let Some((source, _, _)) = declarations
                .into_iter()
                .find(|(_, _, record)| drift_corrected(record))
            else {
                unplaced.push(event.clone());
                continue;
            };
            // Written only under the source's shard: its rounds may be running on another
            // replica, which then also corrects the drift.
            let Some(admitted) = shard::admit_source(&self.ctx, &source).await else {
                if self.shutdown.is_shutting_down() {
                    left_by_stop += 1;
                    continue;
                }
                tracing::info!(object = %key, %source, "drift reported for a source whose shard this replica does not hold");
                unplaced.push(event.clone());
                continue;
            };
            match correct_drift_detached(
                &self.ctx,
                &self.shutdown,
                admitted,
                &source,
                &key,
                &event.reporter,
                deadline,
            )
            .await
            {
                Correction::Stopped => left_by_stop += 1,
                Correction::Declined => {}
                Correction::Corrected
                | Correction::LeftToRound
                | Correction::ShardLeft
                | Correction::Abandoned => accepted += 1,
            }
        }
        if left_by_stop > 0 {
            return Err(Status::unavailable(format!(
                "replica {} began to stop and corrected {accepted} of the {} reported drifts ({left_by_stop} left); report them again, to another replica",
                self.ctx.shards.identity(),
                events.len()
            )));
        }
        let mut unknown: Vec<proto::ObjectRef> =
            unplaced.iter().filter_map(|e| e.object.clone()).collect();
        if !unplaced.is_empty() && !PeerReplicas::forwarded(&request) {
            let question = proto::ReportDriftRequest { events: unplaced };
            let answers = self
                .peers
                .ask_all(
                    &question,
                    QUESTION_PATIENCE,
                    |mut client, request| async move { client.report_drift(request).await },
                )
                .await;
            let mut coverage = Coverage::new(&shard::answered_shards(&self.ctx));
            for PeerAnswer {
                replica,
                shards,
                answer,
            } in answers
            {
                match answer {
                    Ok(answer) => {
                        accepted += answer.accepted;
                        let theirs: std::collections::HashSet<_> =
                            answer.unknown.iter().map(object_ref_key).collect();
                        unknown.retain(|object| theirs.contains(&object_ref_key(object)));
                        coverage.answered(&self.ctx.shards, replica, shards);
                    }
                    // A replica that stops refuses the report; so does one that stopping
                    // caught midway through it.
                    Err(status) => {
                        tracing::warn!(%replica, error = %status.message(), "cannot pass drift reports to another replica");
                        coverage.failed(replica, &status);
                    }
                }
            }
            // What no replica placed may belong to a shard whose holder did not answer: the
            // reporter sends it again rather than drop it, and reaches the holder, or the next
            // one, then. Not for a holder on its first rounds (they correct the drift anyway)
            // or one that cannot be reached by configuration: the reporter would resend, and
            // hold up every later report, for as long as that lasts.
            let uncovered = self.peers.uncovered_for_now(&coverage);
            if !uncovered.is_empty() && !unknown.is_empty() {
                return Err(Status::unavailable(format!(
                    "{} reported drifts may concern shards no replica answered for: {}; report them again",
                    unknown.len(),
                    uncovered.join("; ")
                )));
            }
        }
        Ok(Response::new(proto::ReportDriftResponse {
            accepted,
            unknown,
        }))
    }

    async fn get_declared(
        &self,
        request: Request<proto::GetDeclaredRequest>,
    ) -> Result<Response<proto::GetDeclaredResponse>, Status> {
        let answered = shard::answered_shards(&self.ctx);
        let result: Result<Response<proto::GetDeclaredResponse>, Status> = async {
            let (key, _) = object_key(request.get_ref().object.as_ref())?;
            let declared = self
                .declarations(&key)
                .into_iter()
                .find(|(_, _, record)| record.state.may_manage());
            let Some((source, commit, record)) = declared else {
                if PeerReplicas::forwarded(&request) {
                    return Ok(Response::new(proto::GetDeclaredResponse::default()));
                }
                // Drift prevention must not miss an object because the Service picked a replica
                // whose shards do not hold its source.
                let declared = self
                    .ask_others(
                        request.get_ref(),
                        ADMISSION_PATIENCE,
                        |mut client, request| async move { client.get_declared(request).await },
                        tonic::Code::Ok,
                        &answered,
                    )
                    .await?
                    .into_iter()
                    .find(|answer| answer.declared);
                return Ok(Response::new(declared.unwrap_or_default()));
            };
            // A Secret's payload stays inside Secret protection (arbor_policy::secret): the answer
            // carries the rest of the object, which drift prevention compares.
            let desired = self.desired_of(&source, &key, &record)?;
            let object_json =
                serde_json::to_string(&arbor_policy::secret::without_payload(&desired))
                    .map_err(|error| Status::internal(error.to_string()))?;
            Ok(Response::new(proto::GetDeclaredResponse {
                declared: true,
                object_json,
                source: Some(source_ref_to(&source)),
                file: record.file.to_string(),
                commit,
                compare_fields: record.compare_fields,
            }))
        }
        .await;
        answering(&answered, result)
    }

    async fn preview(
        &self,
        request: Request<proto::PreviewRequest>,
    ) -> Result<Response<proto::PreviewResponse>, Status> {
        let request = request.into_inner();
        let source = source_ref_from(request.source.as_ref())?
            .ok_or_else(|| Status::invalid_argument("source is required"))?;
        let target = match request.target {
            None => preview::Target::Revision(String::new()),
            Some(proto::preview_request::Target::Revision(revision)) => {
                preview::Target::Revision(revision)
            }
            Some(proto::preview_request::Target::Files(files)) => preview::Target::Files(
                files
                    .files
                    .into_iter()
                    .map(|file| (file.path, file.content))
                    .collect(),
            ),
        };
        let answer = preview::preview(&self.ctx, &source, target)
            .await
            .map_err(preview_status)?;
        Ok(Response::new(proto::PreviewResponse {
            commit: answer.commit.unwrap_or_default(),
            objects: answer.objects.iter().map(preview_object).collect(),
            blocked_by: answer.blocked_by,
            errors: answer
                .errors
                .iter()
                .map(|error| proto::SourceError {
                    code: error.code.as_str().to_owned(),
                    file: error.path.clone(),
                    object: error.object.clone().unwrap_or_default(),
                    message: match error.line {
                        Some(line) => format!("line {line}: {}", error.message),
                        None => error.message.clone(),
                    },
                })
                .collect(),
        }))
    }
}
