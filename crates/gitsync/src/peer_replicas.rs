//! Asking the other replicas: with `--shards`, each replica's registry holds the sources of the
//! shards it holds and nothing else, so a question about a source or an object of another
//! shard is passed to the replicas that can answer it.
//!
//! Every replica writes where it serves gRPC on its own membership Lease
//! ([`arbor_runtime::Component::advertise_grpc`]); [`PeerReplicas`] calls the live ones with its
//! own client certificate and verifies theirs against its own `--grpc-advertise-server-name`
//! (a Lease says where to call, never whom to trust). A request passed on carries
//! [`FORWARDED_BY`] and is answered by its receiver from its own registry alone, so a request
//! makes one hop at most. An answer gathered from the replicas counts only when every shard's
//! holder answered ([`PeerReplicas::gather`]): a shard nobody holds, or whose holder did not
//! answer, fails the request rather than let it answer from part of the sources. With one shard
//! there are no peers and nothing is ever passed on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_runtime::Shards;
use arbor_runtime::grpc::{self, TlsMaterial};
use arbor_runtime::shards::PeerAddress;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// gRPC metadata of a request passed on by another replica: that replica's identity.
pub const FORWARDED_BY: &str = "arbor-forwarded-by";

/// How long a question to another replica may take before it counts as unanswered, for
/// questions an operator asks.
pub const QUESTION_PATIENCE: Duration = Duration::from_secs(10);

/// The same for questions on the admission path (the webhook's GetDeclared), which must be
/// answered within the webhook's own deadline (`--gitsync-timeout`, 2 s by default).
pub const ADMISSION_PATIENCE: Duration = Duration::from_millis(1500);

/// How long connecting to another replica may take: a pod IP that no longer answers must
/// fail fast, not hold every question for the whole patience.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The other live replicas of this gitsync, as the membership Leases say.
#[derive(Debug, Clone)]
pub struct PeerReplicas {
    shards: Shards,
    tls: Option<TlsMaterial>,
    /// The name every replica's serving certificate carries (`--grpc-advertise-server-name`).
    server_name: Option<String>,
    /// One lazily connected channel per address, reused by every question.
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

/// What one replica answered; `Err` also when it could not be reached in time.
pub type PeerAnswer<R> = (String, Result<R, Status>);

impl PeerReplicas {
    pub fn new(shards: Shards, tls: Option<TlsMaterial>, server_name: Option<String>) -> Self {
        Self {
            shards,
            tls,
            server_name,
            channels: Arc::default(),
        }
    }

    /// Whether `request` was passed on by another replica (answered from here alone).
    pub fn forwarded<T>(request: &Request<T>) -> bool {
        request.metadata().contains_key(FORWARDED_BY)
    }

    /// Asks replica `identity`; `None` when it is not live or did not say where it serves.
    pub async fn ask<T, R, F, Fut>(
        &self,
        identity: &str,
        message: T,
        patience: Duration,
        call: F,
    ) -> Option<Result<R, Status>>
    where
        F: FnOnce(SyncServiceClient<Channel>, Request<T>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let peer = self.shards.peer(identity)?;
        Some(self.call(identity, &peer, message, patience, call).await)
    }

    /// Asks every other live replica at once; the answers come in identity order.
    pub async fn ask_all<T, R, F, Fut>(
        &self,
        message: &T,
        patience: Duration,
        call: F,
    ) -> Vec<PeerAnswer<R>>
    where
        T: Clone,
        F: Fn(SyncServiceClient<Channel>, Request<T>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let peers = self.shards.peers();
        let questions = peers.iter().map(|(identity, peer)| async {
            let answer = self
                .call(identity, peer, message.clone(), patience, &call)
                .await;
            (identity.clone(), answer)
        });
        futures::future::join_all(questions).await
    }

