//! Leader election on `coordination.k8s.io/v1` Leases.
//!
//! Several replicas of a controller run for availability; only the holder of the component's
//! Lease acts. The protocol is the one client-go's leader election uses, so Arbor's Leases
//! read the same to `kubectl` and to other tooling:
//!
//! - a candidate creates the Lease when it does not exist, or takes it over when it is free
//!   (released, no holder) or expired;
//! - expiry is judged by the candidate's own clock: a Lease is expired when its record has not
//!   changed for `leaseDurationSeconds` since this candidate first saw that record. Comparing
//!   the holder's `renewTime` with the local clock would make clock skew between nodes decide
//!   leadership;
//! - every write carries the `resourceVersion` it read, so two candidates racing for an
//!   expired Lease cannot both win: the loser gets 409 Conflict and stays a follower;
//! - the holder renews every `renew_interval`, and steps down once its renew deadline
//!   ([`renew_deadline`]: two thirds of the lease duration, as client-go's defaults) has passed
//!   since it sent its last successful renewal, a renewal the API server never answers
//!   included: the other candidates count a lease duration from no earlier than that send,
//!   so the holder has stopped leading before any of them can see the Lease expired;
//! - on shutdown the holder releases the Lease (empties `holderIdentity`), so a successor
//!   takes over at its next attempt instead of after a full lease duration.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A Lease operation failed for a reason other than losing a race.
#[derive(Debug, thiserror::Error)]
#[error("lease {namespace}/{name}: {source}")]
pub struct LeaseError {
    namespace: String,
    name: String,
    source: kube::Error,
}

/// How long after sending a renewal that succeeded a holder still acts as the holder: two
/// thirds of `lease_duration` (client-go's defaults are 10 s of 15 s). The rest of the lease
/// duration is the margin in which the holder's writers stop before anyone else can take over.
pub fn renew_deadline(lease_duration: Duration) -> Duration {
    lease_duration * 2 / 3
}

/// What one candidate needs to know to take part.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// Unique per replica: the pod name in a cluster.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_interval: Duration,
}

/// Who holds a Lease, as one candidate judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub holder: Option<String>,
    /// Unrenewed for a lease duration by this candidate's clock.
    pub expired: bool,
}

/// The outcome of one election step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Someone else holds a valid Lease (`None` while the holder is unknown, after a lost race).
    Follower {
        holder: Option<String>,
    },
}

/// One candidate for one Lease.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The last Lease record seen (holder, renew time, transitions) and when it was first seen.
    observed: Option<(ObservedRecord, Instant)>,
    /// Annotations this candidate writes on the Lease whenever it creates or renews it (what
    /// the holder tells the other candidates, such as where to reach it).
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ObservedRecord {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    transitions: Option<i32>,
}

impl ObservedRecord {
    fn of(spec: &LeaseSpec) -> Self {
        Self {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions,
        }
    }
}

