//! Asking the other replicas: with `--shards`, each replica's registry holds the sources of the
//! shards it holds and nothing else, so a question about a source or an object of another
//! shard is passed to the replicas that can answer it.
//!
//! Every replica writes where it serves gRPC on its own membership Lease
//! ([`arbor_runtime::Component::advertise_grpc`]); [`PeerReplicas`] calls the live ones with its
//! own client certificate and verifies theirs against its own `--grpc-advertise-server-name`
//! (a Lease says where to call, never whom to trust). A request passed on carries
//! [`FORWARDED_BY`] and is answered by its receiver from its own registry alone, so a request
//! makes one hop at most. An answer gathered from the replicas counts only when every shard is
//! covered ([`PeerReplicas::gather`]): each answer says, in its [`ANSWERED_SHARDS`] metadata,
//! the shards its replica answered for, those whose Lease it holds (or is giving up, see
//! [`arbor_runtime::Shards::answers_for`]) and whose every source it knows the state of, a round
//! there having finished since it took the shard
//! ([`answered_shards`](crate::controller::shard::answered_shards)). A shard nobody answered for
//! (nobody holds it, its holder did not answer, or has not finished its first rounds there)
//! fails the request rather than let it answer from part of the sources: a new holder does not
//! say "not declared" about a source it has not read yet. With one shard there are no peers
//! and nothing is ever passed on.
//!
//! A channel is kept per address while a live membership Lease names it, and dropped at the
//! next question once none does (pod IPs change with every restart).

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

/// gRPC metadata of an answer (or of an error such as "not a source of mine"): the shards it
/// answered for, comma-separated, empty for none.
pub const ANSWERED_SHARDS: &str = "arbor-answered-shards";

/// The [`ANSWERED_SHARDS`] value of `shards`.
pub fn encode_shards(shards: &BTreeSet<u32>) -> String {
    shards
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The shards an [`ANSWERED_SHARDS`] value names; `None` when it is malformed.
pub fn decode_shards(value: &str) -> Option<BTreeSet<u32>> {
    value
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| part.trim().parse().ok())
        .collect()
}

