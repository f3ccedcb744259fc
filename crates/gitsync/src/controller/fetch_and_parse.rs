//! Fetching and parsing a source off the async runtime (git2 and the file system block).

use std::time::{Duration, Instant, SystemTime};

use arbor_policy::layout::{Layout, SourceError};

use super::error::ControllerError;
use super::held_state::{HeldObject, HeldState};
use crate::fetch::{
    Credentials, FetchErrorKind, FetchStop, FetchedCommit, Fetcher, GitReference, GitSource,
    SourceId,
};
use arbor_source::error::LoadError;
use arbor_source::source::{LoadOptions, load_held};
use tokio_util::sync::CancellationToken;

/// What the repository holds at the fetched commit.
#[derive(Debug)]
pub struct Loaded {
    pub commit: String,
    pub commit_time: SystemTime,
    /// `None` when the commit is the last good one and was not parsed again. Its objects are
    /// held as gitsync keeps them from the moment each file is parsed ([`HeldObject`]).
    pub parsed: Option<Result<HeldState, Vec<SourceError>>>,
    /// How long each step took, for the round's timing line.
    pub timings: LoadTimings,
}

/// Time spent fetching, checking out and parsing.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimings {
    pub fetch: Duration,
    pub checkout: Duration,
    /// Parsing the files and holding their objects ([`HeldObject::hold`]), done together.
    pub parse: Duration,
}

/// What to fetch and how to read it.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub id: SourceId,
    pub url: String,
    pub reference: GitReference,
    pub credentials: Credentials,
    pub sub_path: String,
    pub layout: Layout,
    /// The commit whose state is already known: not checked out or parsed again.
    pub known_commit: Option<String>,
}

/// Fetches, checks out and parses in a blocking task, unless `stopping` (the replica's stop)
/// comes first: the fetch is then given up at once ([`FetchStop`]) and the answer is
/// [`ControllerError::ShardLeft`], the shard's next holder fetching again. A fetch may take
/// minutes (a slow or silent server) where the shutdown grace period is seconds: waited for,
/// it would leave the Lease to expire instead of being handed over. A checkout or parse under
/// way (local, bounded work) is let finish, so the blocking task never outlives the stop.
pub async fn fetch_and_load(
    fetcher: &Fetcher,
    request: LoadRequest,
    stopping: &CancellationToken,
) -> Result<Loaded, ControllerError> {
    if stopping.is_cancelled() {
        return Err(ControllerError::ShardLeft);
    }
    let fetcher = fetcher.clone();
    let stop = FetchStop::default();
    let worker_stop = stop.clone();
    let mut load =
        tokio::task::spawn_blocking(move || load_blocking(&fetcher, request, &worker_stop));
    let joined = tokio::select! {
        biased;
        joined = &mut load => joined,
        () = stopping.cancelled() => {
            stop.stop();
            load.await
        }
    };
    joined.map_err(|join| ControllerError::Worker(join.to_string()))?
}

fn load_blocking(
    fetcher: &Fetcher,
    request: LoadRequest,
    stop: &FetchStop,
) -> Result<Loaded, ControllerError> {
    let source = GitSource {
        id: request.id.clone(),
        url: request.url,
        reference: request.reference,
        credentials: request.credentials,
    };
    let started = Instant::now();
    let FetchedCommit { commit, time, .. } = match fetcher.fetch_unless_stopped(&source, stop) {
        Err(error) if matches!(error.kind(), FetchErrorKind::Stopped) => {
            return Err(ControllerError::ShardLeft);
        }
        fetched => fetched?,
    };
    if stop.is_stopped() {
        return Err(ControllerError::ShardLeft);
    }
    let mut timings = LoadTimings {
        fetch: started.elapsed(),
        ..LoadTimings::default()
    };
    let id = request.id;
    if request.known_commit.as_deref() == Some(commit.as_str()) {
        return Ok(Loaded {
            commit,
            commit_time: time,
            parsed: None,
            timings,
        });
    }
    let started = Instant::now();
    // The whole tree is checked out and the loader resolves subPath, so a missing subPath is
    // reported like every other source error (ARB1006), with its code.
    let checkout = fetcher.checkout(&id, &commit, "")?;
    timings.checkout = started.elapsed();
    let started = Instant::now();
    let options = LoadOptions {
        layout: request.layout,
        sub_path: request.sub_path,
        ..LoadOptions::default()
    };
    let parsed = match load_held(&checkout, &options, HeldObject::hold) {
        Ok(state) => Ok(state),
        Err(LoadError::Invalid(errors)) => Err(errors),
        Err(error) => return Err(ControllerError::Load(format!("{id} at {commit}: {error}"))),
    };
    timings.parse = started.elapsed();
    Ok(Loaded {
        commit,
        commit_time: time,
        parsed: Some(parsed),
        timings,
    })
}
