//! One Application's observer.
//!
//! It follows the Application's objects through the [`SharedWatches`] (one watch per kind and
//! namespace, whichever Applications' objects it serves) and checks again every
//! `observePeriod` as a floor, re-reading
//! the objects and the Application's stored status, so an event it missed or a status someone
//! else overwrote is caught. Each check projects the live objects through the observer schema
//! ([`observe`]); when the projection differs from the stored last observed manifest, it is
//! written to `status.lastObservedManifest`, and the controller, seeing that status and last
//! applied manifest differ, re-applies. Only observed fields count: a change to anything the
//! schema leaves out is never written, so never healed.
//!
//! A stopped observer ([`ObserverRegistry::stop`]) sends no write from then on: its reads in
//! flight are dropped, and cancellation is looked at right before the status write, so the
//! registry waits only for a write already sent (kube-apiserver would carry that one out
//! anyway). The replica beginning to stop cancels every observer the same way, at once
//! ([`crate::registry`]).
//!
//! With `--shards`, every status write is also made under the Application's shard
//! ([`ShardGuard`](arbor_runtime::ShardGuard)): it is taken right before the write, so no write
//! is sent once this replica no longer holds the shard (taken, given up, or not renewed within
//! the renew deadline), even before the registry stops the observer; and while the write is in
//! flight the shard is not handed over.

use std::sync::Arc;
use std::time::Duration;

use arbor_api::Application;
use arbor_policy::observe::{Observation, ObserverSchema, ResourceDelta, ResourceId, observe};
use arbor_proto::v1::{DriftEvent, DriftKind};
use futures::stream::{self, BoxStream, StreamExt};
use kube::Api;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::convert::{self, application_ref, resource_ref};
use crate::error::Error;
use crate::registry::{AppKey, ObserverRegistry};
use crate::resolve::Resolver;
use crate::shared_watch::{ObjectEvent, SharedWatches, Subscription, observed_form};
use crate::status::{OBSERVER_WATCH_FIELD_MANAGER, apply_status};

/// Pause between attempts to start an observer whose objects' kinds cannot be resolved.
const START_RETRY: Duration = Duration::from_secs(5);

/// What an observer needs to know about its Application when it starts.
#[derive(Debug, Clone)]
pub struct ObserverSpec {
    pub key: AppKey,
    /// The Application's shard: the observer writes only while this replica holds it.
    pub shard: u32,
    pub schema: Arc<ObserverSchema>,
    /// The last applied manifest, to tell drift from a mere change of the observed view.
    pub last_applied: Arc<Vec<Value>>,
    /// The last observed manifest as stored in the status when the observer starts.
    pub stored: Vec<Value>,
    pub period: Duration,
}

/// What observers share: the API, the watches, the registry, the drift channel, and the
/// shards this replica works on (`--shards`).
#[derive(Debug, Clone)]
pub struct ObserverContext {
    pub resolver: Resolver,
    pub watches: SharedWatches,
    pub registry: ObserverRegistry,
    pub drift: broadcast::Sender<DriftEvent>,
    pub shards: arbor_runtime::Shards,
}

/// Runs the observer of `spec` until `token` is cancelled.
pub async fn run(context: ObserverContext, spec: ObserverSpec, token: CancellationToken) {
    // Discovery may fail for a while (API server restarting): keep trying until stopped.
    let (mut observer, mut events) = loop {
        match Observer::new(context.clone(), spec.clone(), token.clone()).await {
            Ok(started) => break started,
            Err(error) => {
                tracing::warn!(application = %spec.key, %error, "observer cannot start yet");
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(START_RETRY) => {}
                }
            }
        }
    };
    let mut tick = tokio::time::interval(observer.spec.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate; the watches' initial lists do that job.
    tick.tick().await;
    loop {
        let outcome = tokio::select! {
            biased;
            () = token.cancelled() => return,
            event = events.next() => match event {
                Some((index, event)) => observer.on_event(index, event).await,
                None => return,
            },
            _ = tick.tick() => observer.full_check().await,
        };
        if let Err(error) = outcome {
            tracing::warn!(application = %observer.spec.key, %error, "observer check failed; retrying at the next event or period");
        }
    }
}

/// An event of the object of the schema resource at the index.
type IndexedEvent = (usize, ObjectEvent);

struct Observer {
    context: ObserverContext,
    spec: ObserverSpec,
    apps: Api<Application>,
    objects: Vec<Api<kube::core::DynamicObject>>,
    /// Held for as long as the observer runs: dropping them unsubscribes.
    _subscriptions: Vec<Subscription>,
    /// The live object of each schema resource, `None` when absent; shared with the watch
    /// that keeps it.
    live: Vec<Option<Arc<Value>>>,
    /// Whether each object's watch has listed.
    listed: Vec<bool>,
    /// Cancelled when the observer is stopped: no write is sent after that.
    token: CancellationToken,
}

/// What a read racing the observer's cancellation gave.
enum Read<T> {
    Done(T),
    /// The observer was stopped meanwhile; the read was dropped.
    Cancelled,
}

