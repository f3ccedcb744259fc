//! Which sources this replica syncs when gitsync shares them between replicas (`--shards N`,
//! see [`arbor_runtime::shards`]).
//!
//! A source belongs to the shard of its uid. It is admitted here, before anything is read or
//! written for it: a source of a shard this replica does not hold is left alone (another
//! replica syncs it), and one of a held shard runs under a [`ShardGuard`], raced against the
//! shard's loss, so a round stops at its next step once the shard is given up, taken, or not
//! renewed in time, and the shard is handed over only after the round has stopped. When a
//! shard is gained, every source is looked at again ([`Shards::gains`](arbor_runtime::Shards::gains)), so its sources start
//! at once.
//!
//! A tracking object is finalized by the replica that holds its source's shard (the shard of
//! the owner's uid in its ownerReferences), under the shard's guard like a round, so only one
//! replica writes for a source and a hand-over waits for a finalizer in flight. Whether another
//! source declares the object is read from every source's status
//! ([`source_cache`](super::source_cache)), not only from the rounds this replica ran.
//!
//! A request about a source (TriggerSync) that reaches a replica not holding its shard is
//! answered with the replica that holds it ([`held_elsewhere`]); a reported drift is re-applied
//! only under the source's shard ([`admit_source`]).
//!
//! What this replica's rounds recorded about a source ([`Registry`](super::Registry): its
//! declarations, its last good state, the objects' desired content) is forgotten as soon as
//! its shard is no longer held ([`forget_lost_shards`]): another replica syncs the source
//! meanwhile, so once the shard comes back the record would read as current while git and the
//! cluster moved on. Until the first round after the shard is regained, the source's
//! declarations are unknown here, as after a restart.
//!
//! Questions about what the sources declare (gRPC's GetDeclared and the others) are answered
//! here for the shards in [`answered_shards`]: those this replica answers for (it holds their
//! Lease, see [`Shards::answers_for`](arbor_runtime::Shards::answers_for)) and whose every
//! source's state it knows. A shard just taken over is left out until a round of each of its
//! sources has finished here, so that a question about one of them fails (and is retried, or
//! decided by the webhook's `--drift-unreachable`) instead of reading as "not declared". A
//! record of a source whose shard this replica no longer answers for is never shown
//! ([`answers_for_source`]).
//!
//! With more than one shard, a source's status says which shard it is in (`status.shard`) and
//! which replica syncs it (`status.handledBy`); with one shard both stay unset, as before.

use std::collections::BTreeSet;

use arbor_api::keys::SourceRef;
use arbor_api::source::GitSourceStatus;
use arbor_api::{ClusterGitTrack, GitTrack};
use arbor_runtime::ShardGuard;
use futures::StreamExt;
use kube::Resource;
use kube::api::DynamicObject;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::error::ControllerError;
use super::source_handle::SourceHandle;
use super::status;
use super::tracking_record::TrackingRecord;

/// A source admitted for this replica: work on it runs while [`Admitted::guard`] lives.
#[derive(Debug)]
pub struct Admitted {
    pub guard: ShardGuard,
}

/// Admits `source` when this replica holds its shard; `None` leaves it to its shard's holder.
pub async fn admit(ctx: &Context, source: &DynamicObject) -> Option<Admitted> {
    let uid = source.metadata.uid.as_deref().unwrap_or_default();
    let shard = ctx.shards.shard_of(uid);
    let guard = ctx.shards.guard(shard).await?;
    ctx.shards.count_work(shard);
    Some(Admitted { guard })
}

impl Admitted {
    /// Runs `work` while the shard is held (see [`ShardGuard::while_held`]).
    pub async fn while_held<F: std::future::Future>(&self, work: F) -> Option<F::Output> {
        self.guard.while_held(work).await
    }

    /// Records the shard and this replica in the source's status, when they are not there yet
    /// (the first round after the shard moved); with one shard, clears them instead.
    pub async fn stamp(
        &self,
        ctx: &Context,
        handle: &mut SourceHandle,
    ) -> Result<(), ControllerError> {
        let mut next = handle.status.clone();
        assign(
            &mut next,
            ctx.shards.count(),
            self.guard.shard(),
            ctx.shards.identity(),
        );
        if next == handle.status || !self.guard.still_held() {
            return Ok(());
        }
        let (api, resource) = status::source_api(&ctx.client, &handle.reference);
        status::write(&api, &resource, &handle.owner_reference.name, &next).await?;
        ctx.registry
            .update(&handle.reference, |record| record.status = next.clone());
        handle.status = next;
        Ok(())
    }
}

/// Whether this replica still works on `handle`'s source: its shard is held for work here,
/// which it no longer is once the replica begins to stop (or gives the shard up). Asked before
/// each write of a round or of a source's deletion, so that neither starts a write then: the
/// one in flight is waited for, the rest is left to the shard's next holder.
pub fn works_on(ctx: &Context, handle: &SourceHandle) -> bool {
    ctx.shards.holds(ctx.shards.shard_of(&handle.uid))
}

/// Sets `status.shard` and `status.handledBy` for a source in `shard` synced by `replica`, or
/// clears them when the sources are not sharded.
fn assign(status: &mut GitSourceStatus, shards: u32, shard: u32, replica: &str) {
    if shards > 1 {
        status.shard = Some(shard);
        status.handled_by = Some(replica.to_owned());
    } else {
        status.shard = None;
        status.handled_by = None;
    }
}