    /// The answers of [`PeerReplicas::ask_all`], once they cover every shard: each is held by
    /// this replica or by one that answered (an error with code `expected`, such as "not a
    /// source of mine", counts as an answer). Otherwise `Unavailable` naming each shard left
    /// and why (its holder's error among them). A replica that holds no shard (one draining
    /// during a rollout) does not fail the request by not answering.
    pub fn gather<R>(
        &self,
        answers: Vec<PeerAnswer<R>>,
        expected: tonic::Code,
    ) -> Result<Vec<R>, Status> {
        let mut answered = BTreeSet::new();
        let mut failures = BTreeMap::new();
        let mut gathered = Vec::with_capacity(answers.len());
        for (replica, answer) in answers {
            match answer {
                Ok(answer) => {
                    answered.insert(replica);
                    gathered.push(answer);
                }
                Err(status) if status.code() == expected => {
                    answered.insert(replica);
                }
                Err(status) => {
                    failures.insert(replica, status.message().to_owned());
                }
            }
        }
        let uncovered = self.uncovered(&answered, &failures);
        if uncovered.is_empty() {
            Ok(gathered)
        } else {
            Err(Status::unavailable(format!(
                "cannot answer for every source: {}; retry once the shards are held and their \
                 holders reachable",
                uncovered.join("; ")
            )))
        }
    }

    /// The shards neither held here nor by a replica in `answered`, described for an error
    /// (with the holder's entry in `failures`, if any).
    pub fn uncovered(
        &self,
        answered: &BTreeSet<String>,
        failures: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let me = self.shards.identity();
        (0..self.shards.count())
            .filter_map(|shard| match self.shards.holder(shard) {
                Some(holder) if holder == me || answered.contains(&holder) => None,
                Some(holder) if failures.contains_key(&holder) => Some(format!(
                    "shard {shard} is held by {holder}: {}",
                    failures[&holder]
                )),
                Some(holder) if self.shards.peer(&holder).is_none() => Some(format!(
                    "shard {shard} is held by {holder}, which did not say where it serves \
                     (--grpc-advertise-address)"
                )),
                Some(holder) => Some(format!(
                    "shard {shard} is held by {holder}, which did not answer"
                )),
                None => Some(format!("shard {shard} is held by no replica right now")),
            })
            .collect()
    }

    async fn call<T, R, F, Fut>(
        &self,
        identity: &str,
        peer: &PeerAddress,
        message: T,
        patience: Duration,
        call: F,
    ) -> Result<R, Status>
    where
        F: FnOnce(SyncServiceClient<Channel>, Request<T>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let unreachable = |reason: String| {
            Status::unavailable(format!(
                "replica {identity} (at {}) did not answer: {reason}",
                peer.address
            ))
        };
        let channel = self.channel(peer).map_err(unreachable)?;
        let mut request = Request::new(message);
        // Always set, whatever the identity: without it the receiver would pass it on again.
        let forwarder = MetadataValue::try_from(self.shards.identity())
            .unwrap_or_else(|_| MetadataValue::from_static("gitsync"));
        request.metadata_mut().insert(FORWARDED_BY, forwarder);
        let answer = tokio::time::timeout(patience, call(SyncServiceClient::new(channel), request))
            .await
            .map_err(|_| unreachable(format!("no answer within {patience:?}")))?;
        answer.map(Response::into_inner).map_err(|status| {
            if status.code() == tonic::Code::Unavailable {
                unreachable(status.message().to_owned())
            } else {
                status
            }
        })
    }

    fn channel(&self, peer: &PeerAddress) -> Result<Channel, String> {
        // Plaintext only between replicas that serve plaintext themselves (loopback tests):
        // a Lease must not turn a TLS installation's calls into plaintext ones.
        let plaintext_here = self
            .shards
            .advertised()
            .is_some_and(|own| own.address.starts_with("http://"));
        if peer.address.starts_with("http://") && !plaintext_here {
            return Err(format!(
                "{} is plaintext and this replica serves TLS",
                peer.address
            ));
        }
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(channel) = channels.get(&peer.address) {
            return Ok(channel.clone());
        }
        let channel = grpc::endpoint_verified_as(
            &peer.address,
            self.tls.as_ref(),
            self.server_name.as_deref(),
        )
        .map_err(|error| error.to_string())?
        .connect_timeout(CONNECT_TIMEOUT)
        .connect_lazy();
        channels.insert(peer.address.clone(), channel.clone());
        Ok(channel)
    }
}