impl LeaderElector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            annotations: BTreeMap::new(),
        }
    }

    /// Sets `key` to `value` on the Lease from the next creation or renewal on.
    pub fn annotate(&mut self, key: &str, value: &str) {
        self.annotations.insert(key.to_owned(), value.to_owned());
    }

    /// One election step: create, renew or take over the Lease when this candidate may.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Role, LeaseError> {
        let Some(current) = self.read().await? else {
            return self.create().await;
        };
        let Observation { holder, expired } = self.observe(&current);
        let held_by_me = holder.as_deref() == Some(self.config.identity.as_str());
        if !held_by_me && holder.is_some() && !expired {
            return Ok(Role::Follower { holder });
        }

        let mut next = current;
        let spec = next.spec.get_or_insert_with(LeaseSpec::default);
        let stamp = MicroTime(Timestamp::now());
        if !held_by_me {
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(stamp.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(stamp);
        spec.lease_duration_seconds = Some(self.config.lease_duration.as_secs() as i32);
        if !self.annotations.is_empty() {
            next.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .extend(self.annotations.clone());
        }
        self.write(
            |api, name| async move { api.replace(&name, &PostParams::default(), &next).await },
        )
        .await
    }

    /// Notes `lease` as read now (by this candidate or a list of every Lease) and says who
    /// holds it and whether that holder's Lease expired by this candidate's clock: unchanged
    /// for its `leaseDurationSeconds` since this candidate first saw the record.
    pub fn observe(&mut self, lease: &Lease) -> Observation {
        let spec = lease.spec.clone().unwrap_or_default();
        let record = ObservedRecord::of(&spec);
        let now = Instant::now();
        let first_seen = match &self.observed {
            Some((seen, at)) if *seen == record => *at,
            _ => now,
        };
        self.observed = Some((record.clone(), first_seen));
        let duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(self.config.lease_duration);
        Observation {
            expired: now.duration_since(first_seen) >= duration,
            holder: record.holder,
        }
    }

    /// Notes that the Lease does not exist (deleted, or never created).
    pub fn observe_absent(&mut self) {
        self.observed = None;
    }

    /// Gives the Lease up by deleting it, if this candidate still holds it: the delete is
    /// conditional on the version read, so a Lease another replica took meanwhile stays. A
    /// delete (not an emptied holder) makes a hand-over plain in an audit log: every write to
    /// a shard's Lease by a replica then means it holds the shard, and only a delete ends that.
    pub async fn surrender(&mut self) -> Result<(), LeaseError> {
        let Some(current) = self.read().await? else {
            return Ok(());
        };
        let holder = current
            .spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.as_deref());
        if holder != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: current.metadata.uid.clone(),
                resource_version: current.metadata.resource_version.clone(),
            }),
            ..kube::api::DeleteParams::default()
        };
        self.observed = None;
        match self.api.delete(&self.config.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => {
                Ok(())
            }
            Err(e) => Err(self.error(e)),
        }
    }

    /// Gives the Lease up if this candidate holds it, so a successor need not wait for expiry.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(mut current) = self.read().await? else {
            return Ok(());
        };
        let spec = current.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(1);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => Ok(()),
            // Someone else wrote it meanwhile: it is no longer ours to release.
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }

    async fn read(&self) -> Result<Option<Lease>, LeaseError> {
        self.api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error(e))
    }

    async fn create(&mut self) -> Result<Role, LeaseError> {
        let stamp = MicroTime(Timestamp::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                acquire_time: Some(stamp.clone()),
                renew_time: Some(stamp),
                lease_duration_seconds: Some(self.config.lease_duration.as_secs() as i32),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        self.write(|api, _| async move { api.create(&PostParams::default(), &lease).await })
            .await
    }

    /// Performs a create or replace; losing the race (409) means following, not failing.
    async fn write<F, Fut>(&mut self, op: F) -> Result<Role, LeaseError>
    where
        F: FnOnce(Api<Lease>, String) -> Fut,
        Fut: std::future::Future<Output = kube::Result<Lease>>,
    {
        match op(self.api.clone(), self.config.name.clone()).await {
            Ok(written) => {
                let record = ObservedRecord::of(&written.spec.unwrap_or_default());
                self.observed = Some((record, Instant::now()));
                Ok(Role::Leader)
            }
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_already_exists() => {
                Ok(Role::Follower { holder: None })
            }
            Err(e) => Err(self.error(e)),
        }
    }

    fn error(&self, source: kube::Error) -> LeaseError {
        LeaseError {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// Campaigns until `shutdown`, publishing whether this candidate leads. On shutdown the
    /// Lease is released before the task ends.
    pub fn spawn(mut self, shutdown: CancellationToken) -> Leadership {
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let deadline = renew_deadline(self.config.lease_duration);
            // When the last renewal that succeeded was sent.
            let mut last_renewal = Instant::now();
            loop {
                let leading = *tx.borrow();
                let sent = Instant::now();
                // A holder's attempt may run only until its renew deadline: a request the API
                // server never answers must not keep it leading past the point where another
                // candidate can take over. A follower's is bounded the same way, so it tries
                // again rather than hang.
                let left = if leading {
                    deadline.saturating_sub(last_renewal.elapsed())
                } else {
                    deadline
                };
                let attempt = tokio::time::timeout(left, self.try_acquire_or_renew()).await;
                match attempt {
                    Ok(Ok(Role::Leader)) => {
                        last_renewal = sent;
                        if !leading {
                            tracing::info!(lease = %self.config.name, identity = %self.config.identity, "became leader");
                        }
                        tx.send_replace(true);
                    }
                    Ok(Ok(Role::Follower { holder })) => {
                        if leading {
                            tracing::warn!(lease = %self.config.name, ?holder, "lost leadership");
                        }
                        tx.send_replace(false);
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "leader election step failed");
                    }
                    Err(_) => {
                        tracing::warn!(lease = %self.config.name, waited = ?left, "leader election step not answered in time");
                    }
                }
                if *tx.borrow() && last_renewal.elapsed() >= deadline {
                    tracing::warn!(lease = %self.config.name, ?deadline, "could not renew within the renew deadline; stepping down before the Lease can expire");
                    tx.send_replace(false);
                }
                // A holder renews before its deadline even when the interval is set longer.
                let pause = if *tx.borrow() {
                    self.config
                        .renew_interval
                        .min(deadline.saturating_sub(last_renewal.elapsed()))
                } else {
                    self.config.renew_interval
                };
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(pause) => {}
                }
            }
            if *tx.borrow() {
                tx.send_replace(false);
                if let Err(error) = self.release().await {
                    tracing::warn!(%error, "could not release the lease");
                }
            }
        });
        Leadership { state: rx, task }
    }
}

/// Whether this replica leads, as the campaign task sees it.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        *self.state.borrow()
    }

    /// A receiver that changes whenever leadership is gained or lost.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.state.clone()
    }

    /// Waits until this replica leads (or the campaign ended).
    pub async fn acquired(&self) {
        let mut state = self.state.clone();
        // An error means the campaign task ended; nothing more will change.
        let _ = state.wait_for(|leading| *leading).await;
    }

    /// Waits until this replica no longer leads.
    pub async fn lost(&self) {
        let mut state = self.state.clone();
        let _ = state.wait_for(|leading| !*leading).await;
    }

    /// Waits for the campaign to end (after shutdown, with the Lease released).
    pub async fn finished(self) {
        if let Err(error) = self.task.await {
            tracing::error!(%error, "leader election task failed");
        }
    }
}