/// Admits work on `source` outside its rounds (a drift reported for one of its objects) when
/// this replica holds its shard. With more than one shard, a source this replica has not seen
/// (its uid, and so its shard, unknown) is not admitted.
pub async fn admit_source(ctx: &Context, source: &SourceRef) -> Option<Admitted> {
    let uid = match ctx.sources.get(source) {
        Some(cached) => cached.object.metadata.uid.clone().unwrap_or_default(),
        None if ctx.shards.count() == 1 => String::new(),
        None => return None,
    };
    let guard = ctx.shards.guard(ctx.shards.shard_of(&uid)).await?;
    Some(Admitted { guard })
}

/// A source whose shard another replica holds (or none, for a moment): requests about it go
/// there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldElsewhere {
    pub shard: u32,
    /// The replica holding the shard, as its Lease names it (its pod name in the chart);
    /// `None` while no replica holds it.
    pub holder: Option<String>,
}

/// Where `source`'s shard is held when not here; `None` when this replica holds it or does
/// not know the source.
pub fn held_elsewhere(ctx: &Context, source: &SourceRef) -> Option<HeldElsewhere> {
    let cached = ctx.sources.get(source)?;
    let shard = ctx
        .shards
        .shard_of(cached.object.metadata.uid.as_deref().unwrap_or_default());
    if ctx.shards.holds(shard) {
        return None;
    }
    Some(HeldElsewhere {
        shard,
        holder: ctx.shards.holder(shard),
    })
}

/// The shards whose sources' declarations this replica answers questions about: those it
/// answers for whose every source (in scope, not being deleted) had a round finish here since
/// the shard was taken, or does not decode. With one shard, the one shard: its replica answers
/// from what it knows, as it always did.
pub fn answered_shards(ctx: &Context) -> BTreeSet<u32> {
    let shards = &ctx.shards;
    let mut answered: BTreeSet<u32> = (0..shards.count())
        .filter(|shard| shards.answers_for(*shard))
        .collect();
    if shards.count() == 1 || answered.is_empty() {
        return answered;
    }
    // Before the first list of the sources, which ones each shard has is unknown.
    let Some(sources) = ctx.sources.cached(&ctx.settings) else {
        return BTreeSet::new();
    };
    for source in sources {
        let shard = shards.shard_of(source.object.metadata.uid.as_deref().unwrap_or_default());
        if answered.contains(&shard)
            && !source.deleting()
            && !ctx.registry.state_known(&source.reference)
        {
            answered.remove(&shard);
        }
    }
    answered
}

/// Whether this replica answers for `source`'s shard: its records of the source may be shown.
pub fn answers_for_source(ctx: &Context, source: &SourceRef) -> bool {
    if ctx.shards.count() == 1 {
        return true;
    }
    ctx.sources.get(source).is_some_and(|cached| {
        let uid = cached.object.metadata.uid.as_deref().unwrap_or_default();
        ctx.shards.answers_for(ctx.shards.shard_of(uid))
    })
}

/// Admits the finalizing of `tracking` when this replica holds the shard of the source that
/// owns it (of the tracking object itself when no source owns it): its decision and writes run
/// under the guard, so the shard is not handed over while they are in flight.
pub async fn admit_owner(ctx: &Context, tracking: &TrackingRecord) -> Option<Admitted> {
    let owner = tracking
        .owner_references()
        .iter()
        .find(|owner| owner.kind == GitTrack::kind(&()) || owner.kind == ClusterGitTrack::kind(&()))
        .map(|owner| owner.uid.as_str());
    let uid = owner.or(tracking.meta().uid.as_deref()).unwrap_or_default();
    let guard = ctx.shards.guard(ctx.shards.shard_of(uid)).await?;
    Some(Admitted { guard })
}

/// Forgets the records of the sources of every shard this replica stops holding, at each change
/// of the shards held, until `token` is cancelled.
pub async fn forget_lost_shards(ctx: std::sync::Arc<Context>, token: CancellationToken) {
    if ctx.shards.count() == 1 {
        return;
    }
    let mut changes = ctx.shards.changes();
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => return,
            change = changes.next() => if change.is_none() { return },
        }
        // Once stopping, no shard is held for work while the replica still answers for each
        // until its Lease goes: a change seen then forgets nothing.
        if token.is_cancelled() {
            return;
        }
        forget_unheld(&ctx);
    }
}

/// Drops the registry's record of each source whose shard this replica does not hold; a source
/// no longer cached (deleted) has no shard to hold, and its record goes too.
fn forget_unheld(ctx: &Context) {
    for (source, _) in ctx.registry.sources() {
        let held = ctx.sources.get(&source).is_some_and(|cached| {
            let uid = cached.object.metadata.uid.as_deref().unwrap_or_default();
            ctx.shards.holds(ctx.shards.shard_of(uid))
        });
        if !held {
            tracing::debug!(%source, "its shard is not held here: what its rounds recorded is forgotten");
            ctx.registry.remove(&source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_names_shard_and_replica_only_when_sharded() {
        let mut status = GitSourceStatus::default();
        assign(&mut status, 6, 4, "arbor-gitsync-1");
        assert_eq!(status.shard, Some(4));
        assert_eq!(status.handled_by.as_deref(), Some("arbor-gitsync-1"));
        assign(&mut status, 1, 0, "arbor-gitsync-1");
        assert_eq!(status, GitSourceStatus::default());
    }
}
