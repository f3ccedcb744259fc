//! Fetching a source's repository into its cache, and materialising a commit's tree for the
//! parser.
//!
//! # Model
//!
//! Every source ([`SourceId`]: a `GitTrack` or `ClusterGitTrack`) owns one cache directory
//! under the fetcher's cache root, holding a bare repository that is reused from fetch to fetch
//! (see the `cache` module for the layout). A fetch ([`Fetcher::fetch`]):
//!
//! 1. lists the remote's refs and finds the object the [`GitReference`] names (a branch, a tag,
//!    a commit id, or a short name resolved tag-first like `git rev-parse`);
//! 2. downloads only when the cache lacks that object, shallow (depth 1) where the transport
//!    allows; a commit id already in the cache needs no network at all;
//! 3. resolves the commit and returns its id, time and summary ([`FetchedCommit`]).
//!
//! [`Fetcher::checkout`] then writes the tree of a fetched commit at a `subPath` into a
//! directory of its own and returns the path (see the `checkout` module: atomic, named by tree
//! id, the last few kept, symbolic links never materialised).
//!
//! # Transports and credentials
//!
//! `https://` / `http://` with [`Credentials::Basic`] or [`Credentials::Token`] (or none),
//! `ssh://` and scp-like `user@host:path` with [`Credentials::SshKey`], and `file://` only
//! when [`FetchSettings::allow_file_repositories`] is set and the path does not lead into the
//! cache root (see the `local` module). An ssh
//! server's host key must be listed in the key's `known_hosts`; an unknown or different key is
//! refused ([`HostKeyError`]). TLS certificates are checked by libgit2 against the system trust
//! store. Proxy settings from the environment are not used.
//!
//! # Deadline
//!
//! Every fetch returns within [`FetchSettings::timeout`] (plus a few seconds' grace). ssh and
//! plain http go through a loopback relay that cuts the connections at the deadline (see the
//! `deadline_relay` module); the progress callbacks abort any transfer still running when it
//! passes; and the caller stops waiting for the fetch thread at the deadline in any case (the
//! only bound for an https server that accepts a connection and never answers).
//!
//! A fetch can also be stopped at once ([`FetchStop`], when its replica stops): the caller
//! stops waiting within `STOP_POLL`, the relay cuts the connections and the progress
//! callbacks abort the transfer, so the fetch fails as on a broken connection. Nothing it left
//! is trusted by the next fetch: libgit2 moves no ref and indexes no pack of a failed fetch,
//! and `refs/arbor/fetched` is set only once the commit is in the cache.
//!
//! # Errors
//!
//! [`FetchError`] names the source and the URL (never a password or token) and carries a
//! [`FetchErrorKind`]: authentication, repository or reference not found, network, timeout,
//! host key, invalid source, cache, other.
//!
//! The API is blocking (libgit2 is); async callers use `spawn_blocking`. Fetches and checkouts
//! of one source are serialised by a lock on its cache directory; different sources run in
//! parallel.

mod cache;
pub use cache::hex;
mod callbacks;
mod checkout;
mod classify;
mod credentials;
mod deadline_relay;
mod error;
mod known_hosts;
mod local;
mod remote_url;
mod session;
mod source;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use credentials::{Credentials, DEFAULT_SSH_USERNAME, DEFAULT_TOKEN_USERNAME};
pub use error::{CacheRootError, CheckoutError, CheckoutErrorKind, FetchError, FetchErrorKind};
pub use known_hosts::HostKeyError;
pub use source::{GitReference, GitSource, InvalidReference, SourceId, SourceKind};

use cache::{CacheKey, SourceCache};
use remote_url::{GitUrl, Transport};
use session::Session;

/// How long past its deadline a fetch may take to unwind after the relay cut its connections
/// before the caller stops waiting for it.
const CANCELLATION_GRACE: Duration = Duration::from_secs(5);

/// How soon a fetch notices it was stopped ([`FetchStop`]) while nothing else wakes it.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(50);

/// Tells fetches to give up at once (see the module docs); cheap to clone, set from any thread.
#[derive(Clone, Debug, Default)]
pub struct FetchStop(Arc<AtomicBool>);