impl Observer {
    /// The observer of `spec`, subscribed to its objects, and their events.
    async fn new(
        context: ObserverContext,
        spec: ObserverSpec,
        token: CancellationToken,
    ) -> Result<(Self, BoxStream<'static, IndexedEvent>), Error> {
        let count = spec.schema.resources.len();
        let mut objects = Vec::with_capacity(count);
        let mut subscriptions = Vec::with_capacity(count);
        let mut streams = Vec::with_capacity(count);
        for (index, resource) in spec.schema.resources.iter().enumerate() {
            objects.push(context.resolver.api_for(&resource.id).await?);
            let (subscription, events) = context.watches.subscribe(&resource.id).await?;
            subscriptions.push(subscription);
            streams.push(
                UnboundedReceiverStream::new(events)
                    .map(move |event| (index, event))
                    .boxed(),
            );
        }
        let observer = Self {
            apps: Api::namespaced(context.resolver.client(), &spec.key.namespace),
            context,
            spec,
            objects,
            _subscriptions: subscriptions,
            live: vec![None; count],
            listed: vec![false; count],
            token,
        };
        Ok((observer, stream::select_all(streams).boxed()))
    }

    async fn on_event(&mut self, index: usize, event: ObjectEvent) -> Result<(), Error> {
        match event {
            ObjectEvent::Applied(object) => self.live[index] = Some(object),
            ObjectEvent::Deleted => self.live[index] = None,
            ObjectEvent::Listed(object) => {
                self.live[index] = object;
                self.listed[index] = true;
            }
        }
        if self.listed.iter().all(|listed| *listed) {
            self.check().await
        } else {
            Ok(())
        }
    }

    /// `read`, unless the observer is stopped first: a read's answer is of no use then, and
    /// waiting for it would hold up whoever stops the observer.
    async fn unless_cancelled<T>(&self, read: impl Future<Output = T>) -> Read<T> {
        tokio::select! {
            biased;
            () = self.token.cancelled() => Read::Cancelled,
            value = read => Read::Done(value),
        }
    }

    /// Re-reads every object and the stored status, then checks; stops without a check when
    /// the observer is stopped meanwhile.
    async fn full_check(&mut self) -> Result<(), Error> {
        for index in 0..self.spec.schema.resources.len() {
            let resource = &self.spec.schema.resources[index];
            let read = self.unless_cancelled(self.objects[index].get_opt(&resource.id.name));
            let Read::Done(object) = read.await else {
                return Ok(());
            };
            let object = object.map_err(|source| Error::Read {
                object: resource.id.clone(),
                source: Box::new(source),
            })?;
            self.live[index] = object
                .map(|object| {
                    observed_form(object, &resource.id.api_version, &resource.id.kind)
                        .map(Arc::new)
                        .map_err(|source| Error::Encode {
                            what: resource.id.to_string(),
                            source,
                        })
                })
                .transpose()?;
            self.listed[index] = true;
        }
        let read = self.unless_cancelled(self.apps.get_status(&self.spec.key.name));
        let Read::Done(application) = read.await else {
            return Ok(());
        };
        let application = application.map_err(|source| Error::Application {
            application: self.spec.key.to_string(),
            source: Box::new(source),
        })?;
        self.spec.stored = application
            .status
            .map(|status| status.last_observed_manifest)
            .unwrap_or_default();
        self.check().await
    }

    /// Compares the live objects with the stored status; writes the status when they differ.
    async fn check(&mut self) -> Result<(), Error> {
        self.context.registry.checked(&self.spec.key);
        let live: Vec<Value> = self
            .live
            .iter()
            .flatten()
            .map(|object| Value::clone(object))
            .collect();
        let Observation::Changed(observed) = observe(&self.spec.schema, &self.spec.stored, &live)
        else {
            return Ok(());
        };
        // Stopped while reading or comparing: the write would land after the stop.
        if self.token.is_cancelled() {
            return Ok(());
        }
        let shards = &self.context.shards;
        let Read::Done(Some(_held)) = self.unless_cancelled(shards.guard(self.spec.shard)).await
        else {
            tracing::debug!(application = %self.spec.key, shard = self.spec.shard, "observed change not written: the observer was stopped, or this replica no longer holds the Application's shard");
            return Ok(());
        };
        apply_status(
            &self.apps,
            &self.spec.key.name,
            OBSERVER_WATCH_FIELD_MANAGER,
            json!({ "lastObservedManifest": observed }),
        )
        .await?;
        let delta = ResourceDelta::between(&self.spec.schema, &self.spec.last_applied, &observed);
        self.spec.stored = observed;
        if !delta.is_empty() {
            self.context.registry.drifted(&self.spec.key);
            self.publish(&delta);
        }
        Ok(())
    }

    fn publish(&self, delta: &ResourceDelta) {
        let application = application_ref(&self.spec.key);
        let modified = delta.modified.iter().map(|modified| {
            let observed = self
                .live
                .iter()
                .flatten()
                .find(|live| ResourceId::of(live).is_ok_and(|id| id == modified.id))
                .map(|live| live.to_string())
                .unwrap_or_default();
            let fields = modified
                .differences
                .iter()
                .map(|difference| convert::field_name(&difference.path))
                .collect();
            convert::drift_event(
                resource_ref(&modified.id),
                DriftKind::Modified,
                fields,
                observed,
            )
        });
        let deleted = delta.new.iter().map(|id| {
            convert::drift_event(
                resource_ref(id),
                DriftKind::Deleted,
                Vec::new(),
                String::new(),
            )
        });
        for mut event in modified.chain(deleted) {
            event.application = Some(application.clone());
            // Nobody listening is fine: WatchDrift streams are optional.
            let _ = self.context.drift.send(event);
        }
    }
}
