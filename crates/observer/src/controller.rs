//! The Application controller: applies manifests, starts and stops observers, heals drift.
//!
//! Each reconcile reads the Application and asks `arbor_policy::observe` what to do:
//!
//! 1. The spec and the observer schema are validated ([`ObserverSchema::for_application`]);
//!    an invalid one stops the observer and is reported as `Stalled` (reason `InvalidSpec` or
//!    `InvalidObserverSchema`, the message naming each path and reason code). Nothing is
//!    applied with a broken schema.
//! 2. [`ResourceDelta::between`] compares the last applied and the last observed manifests,
//!    and [`ApplicationState::next_action`] turns that, the generation and the deletion mark
//!    into create, update, delete or nothing.
//! 3. Around the action, [`observer_lifecycle`] says whether the observer is stopped before
//!    and started after (seeds/004: create: started after; update: stopped before, started
//!    after; delete: stopped before). A create that finds an observer still running (one that
//!    outlived a wiped status) stops it first, as an update does: the one exception to the
//!    table, see the [crate docs](crate).
//! 4. After an apply the status gets the last applied manifest ([`last_applied_manifest`]:
//!    the manifest plus the observed fields the API filled in) and the last observed one (the
//!    API's answer projected through the schema), by server-side apply on the status
//!    subresource.
//!
//! Deletion goes through the `arbor.dev/observer` finalizer: the observer is stopped, then
//! every object of the last applied manifest is deleted.

use std::sync::Arc;
use std::time::Duration;

use arbor_api::condition::reasons;
use arbor_api::keys::{OBSERVER_FIELD_MANAGER, OBSERVER_FINALIZER};
use arbor_api::{Application, ApplicationStatus};
use arbor_policy::observe::{
    ApplicationAction, ApplicationState, ObserverSchema, ResourceDelta, ResourceId,
    last_applied_manifest, last_observed_manifest, observer_lifecycle,
};
use kube::Api;
use kube::core::{Resource, ResourceExt};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use serde_json::Value;

use crate::apply::{apply_object, delete_object, restore_list_bounds};
use crate::error::Error;
use crate::manifest;
use crate::observer::{self, ObserverContext, ObserverSpec};
use crate::registry::{AppKey, LifecycleEvent};
use crate::status::{ApplicationOutcome, apply_status, to_json};
use arbor_runtime::compact_object::CompactObject;
use arbor_runtime::decode::{DecodeFailures, api_resource, decode_compact, object_name};

/// How long a failed reconcile waits before it is retried.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What every reconcile shares.
#[derive(Clone)]
pub struct Context {
    pub observers: ObserverContext,
    pub recorder: Recorder,
    /// Reports Applications that do not decode.
    pub undecodable: DecodeFailures,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("observers", &self.observers)
            .finish_non_exhaustive()
    }
}

/// The controller's reconcile function.
///
/// Applications are watched as dynamic objects ([`arbor_runtime::decode`]): one that does not
/// decode is reported (warn log line, Event, `arbor_observer_undecodable_objects`) and skipped,
/// and every other Application is reconciled.
///
/// With `--shards`, an Application is admitted only when this replica holds its shard
/// ([`arbor_runtime::shards`]); the reconcile then runs while the shard stays held. One of a
/// shard this replica does not hold (any more) is left to the shard's holder, and its observer
/// here, if one still runs, is stopped.
///
/// Every write checks right before it is sent that the shard is still held for work here
/// (`Reconciler::may_write`), which it no longer is once the replica begins to stop or gives
/// the shard up. A reconcile ended that way ([`Error::ShardLeft`]) is a normal outcome, not a
/// failure: it is logged with its reason and not retried here, since the shard's next holder
/// (this replica again, once it regains the shard, looks at every Application) carries on.
pub async fn reconcile(object: Arc<CompactObject>, context: Arc<Context>) -> Result<Action, Error> {
    let _counted = InFlight::count(&context.observers.registry.metrics().reconciles_in_flight);
    let uid = object.metadata.uid.as_deref().unwrap_or_default();
    let shard = context.observers.shards.shard_of(uid);
    let Some(guard) = context.observers.shards.guard(shard).await else {
        if let Some(namespace) = object.metadata.namespace.as_deref() {
            let key = AppKey::new(namespace, object.name_any());
            context.observers.registry.stop(&key).await;
        }
        return Ok(Action::await_change());
    };
    context.observers.shards.count_work(shard);
    let outcome = guard
        .while_held(reconcile_admitted(object.clone(), context.clone()))
        .await;
    match outcome {
        Some(Err(error)) if error.is_shard_left() => {
            tracing::info!(application = %object_name(&*object), shard, reason = %error, "reconcile ended before its next write; the shard's next holder carries on");
            Ok(Action::await_change())
        }
        Some(outcome) => outcome,
        None => {
            tracing::info!(application = %object_name(&*object), shard, "reconcile cut off: the shard's Lease is no longer this replica's");
            Ok(Action::await_change())
        }
    }
}