fn answered_shards_in(metadata: &tonic::metadata::MetadataMap) -> Option<BTreeSet<u32>> {
    let value = metadata.get(ANSWERED_SHARDS)?.to_str().ok()?;
    // A malformed list answers for nothing.
    Some(decode_shards(value).unwrap_or_default())
}

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
#[derive(Debug)]
pub struct PeerAnswer<R> {
    pub replica: String,
    /// The shards it said it answered for; `None` when it did not say (a replica of a version
    /// before [`ANSWERED_SHARDS`]: it answers for the shards it holds).
    pub shards: Option<BTreeSet<u32>>,
    pub answer: Result<R, Status>,
}

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
        self.keep_channels_of(&self.shards.peers());
        let peer = self.shards.peer(identity)?;
        Some(
            self.call(identity, &peer, message, patience, call)
                .await
                .map(Response::into_inner),
        )
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
        self.keep_channels_of(&peers);
        let questions = peers.iter().map(|(identity, peer)| async {
            let response = self
                .call(identity, peer, message.clone(), patience, &call)
                .await;
            PeerAnswer::of(identity, response)
        });
        futures::future::join_all(questions).await
    }

    /// Drops the channels to addresses no live replica serves at any more.
    fn keep_channels_of(&self, live: &BTreeMap<String, PeerAddress>) {
        let addresses: BTreeSet<&str> = live.values().map(|peer| peer.address.as_str()).collect();
        self.channels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|address, _| addresses.contains(address.as_str()));
    }

    /// The answers of [`PeerReplicas::ask_all`], once they cover every shard: each is in
    /// `answered_here` (the shards this replica answers for) or was answered for by a replica
    /// that answered (an error with code `expected`, such as "not a source of mine", counts as
    /// an answer). Otherwise `Unavailable` naming each shard left and why (its holder's error
    /// among them). A replica that holds no shard (one draining during a rollout) does not
    /// fail the request by not answering.
    pub fn gather<R>(
        &self,
        answers: Vec<PeerAnswer<R>>,
        expected: tonic::Code,
        answered_here: &BTreeSet<u32>,
    ) -> Result<Vec<R>, Status> {
        let mut coverage = Coverage::new(answered_here);
        let mut gathered = Vec::with_capacity(answers.len());
        for PeerAnswer {
            replica,
            shards,
            answer,
        } in answers
        {
            match answer {
                Ok(answer) => {
                    coverage.answered(&self.shards, replica, shards);
                    gathered.push(answer);
                }
                Err(status) if status.code() == expected => {
                    coverage.answered(&self.shards, replica, shards);
                }
                Err(status) => coverage.failed(replica, &status),
            }
        }
        let uncovered = self.uncovered(&coverage);
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

    /// The shards `coverage` leaves, each described for an error (with its holder's failure,
    /// if any).
    pub fn uncovered(&self, coverage: &Coverage) -> Vec<String> {
        self.gaps(coverage).map(|(_, gap)| gap).collect()
    }

    /// The shards `coverage` leaves for a while only, described as [`Self::uncovered`] does: a
    /// holder that failed or did not answer (it may be stopping), or no holder (a hand-over).
    /// Asking again then reaches the holder or its successor; a holder still on its first
    /// rounds, or one that never said where it serves, would be asked in vain.
    pub fn uncovered_for_now(&self, coverage: &Coverage) -> Vec<String> {
        self.gaps(coverage)
            .filter(|(passing, _)| *passing)
            .map(|(_, gap)| gap)
            .collect()
    }

    /// Each shard `coverage` leaves: whether the gap passes, and its description.
    fn gaps<'a>(&'a self, coverage: &'a Coverage) -> impl Iterator<Item = (bool, String)> + 'a {
        let me = self.shards.identity();
        (0..self.shards.count())
            .filter(|shard| !coverage.shards.contains(shard))
            .map(move |shard| match self.shards.holder(shard) {
                Some(holder) if holder == me || coverage.replicas.contains(&holder) => (
                    false,
                    format!(
                        "shard {shard} is held by {holder}, which has not finished a round of \
                         each of its sources there since it took the shard"
                    ),
                ),
                Some(holder) if coverage.failures.contains_key(&holder) => (
                    true,
                    format!(
                        "shard {shard} is held by {holder}: {}",
                        coverage.failures[&holder]
                    ),
                ),
                Some(holder) if self.shards.peer(&holder).is_none() => (
                    false,
                    format!(
                        "shard {shard} is held by {holder}, which did not say where it serves \
                         (--grpc-advertise-address)"
                    ),
                ),
                Some(holder) => (
                    true,
                    format!("shard {shard} is held by {holder}, which did not answer"),
                ),
                None => (
                    true,
                    format!("shard {shard} is held by no replica right now"),
                ),
            })
    }

    async fn call<T, R, F, Fut>(
        &self,
        identity: &str,
        peer: &PeerAddress,
        message: T,
        patience: Duration,
        call: F,
    ) -> Result<Response<R>, Status>
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
        answer.map_err(|status| {
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

impl<R> PeerAnswer<R> {
    fn of(replica: &str, response: Result<Response<R>, Status>) -> Self {
        let (shards, answer) = match response {
            Ok(response) => (
                answered_shards_in(response.metadata()),
                Ok(response.into_inner()),
            ),
            Err(status) => (answered_shards_in(status.metadata()), Err(status)),
        };
        Self {
            replica: replica.to_owned(),
            shards,
            answer,
        }
    }
}

/// Which shards a gathered answer covers, and who answered or failed.
#[derive(Debug, Default)]
pub struct Coverage {
    shards: BTreeSet<u32>,
    replicas: BTreeSet<String>,
    failures: BTreeMap<String, String>,
}

impl Coverage {
    /// Starts from the shards this replica answers for.
    pub fn new(answered_here: &BTreeSet<u32>) -> Self {
        Self {
            shards: answered_here.clone(),
            ..Self::default()
        }
    }

    /// `replica` answered, for `shards` (for those it holds, as seen here, when it did not say).
    pub fn answered(&mut self, view: &Shards, replica: String, shards: Option<BTreeSet<u32>>) {
        match shards {
            Some(shards) => self.shards.extend(shards),
            None => self.shards.extend(
                (0..view.count()).filter(|shard| view.holder(*shard).as_ref() == Some(&replica)),
            ),
        }
        self.replicas.insert(replica);
    }

    /// `replica` did not answer, with `status`.
    pub fn failed(&mut self, replica: String, status: &Status) {
        self.failures.insert(replica, status.message().to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_runtime::shards::ShardMetrics;

    fn peer(address: &str) -> PeerAddress {
        PeerAddress {
            address: address.to_owned(),
        }
    }

    #[tokio::test]
    async fn channels_to_addresses_no_live_replica_serves_at_are_dropped() {
        let shards = Shards::all(
            2,
            "a",
            ShardMetrics::default(),
            tokio_util::sync::CancellationToken::new(),
        );
        // Plaintext to others only from a replica that serves plaintext itself.
        shards.advertise(peer("http://127.0.0.1:1000"));
        let peers = PeerReplicas::new(shards, None, None);
        for address in ["http://127.0.0.1:1001", "http://127.0.0.1:1002"] {
            peers.channel(&peer(address)).expect("a loopback channel");
        }
        let live = BTreeMap::from([("b".to_owned(), peer("http://127.0.0.1:1002"))]);
        peers.keep_channels_of(&live);
        let kept: Vec<String> = peers.channels.lock().unwrap().keys().cloned().collect();
        assert_eq!(kept, ["http://127.0.0.1:1002"]);
        peers.keep_channels_of(&BTreeMap::new());
        assert!(peers.channels.lock().unwrap().is_empty());
    }

    /// A replica still on its first rounds of its own shards leaves them uncovered, but not for
    /// a while only: a drift report refused for that would be resent, holding up every later
    /// one, for as long as a source there cannot finish a round.
    #[tokio::test]
    async fn shards_of_a_holder_on_its_first_rounds_are_not_uncovered_for_now() {
        let shards = Shards::all(
            2,
            "a",
            ShardMetrics::default(),
            tokio_util::sync::CancellationToken::new(),
        );
        let peers = PeerReplicas::new(shards, None, None);
        let warming = Coverage::new(&BTreeSet::new());
        assert_eq!(peers.uncovered(&warming).len(), 2);
        assert_eq!(peers.uncovered_for_now(&warming), Vec::<String>::new());
        let answered = Coverage::new(&BTreeSet::from([0, 1]));
        assert!(peers.uncovered(&answered).is_empty());
    }

    #[test]
    fn answered_shards_round_trip_and_a_malformed_list_answers_for_nothing() {
        let shards = BTreeSet::from([0, 3, 5]);
        assert_eq!(decode_shards(&encode_shards(&shards)), Some(shards));
        assert_eq!(decode_shards(""), Some(BTreeSet::new()));
        assert_eq!(decode_shards("1,x"), None);
    }
}
