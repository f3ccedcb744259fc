//! Deleting a source: a prune of its whole inventory, planned by
//! [`arbor_policy::sync::prune::plan_deletion`].
//!
//! Every source carries gitsync's finalizer, so its tracking objects outlive it until this
//! module has decided about each: `deletionPolicy: Orphan` (the default) lets them go and
//! leaves every object; `Delete` waits, with a `Stalled` condition, until the mass-prune guard
//! allows it (the allow-mass-prune annotation), then deletes every object of the inventory
//! that no other source declares, Namespaces last and only those that hold nothing else.
//! Whether another source declares an object is read as a tracking object's finalizer reads it
//! ([`tracking::others_declaring`]: every source's status, whichever replica ran its rounds);
//! while the sources cannot be seen, nothing is deleted and the deletion looks again, and a
//! step that deletes is planned again from a fresh list of the sources first.
//!
//! The work is done here, one object after the other, rather than by deleting every tracking
//! object at once and leaving it to their finalizers: thousands of tracking objects turning
//! Terminating together is a burst of watch events and concurrent finalizers, while here the
//! source's status shows progress (`status.deletion`) and a failure on one object is retried
//! without holding up the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbor_api::condition::{ConditionUpdate, reasons, remove_condition, set_condition, types};
use arbor_api::keys::{ArborKeys, GITSYNC_FINALIZER};
use arbor_api::source::{DeletionPolicy, DeletionProgress, GitSourceStatus, SourceError};
use arbor_policy::object::{GroupKind, ObjectKey};
use arbor_policy::sync::prune::{
    DeletionInput, DeletionStep, Disposal, InventoryEntry, Release, is_namespace,
    made_by_the_cluster, plan_deletion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope, verbs};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::Context;
use super::error::{self, ControllerError};
use super::paged_list::for_each_page;
use super::reconcile::SourceKind;
use super::shard;
use super::source_cache::{CachedSource, Freshness};
use super::source_handle::SourceHandle;
use super::status;
use super::tracking::{self, Tracked};

/// How many objects are finalized between two writes of the progress to the status.
const PROGRESS_EVERY: usize = 50;
/// Passes over the inventory in one reconcile: the objects, the Namespaces, and a last look.
const PASSES: usize = 3;
/// How soon a blocked or unfinished deletion looks again without a change to the source.
const RECHECK: Duration = Duration::from_secs(30);

/// Whether `source` carries gitsync's finalizer.
pub fn holds_finalizer<K: Resource>(source: &K) -> bool {
    source
        .meta()
        .finalizers
        .iter()
        .flatten()
        .any(|finalizer| finalizer == GITSYNC_FINALIZER)
}

/// Adds gitsync's finalizer to a source that lacks it, before anything is applied for it.
pub async fn ensure_finalizer<K: SourceKind>(
    ctx: &Context,
    source: &K,
    handle: &SourceHandle,
) -> Result<(), ControllerError> {
    if holds_finalizer(source) {
        return Ok(());
    }
    let mut finalizers = source.finalizers().to_vec();
    finalizers.push(GITSYNC_FINALIZER.to_owned());
    let patch = json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": source.resource_version(),
        }
    });
    K::api(ctx.client.clone(), handle)
        .patch(
            &source.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|error| {
            ControllerError::kube("add finalizer to", handle.reference.to_string(), error)
        })?;
    Ok(())
}