async fn reconcile_admitted(
    object: Arc<CompactObject>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    let application = match decode_compact::<Application>(&object) {
        Ok(application) => Arc::new(application),
        Err(error) => {
            context
                .undecodable
                .report(
                    &context.recorder,
                    &api_resource::<Application>(),
                    &*object,
                    &error,
                )
                .await;
            return Ok(Action::await_change());
        }
    };
    let name = application.name_any();
    let namespace = application
        .namespace()
        .ok_or_else(|| Error::NotNamespaced {
            application: name.clone(),
        })?;
    let api: Api<Application> = Api::namespaced(context.observers.resolver.client(), &namespace);
    let key = AppKey::new(&namespace, &name);
    let shard = context
        .observers
        .shards
        .shard_of(object.metadata.uid.as_deref().unwrap_or_default());
    // `finalizer()` may add the finalizer first thing: a write.
    if !context.observers.shards.holds(shard) {
        return Err(Error::ShardLeft);
    }
    finalizer(&api, OBSERVER_FINALIZER, application, |event| async {
        let reconciler = Reconciler {
            context: &context,
            api: &api,
            key: &key,
            shard,
        };
        match event {
            FinalizerEvent::Apply(application) => reconciler.apply(&application).await,
            FinalizerEvent::Cleanup(application) => reconciler.cleanup(&application).await,
        }
    })
    .await
    .map_err(|source| Error::Finalizer {
        application: key.to_string(),
        source: Box::new(source),
    })
}

/// One reconcile counted in `reconciles_in_flight` until dropped, however it ends
/// (cancellation included).
struct InFlight(prometheus_client::metrics::gauge::Gauge);

impl InFlight {
    fn count(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Failed reconciles are counted and retried after a pause.
pub fn error_policy(
    application: Arc<CompactObject>,
    error: &Error,
    context: Arc<Context>,
) -> Action {
    context.observers.registry.metrics().reconcile_errors.inc();
    tracing::warn!(application = %object_name(&*application), %error, "reconcile failed; retrying");
    Action::requeue(RETRY_AFTER)
}

struct Reconciler<'a> {
    context: &'a Context,
    api: &'a Api<Application>,
    key: &'a AppKey,
    /// The Application's shard.
    shard: u32,
}

/// An Application whose spec and schema are valid, ready to be acted on.
struct Accepted {
    manifest: Vec<Value>,
    schema: Arc<ObserverSchema>,
    period: Duration,
}

impl Reconciler<'_> {
    /// Whether the reconcile may start another write: the Application's shard is still held
    /// for work here, which it no longer is once this replica begins to stop. A write already
    /// sent is waited for; the rest is left to the shard's next holder.
    fn may_write(&self) -> Result<(), Error> {
        if self.context.observers.shards.holds(self.shard) {
            Ok(())
        } else {
            Err(Error::ShardLeft)
        }
    }

    async fn apply(&self, application: &Application) -> Result<Action, Error> {
        let accepted = match self.accept(application).await {
            Ok(accepted) => accepted,
            Err(verdict) => return self.refuse(application, verdict).await,
        };
        let status = application.status.clone().unwrap_or_default();
        let (action, _) = decide(application, &status, &accepted.schema);
        if action.is_none() {
            return self.keep(application, &accepted, status).await;
        }
        // The cache may lag behind this controller's own last write: decide again on the
        // Application as stored before touching any object.
        let fresh = self
            .api
            .get_status(&self.key.name)
            .await
            .map_err(|source| Error::Application {
                application: self.key.to_string(),
                source: Box::new(source),
            })?;
        if fresh.metadata.generation != application.metadata.generation {
            // A newer spec is on its way through the watch.
            return Ok(Action::await_change());
        }
        let status = fresh.status.clone().unwrap_or_default();
        match decide(&fresh, &status, &accepted.schema) {
            (Some(action), delta) => self.act(&fresh, &accepted, status, action, &delta).await,
            (None, _) => self.keep(&fresh, &accepted, status).await,
        }
    }