impl FetchStop {
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// How fetches behave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSettings {
    /// The longest a fetch may take, connecting included.
    pub timeout: Duration,
    /// Whether to download only the wanted commit (depth 1) where the server allows it.
    pub shallow: bool,
    /// How many checkout directories to keep per source (at least 1).
    pub keep_checkouts: usize,
    /// Whether `file://` URLs may be fetched (tests and demos; see the `local` module).
    pub allow_file_repositories: bool,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            timeout: Duration::from_secs(120),
            shallow: true,
            keep_checkouts: 3,
            allow_file_repositories: false,
        }
    }
}

/// The commit a fetch resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedCommit {
    /// The full hexadecimal commit id.
    pub commit: String,
    /// The committer time.
    pub time: SystemTime,
    /// The first paragraph of the commit message, on one line.
    pub summary: String,
    /// Objects received in this fetch (0 when the cache already had the commit).
    pub received_objects: usize,
    /// Bytes received in this fetch.
    pub received_bytes: usize,
}

/// Fetches sources into per-source caches under one root directory.
#[derive(Clone, Debug)]
pub struct Fetcher {
    cache_root: PathBuf,
    key: CacheKey,
    settings: FetchSettings,
}

impl Fetcher {
    /// A fetcher caching under `cache_root`, which is created as needed, with the key that
    /// names its source directories (made there the first time).
    pub fn new(
        cache_root: impl Into<PathBuf>,
        settings: FetchSettings,
    ) -> Result<Self, CacheRootError> {
        let cache_root = cache_root.into();
        let key = CacheKey::load_or_create(&cache_root).map_err(|source| CacheRootError {
            path: cache_root.clone(),
            source,
        })?;
        Ok(Fetcher {
            cache_root,
            key,
            settings,
        })
    }

    pub fn settings(&self) -> &FetchSettings {
        &self.settings
    }

    /// The keyed digest of a Secret's payload (`None` for any other object), under this
    /// instance's key (see the `cache` module); see [`arbor_policy::secret`].
    pub fn payload_digest(&self, object: &serde_json::Value) -> Option<String> {
        arbor_policy::secret::canonical_payload(object)
            .map(|payload| self.key.payload_digest(&payload))
    }

    /// The cache directory of a source.
    pub fn cache_dir(&self, id: &SourceId) -> PathBuf {
        self.cache_root.join(self.key.directory_name(id))
    }

    /// Brings the commit that `source.reference` names into the source's cache.
    ///
    /// Returns within [`FetchSettings::timeout`] (plus a short grace for cancellation to take
    /// effect) whatever the server does. The work runs on a thread of its own: where the
    /// connection cannot be cut (https, see the `deadline_relay` module), a fetch that outlives
    /// its deadline is abandoned to finish or fail on that thread, still holding the source's
    /// cache lock, and later fetches of the same source time out until it lets go.
    pub fn fetch(&self, source: &GitSource) -> Result<FetchedCommit, FetchError> {
        self.fetch_unless_stopped(source, &FetchStop::default())
    }

    /// [`Fetcher::fetch`], given up within `STOP_POLL` once `stop` is set
    /// ([`FetchErrorKind::Stopped`]).
    pub fn fetch_unless_stopped(
        &self,
        source: &GitSource,
        stop: &FetchStop,
    ) -> Result<FetchedCommit, FetchError> {
        let deadline = Instant::now() + self.settings.timeout;
        let timed_out = || {
            FetchError::new(
                &source.id,
                &remote_url::redact(&source.url),
                FetchErrorKind::Timeout {
                    after: self.settings.timeout,
                },
            )
        };
        let stopped = || {
            FetchError::new(
                &source.id,
                &remote_url::redact(&source.url),
                FetchErrorKind::Stopped,
            )
        };
        let (done, finished) = mpsc::channel();
        let (fetcher, owned_source, owned_stop) = (self.clone(), source.clone(), stop.clone());
        thread::Builder::new()
            .name("git-fetch".into())
            .spawn(move || {
                let _ = done.send(fetcher.fetch_before(&owned_source, deadline, &owned_stop));
            })
            .map_err(|err| {
                FetchError::new(
                    &source.id,
                    &remote_url::redact(&source.url),
                    FetchErrorKind::Other {
                        detail: format!("starting the fetch thread: {err}"),
                    },
                )
            })?;
        let waited = deadline + CANCELLATION_GRACE;
        loop {
            let remaining = waited.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(timed_out());
            }
            match finished.recv_timeout(remaining.min(STOP_POLL)) {
                Ok(fetched) => return fetched,
                // The thread winds down on its own (see the module docs); nothing waits for it.
                Err(mpsc::RecvTimeoutError::Timeout) if stop.is_stopped() => {
                    return Err(stopped());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(timed_out()),
            }
        }
    }