/// Takes the next steps of deleting `source`; the source goes once its inventory is empty.
pub async fn run<K: SourceKind>(
    ctx: &Context,
    source: &K,
    handle: &SourceHandle,
) -> Result<Action, ControllerError> {
    if !holds_finalizer(source) {
        return Ok(Action::await_change());
    }
    // A source being deleted declares nothing any more: other sources' prunes must not keep
    // objects for it.
    ctx.registry.remove(&handle.reference);
    let mut progress = Progress {
        ctx,
        source,
        handle,
        counts: handle.status.deletion.clone().unwrap_or_default(),
        written: handle.status.clone(),
    };
    for _ in 0..PASSES {
        // Each pass may end in the source's finalizer going: none starts once this replica
        // stops (the next holder lists the inventory again).
        if !shard::works_on(ctx, handle) {
            return Ok(Action::await_change());
        }
        let inventory = tracking::list_inventory(ctx, handle, tracking::InventoryRead::Fresh)
            .await?
            .owned;
        if inventory.is_empty() {
            return finish(ctx, source, handle).await;
        }
        let delete = handle.deletion_policy == DeletionPolicy::Delete;
        let only_namespaces = inventory.keys().all(|key| is_namespace(&key.group_kind));
        let foreign = if delete && only_namespaces {
            foreign_contents(ctx, &inventory).await?
        } else {
            BTreeMap::new()
        };
        let high_water = handle.status.prune_window.as_ref().map_or(0, |window| {
            usize::try_from(window.high_water_mark).unwrap_or(0)
        });
        // Whether other sources declare the objects, as a tracking object's finalizer decides
        // it: from every source's status (whichever replica ran its rounds) and this replica's
        // rounds; unknown while the sources cannot be seen.
        let plan = |sources: Option<Vec<CachedSource>>| {
            let entries: Vec<InventoryEntry> = inventory
                .values()
                .map(|tracked| {
                    let (elsewhere, declaring) = tracking::others_declaring(
                        ctx,
                        Some(&handle.reference),
                        tracked.key(),
                        sources.as_deref(),
                    );
                    InventoryEntry {
                        key: tracked.key().clone(),
                        elsewhere,
                        declared_by: declaring.first().map(ToString::to_string),
                    }
                })
                .collect();
            plan_deletion(&DeletionInput {
                delete,
                allowed: handle.allow_mass_prune,
                max_fraction: ctx.settings.max_prune_fraction,
                high_water,
                entries: &entries,
                foreign: &foreign,
            })
        };
        let mut step = plan(tracking::other_sources(ctx, Freshness::Cached).await);
        if let Some(fresh) = Freshness::Cached.to_confirm(step.deletes()) {
            step = plan(tracking::other_sources(ctx, fresh).await);
        }
        let now = match step {
            DeletionStep::Blocked(message) => {
                let message = format!(
                    "{message}. The source keeps its finalizer and nothing is deleted until it is \
                     annotated {}=true (or its deletionPolicy is set to Orphan)",
                    ctx.settings.keys.allow_mass_prune_annotation()
                );
                progress.counts.remaining = count(inventory.len());
                progress.blocked(&message).await?;
                return Ok(Action::requeue(RECHECK));
            }
            DeletionStep::WaitForOtherSources(unknown) => {
                tracing::warn!(source = %handle.reference, objects = unknown.len(), "deleting the source waits: whether other sources declare its objects is not known yet (the sources cannot be listed)");
                return Ok(Action::requeue(Duration::from_secs(5)));
            }
            DeletionStep::Proceed { now, .. } => now,
        };
        progress.counts.remaining = count(inventory.len());
        progress.write(None).await?;
        let mut failures = Vec::new();
        for (index, (key, disposal)) in now.iter().enumerate() {
            // No further write once this replica stops: the next holder goes on from the
            // inventory left.
            if !shard::works_on(ctx, handle) {
                return Ok(Action::await_change());
            }
            let Some(tracked) = inventory.get(key) else {
                continue;
            };
            match dispose(ctx, source, handle, tracked, disposal).await {
                Ok(deleted) => {
                    if deleted {
                        progress.counts.deleted += 1;
                    } else {
                        progress.counts.released += 1;
                    }
                    progress.counts.remaining -= 1;
                }
                Err(failure) => {
                    tracing::warn!(source = %handle.reference, object = %key, error = %failure, "deleting the source: an object failed; retrying");
                    failures.push(SourceError {
                        code: failure.code().to_owned(),
                        file: None,
                        object: Some(key.to_string()),
                        message: failure.to_string(),
                    });
                }
            }
            if (index + 1) % PROGRESS_EVERY == 0 {
                progress.write(None).await?;
            }
        }
        if !failures.is_empty() {
            progress.write(Some(failures)).await?;
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        progress.write(Some(Vec::new())).await?;
    }
    progress.write(None).await?;
    Ok(Action::requeue(RECHECK))
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Carries out one disposal; returns whether the object was deleted.
async fn dispose<K: SourceKind>(
    ctx: &Context,
    source: &K,
    handle: &SourceHandle,
    tracked: &Tracked,
    disposal: &Disposal,
) -> Result<bool, ControllerError> {
    let deleted = match disposal {
        Disposal::Delete => tracking::remove_object(ctx, tracked, true).await?,
        Disposal::Release(Release::HoldsUnmanaged(foreign)) => {
            let listed: Vec<String> = foreign.iter().map(ToString::to_string).collect();
            let note = format!(
                "Namespace {} is left in place: it holds objects this source did not apply ({})",
                tracked.key().name,
                listed.join(", ")
            );
            tracing::info!(namespace = %tracked.key().name, "{note}");
            publish(ctx, source, EventType::Warning, "NamespaceKept", note).await;
            false
        }
        Disposal::Release(Release::DeclaredBy(other)) => {
            tracing::info!(object = %tracked.key(), declared_by = %other, "left for another source that declares it");
            false
        }
        Disposal::Release(Release::Orphan) => false,
    };
    // The object's deletion may have outlasted this replica's hold on the source: its
    // tracking object then stays for the next holder, which finds the object gone.
    if !shard::works_on(ctx, handle) {
        return Ok(deleted);
    }
    tracking::release(ctx, tracked).await?;
    if let Disposal::Release(Release::DeclaredBy(_)) = disposal {
        for other in tracking::declared_elsewhere(ctx, None, tracked.key()) {
            ctx.registry.request_round(&other);
        }
    }
    Ok(deleted)
}

/// The inventory is empty: the source may go.
async fn finish<K: SourceKind>(
    ctx: &Context,
    source: &K,
    handle: &SourceHandle,
) -> Result<Action, ControllerError> {
    if let Some(patch) = tracking::finalizer_removal(source.meta()) {
        match K::api(ctx.client.clone(), handle)
            .patch(
                &source.name_any(),
                &PatchParams::default(),
                &Patch::<()>::Json(patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                return Err(ControllerError::kube(
                    "remove finalizer from",
                    handle.reference.to_string(),
                    error,
                ));
            }
        }
    }
    ctx.registry.remove(&handle.reference);
    tracing::info!(source = %handle.reference, policy = ?handle.deletion_policy, "source deleted");
    Ok(Action::await_change())
}

/// For each Namespace of the inventory, the objects in it that the source did not apply and
/// the cluster did not make. A kind that cannot be listed makes the answer unknown, and then
/// the deletion waits: a Namespace is deleted only when it is known to hold nothing else.
async fn foreign_contents(
    ctx: &Context,
    inventory: &BTreeMap<ObjectKey, Tracked>,
) -> Result<BTreeMap<String, BTreeSet<ObjectKey>>, ControllerError> {
    let namespaces: Vec<&str> = inventory
        .keys()
        .filter(|key| is_namespace(&key.group_kind))
        .map(|key| key.name.as_str())
        .collect();
    let discovery = Discovery::new(ctx.client.clone())
        .run()
        .await
        .map_err(|error| ControllerError::kube("discover", "API resources", error))?;
    let mut foreign: BTreeMap<String, BTreeSet<ObjectKey>> = BTreeMap::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if capabilities.scope != Scope::Namespaced
                || !capabilities.supports_operation(verbs::LIST)
            {
                continue;
            }
            for namespace in &namespaces {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(ctx.client.clone(), namespace, &resource);
                // Names are all it needs: metadata only, in pages.
                let api = &api;
                let read = for_each_page(
                    |params| async move { api.list_metadata(&params).await },
                    |items| {
                        for object in &items {
                            let key = ObjectKey {
                                group_kind: GroupKind::new(
                                    resource.group.clone(),
                                    resource.kind.clone(),
                                ),
                                namespace: Some((*namespace).into()),
                                name: object.name_any().into(),
                            };
                            if !made_by_the_cluster(&key) && !inventory.contains_key(&key) {
                                foreign
                                    .entry((*namespace).to_owned())
                                    .or_default()
                                    .insert(key);
                            }
                        }
                    },
                )
                .await;
                match read {
                    Ok(()) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => {
                        return Err(ControllerError::kube(
                            "list",
                            format!("{} in namespace {namespace}", resource.plural),
                            error,
                        ));
                    }
                }
            }
        }
    }
    Ok(foreign)
}