    /// Validates the spec, the manifest's objects and the observer schema.
    async fn accept(&self, application: &Application) -> Result<Accepted, ApplicationOutcome> {
        let invalid = |message: String| ApplicationOutcome::Failed {
            reason: reasons::INVALID_SPEC.into(),
            message,
        };
        let spec = &application.spec;
        if let Err(errors) = spec.validate() {
            let message = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
            return Err(invalid(message.join("; ")));
        }
        let period = spec
            .observe_period()
            .map_err(|error| invalid(error.to_string()))?;
        let manifest = manifest::normalize(
            &self.context.observers.resolver,
            &self.key.namespace,
            &spec.manifest,
        )
        .await
        .map_err(|problems| {
            invalid(
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        let schema = ObserverSchema::for_application(&manifest, &spec.observer_schema).map_err(
            |errors| ApplicationOutcome::Failed {
                reason: reasons::INVALID_OBSERVER_SCHEMA.into(),
                message: errors.to_string(),
            },
        )?;
        Ok(Accepted {
            manifest,
            schema: Arc::new(schema),
            period,
        })
    }

    /// An Application that cannot be applied: its observer stops (it could not heal with a
    /// broken schema) and the status says why.
    async fn refuse(
        &self,
        application: &Application,
        verdict: ApplicationOutcome,
    ) -> Result<Action, Error> {
        self.context.observers.registry.stop(self.key).await;
        let mut status = application.status.clone().unwrap_or_default();
        if verdict.apply_to(&mut status, application.metadata.generation) {
            self.write_status(&status).await?;
            if let ApplicationOutcome::Failed { reason, message } = &verdict {
                self.publish(application, EventType::Warning, reason, message)
                    .await;
            }
        }
        Ok(Action::await_change())
    }

    /// Nothing to do: the observer runs (it does not after a restart of the controller) and
    /// the status says so.
    async fn keep(
        &self,
        application: &Application,
        accepted: &Accepted,
        mut status: ApplicationStatus,
    ) -> Result<Action, Error> {
        if ApplicationOutcome::Running.apply_to(&mut status, application.metadata.generation) {
            self.write_status(&status).await?;
        }
        if !self.context.observers.registry.is_running(self.key) {
            // An observer writes: none starts for an Application whose shard this replica
            // no longer holds, or once it stops.
            self.may_write()?;
            self.start_observer(accepted, &status).await;
        }
        Ok(Action::await_change())
    }

    async fn act(
        &self,
        application: &Application,
        accepted: &Accepted,
        mut status: ApplicationStatus,
        action: ApplicationAction,
        delta: &ResourceDelta,
    ) -> Result<Action, Error> {
        let registry = &self.context.observers.registry;
        let lifecycle = observer_lifecycle(action);
        // A create finds no observer, unless one outlived the status that recorded the last
        // apply (a status wiped, or restored without it): that one is stopped as before an
        // update, so that no write of it lands after this action's status.
        if lifecycle.stopped_before || registry.is_running(self.key) {
            registry.stop(self.key).await;
        }
        registry.record(self.key, LifecycleEvent::ActionStarted(action));
        let spec_changed = status.observed_generation != application.metadata.generation;
        let progressing = ApplicationOutcome::Progressing {
            first_apply: action == ApplicationAction::Create,
        };
        if progressing.apply_to(&mut status, application.metadata.generation) {
            self.write_status(&status).await?;
        }
        let responses = match self.write_objects(accepted, &status, delta).await {
            Ok(responses) => responses,
            Err(Error::ShardLeft) => return Err(Error::ShardLeft),
            Err(error) => {
                let verdict = ApplicationOutcome::Degraded {
                    reason: reasons::APPLY_FAILED.into(),
                    message: error.to_string(),
                };
                if verdict.apply_to(&mut status, application.metadata.generation) {
                    self.write_status(&status).await?;
                }
                self.publish(
                    application,
                    EventType::Warning,
                    reasons::APPLY_FAILED,
                    &error.to_string(),
                )
                .await;
                return Err(error);
            }
        };
        status.last_applied_manifest =
            last_applied_manifest(&accepted.manifest, &accepted.schema, &responses);
        status.last_observed_manifest = last_observed_manifest(&accepted.schema, &responses);
        status.observed_generation = application.metadata.generation;
        ApplicationOutcome::Running.apply_to(&mut status, application.metadata.generation);
        self.write_status(&status).await?;
        registry.record(self.key, LifecycleEvent::ActionDone(action));
        let (reason, note) = match action {
            ApplicationAction::Create => ("Created", "the manifest's objects were created"),
            ApplicationAction::Update if spec_changed => (
                "Updated",
                "the manifest's objects were updated to the new spec",
            ),
            ApplicationAction::Update => {
                registry.healed(self.key);
                (
                    "Healed",
                    "drifted objects were brought back to the last applied state",
                )
            }
            ApplicationAction::Delete => ("Deleted", "the manifest's objects were deleted"),
        };
        if lifecycle.started_after {
            self.start_observer(accepted, &status).await;
        }
        self.publish(application, EventType::Normal, reason, note)
            .await;
        Ok(Action::await_change())
    }

    /// Applies every manifest object (deleting those the manifest no longer lists) and
    /// returns the API's answers.
    async fn write_objects(
        &self,
        accepted: &Accepted,
        status: &ApplicationStatus,
        delta: &ResourceDelta,
    ) -> Result<Vec<Value>, Error> {
        let resolver = &self.context.observers.resolver;
        let declared: Vec<ResourceId> = accepted
            .manifest
            .iter()
            .filter_map(|object| ResourceId::of(object).ok())
            .collect();
        for dropped in ids(&status.last_applied_manifest).filter(|id| !declared.contains(id)) {
            self.may_write()?;
            delete_object(resolver, &dropped).await?;
        }
        let mut responses = Vec::with_capacity(accepted.manifest.len());
        for (object, id) in accepted.manifest.iter().zip(&declared) {
            self.may_write()?;
            let mut response = apply_object(resolver, object).await?;
            let applied = status
                .last_applied_manifest
                .iter()
                .find(|applied| ResourceId::of(applied).is_ok_and(|other| &other == id))
                .unwrap_or(object);
            if let Some(modified) = delta.modified.iter().find(|modified| &modified.id == id) {
                // Its PATCH is a write of its own: the stop may have begun during the apply.
                self.may_write()?;
                if let Some(restored) = restore_list_bounds(resolver, applied, modified).await? {
                    response = restored;
                }
            }
            responses.push(response);
        }
        Ok(responses)
    }

    async fn cleanup(&self, application: &Application) -> Result<Action, Error> {
        let registry = &self.context.observers.registry;
        let action = ApplicationAction::Delete;
        if observer_lifecycle(action).stopped_before {
            registry.stop(self.key).await;
        }
        registry.record(self.key, LifecycleEvent::ActionStarted(action));
        let mut status = application.status.clone().unwrap_or_default();
        if ApplicationOutcome::Deleting.apply_to(&mut status, application.metadata.generation) {
            self.write_status(&status).await?;
        }
        for id in ids(&status.last_applied_manifest) {
            self.may_write()?;
            delete_object(&self.context.observers.resolver, &id).await?;
        }
        registry.record(self.key, LifecycleEvent::ActionDone(action));
        registry.retire(self.key);
        self.publish(
            application,
            EventType::Normal,
            "Deleted",
            "the manifest's objects were deleted",
        )
        .await;
        // `finalizer()` removes the finalizer once this clean-up succeeded: a write.
        self.may_write()?;
        Ok(Action::await_change())
    }

    async fn start_observer(&self, accepted: &Accepted, status: &ApplicationStatus) {
        let spec = ObserverSpec {
            key: self.key.clone(),
            shard: self.shard,
            schema: accepted.schema.clone(),
            last_applied: Arc::new(status.last_applied_manifest.clone()),
            stored: status.last_observed_manifest.clone(),
            period: accepted.period,
        };
        let observers = self.context.observers.clone();
        self.context
            .observers
            .registry
            .start(
                self.key,
                (&self.context.observers.shards, self.shard),
                |token| observer::run(observers, spec, token),
            )
            .await;
    }

    async fn write_status(&self, status: &ApplicationStatus) -> Result<(), Error> {
        self.may_write()?;
        let status = to_json(&self.key.to_string(), status)?;
        apply_status(self.api, &self.key.name, OBSERVER_FIELD_MANAGER, status).await?;
        Ok(())
    }

    /// Publishes an Event about the Application: a write too, so none once the shard is left.
    async fn publish(&self, application: &Application, type_: EventType, reason: &str, note: &str) {
        if self.may_write().is_err() {
            tracing::debug!(application = %self.key, reason, "Event not published: this replica no longer works on the Application's shard");
            return;
        }
        let event = KubeEvent {
            type_,
            reason: reason.to_owned(),
            note: Some(note.chars().take(1024).collect()),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = self
            .context
            .recorder
            .publish(&event, &application.object_ref(&()))
            .await
        {
            tracing::debug!(application = %self.key, %error, "cannot publish an Event");
        }
    }
}

/// The action `arbor_policy` chooses for `application` with `status`, and the delta it
/// was based on.
fn decide(
    application: &Application,
    status: &ApplicationStatus,
    schema: &ObserverSchema,
) -> (Option<ApplicationAction>, ResourceDelta) {
    let state = ApplicationState {
        deleting: false,
        created: status.observed_generation.is_some(),
        spec_changed: status.observed_generation != application.metadata.generation,
    };
    let delta = ResourceDelta::between(
        schema,
        &status.last_applied_manifest,
        &status.last_observed_manifest,
    );
    (state.next_action(&delta), delta)
}

fn ids(objects: &[Value]) -> impl Iterator<Item = ResourceId> + '_ {
    objects
        .iter()
        .filter_map(|object| ResourceId::of(object).ok())
}