    fn fetch_before(
        &self,
        source: &GitSource,
        deadline: Instant,
        stop: &FetchStop,
    ) -> Result<FetchedCommit, FetchError> {
        let redacted_url = remote_url::redact(&source.url);
        let fail = |kind| FetchError::new(&source.id, &redacted_url, kind);
        if stop.is_stopped() {
            return Err(fail(FetchErrorKind::Stopped));
        }
        if let Ok(url) = GitUrl::parse(&source.url)
            && url.transport == Transport::File
        {
            local::check(
                &url.path,
                self.settings.allow_file_repositories,
                &self.cache_root,
            )
            .map_err(fail)?;
        }
        let cache = SourceCache::open_for_fetch(&self.cache_dir(&source.id), &redacted_url)
            .map_err(fail)?;

        if let GitReference::Commit(sha) = &source.reference
            && let Some(commit) = cached_commit(&cache, sha)
        {
            return Ok(describe(&commit, (0, 0)));
        }

        let session = Session::start(
            &source.url,
            &source.credentials,
            &self.settings,
            deadline,
            stop,
        )
        .map_err(fail)?;
        let oid = session
            .fetch_commit(&cache.repo, &source.reference)
            .map_err(fail)?;
        let commit = cache.repo.find_commit(oid).map_err(|err| {
            fail(FetchErrorKind::Cache {
                path: cache.repo.path().to_owned(),
                detail: err.message().to_owned(),
            })
        })?;
        let fetched = describe(&commit, session.received());
        tracing::debug!(
            source = %source.id,
            url = %redacted_url,
            commit = %fetched.commit,
            received_objects = fetched.received_objects,
            "fetched"
        );
        Ok(fetched)
    }

    /// Writes the tree of `commit` (fetched before) at `sub_path` into a directory of its own
    /// and returns that directory. `sub_path` is relative to the repository root; `""` is the
    /// root.
    pub fn checkout(
        &self,
        id: &SourceId,
        commit: &str,
        sub_path: &str,
    ) -> Result<PathBuf, CheckoutError> {
        let fail = |kind| CheckoutError::new(id, commit, kind);
        let cache = SourceCache::open_existing(&self.cache_dir(id))
            .map_err(|err| {
                fail(CheckoutErrorKind::Git {
                    detail: err.to_string(),
                })
            })?
            .ok_or_else(|| fail(CheckoutErrorKind::NotFetched))?;
        checkout::checkout_tree(
            &cache.repo,
            &cache.checkouts_dir(),
            commit,
            sub_path,
            self.settings.keep_checkouts.max(1),
        )
        .map_err(fail)
    }
}

fn cached_commit<'r>(cache: &'r SourceCache, sha: &str) -> Option<git2::Commit<'r>> {
    let oid = git2::Oid::from_str(sha).ok()?;
    cache.repo.find_commit(oid).ok()
}

fn describe(
    commit: &git2::Commit<'_>,
    (received_objects, received_bytes): (usize, usize),
) -> FetchedCommit {
    let seconds = commit.time().seconds();
    let time = if seconds >= 0 {
        UNIX_EPOCH + Duration::from_secs(seconds.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
    };
    FetchedCommit {
        commit: commit.id().to_string(),
        time,
        summary: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default()).into_owned(),
        received_objects,
        received_bytes,
    }
}