async fn publish<K: SourceKind>(
    ctx: &Context,
    source: &K,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Delete".into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &source.object_ref(&())).await {
        tracing::warn!(%error, source = %source.name_any(), "cannot publish an event");
    }
}

/// The status of a source being deleted, written when it changes.
struct Progress<'a, K> {
    ctx: &'a Context,
    source: &'a K,
    handle: &'a SourceHandle,
    counts: DeletionProgress,
    written: GitSourceStatus,
}

impl<K: SourceKind> Progress<'_, K> {
    /// Writes the progress; `failures` replaces the errors on the status (`None` keeps them).
    async fn write(&mut self, failures: Option<Vec<SourceError>>) -> Result<(), ControllerError> {
        let finalized = self.counts.deleted + self.counts.released;
        let message = format!(
            "deleting the source (deletionPolicy {:?}): {} of {} tracked objects finalized \
             ({} deleted, {} left on the cluster)",
            self.handle.deletion_policy,
            finalized,
            finalized + self.counts.remaining,
            self.counts.deleted,
            self.counts.released
        );
        // Without news about failures, the last ones stay: a retry that has not reached the
        // failing object yet must not make the status say it is fine.
        let errors = failures.unwrap_or_else(|| self.written.errors.clone());
        let mut next = self.next(
            errors,
            &[
                (types::READY, false, reasons::DELETING, message.clone()),
                (types::RECONCILING, true, reasons::DELETING, message),
            ],
        );
        remove_condition(&mut next.conditions, types::STALLED);
        self.save(next).await
    }

    async fn blocked(&mut self, message: &str) -> Result<(), ControllerError> {
        let next = self.next(
            vec![SourceError {
                code: error::DELETION_BLOCKED.to_owned(),
                file: None,
                object: None,
                message: message.to_owned(),
            }],
            &[
                (
                    types::READY,
                    false,
                    reasons::DELETION_BLOCKED,
                    message.to_owned(),
                ),
                (
                    types::STALLED,
                    true,
                    reasons::DELETION_BLOCKED,
                    message.to_owned(),
                ),
            ],
        );
        let changed = next != self.written;
        self.save(next).await?;
        if changed {
            tracing::warn!(source = %self.handle.reference, "{message}");
            publish(
                self.ctx,
                self.source,
                EventType::Warning,
                reasons::DELETION_BLOCKED,
                message.to_owned(),
            )
            .await;
        }
        Ok(())
    }

    fn next(
        &self,
        errors: Vec<SourceError>,
        conditions: &[(&str, bool, &str, String)],
    ) -> GitSourceStatus {
        let mut next = self.written.clone();
        next.deletion = Some(self.counts.clone());
        next.errors = errors;
        let now = Time(Timestamp::now());
        for (type_, status, reason, message) in conditions {
            set_condition(
                &mut next.conditions,
                ConditionUpdate::new(type_, *status, reason, message.clone())
                    .observed(self.handle.generation),
                now.clone(),
            );
        }
        next
    }

    async fn save(&mut self, next: GitSourceStatus) -> Result<(), ControllerError> {
        if next == self.written {
            return Ok(());
        }
        // Every progress write passes here: none starts once this replica stops (the next
        // holder writes its own).
        if !shard::works_on(self.ctx, self.handle) {
            return Ok(());
        }
        let (api, resource) = status::source_api(&self.ctx.client, &self.handle.reference);
        status::write(&api, &resource, &self.source.name_any(), &next).await?;
        self.written = next;
        Ok(())
    }
}
