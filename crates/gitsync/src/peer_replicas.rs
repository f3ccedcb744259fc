//! Asking the other replicas: with `--shards`, each replica's registry holds the sources of the
//! shards it holds and nothing else, so a question about a source or an object of another
//! shard is passed to the replicas that can answer it.
//!
//! Every replica writes where it serves gRPC on its membership Lease
//! ([`arbor_runtime::Component::advertise_grpc`]); [`PeerReplicas`] calls the live ones with its
//! own client certificate. A request passed on carries [`FORWARDED_BY`] and is answered by its
//! receiver from its own registry alone, so a request makes one hop at most, whatever the
//! replicas believe about each other during a hand-over. With one shard there are no peers
//! and nothing is ever passed on.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_runtime::Shards;
use arbor_runtime::grpc::{self, TlsMaterial};
use arbor_runtime::shards::PeerAddress;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// gRPC metadata of a request passed on by another replica: that replica's identity.
pub const FORWARDED_BY: &str = "arbor-forwarded-by";

/// How long a question to another replica may take before it counts as unanswered.
pub const QUESTION_PATIENCE: Duration = Duration::from_secs(10);

/// The other live replicas of this gitsync, as the membership Leases say.
#[derive(Debug, Clone)]
pub struct PeerReplicas {
    shards: Shards,
    tls: Option<TlsMaterial>,
    /// One lazily connected channel per address, reused by every question.
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

/// What one replica answered; `Err` also when it could not be reached in time.
pub type PeerAnswer<R> = (String, Result<R, Status>);

impl PeerReplicas {
    pub fn new(shards: Shards, tls: Option<TlsMaterial>) -> Self {
        Self {
            shards,
            tls,
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
    pub async fn ask_all<T, R, F, Fut>(&self, message: &T, call: F) -> Vec<PeerAnswer<R>>
    where
        T: Clone,
        F: Fn(SyncServiceClient<Channel>, Request<T>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let peers = self.shards.peers();
        let questions = peers.iter().map(|(identity, peer)| async {
            let answer = self
                .call(identity, peer, message.clone(), QUESTION_PATIENCE, &call)
                .await;
            (identity.clone(), answer)
        });
        futures::future::join_all(questions).await
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
        if let Ok(value) = self.shards.identity().parse() {
            request.metadata_mut().insert(FORWARDED_BY, value);
        }
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
            peer.server_name.as_deref(),
        )
        .map_err(|error| error.to_string())?
        .connect_lazy();
        channels.insert(peer.address.clone(), channel.clone());
        Ok(channel)
    }
}
