//! Fetch and checkout errors. Each names the source and the URL (without password or token),
//! and carries a class the controller can act on (retry, report a credential problem, …).

use std::path::PathBuf;
use std::time::Duration;

use super::known_hosts::HostKeyError;
use super::source::SourceId;

/// The cache root or its key could not be made or read.
#[derive(Debug, thiserror::Error)]
#[error("cache directory {}: {source}", path.display())]
pub struct CacheRootError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A fetch that failed.
#[derive(Debug, thiserror::Error)]
#[error("fetching {source_id} from {url}: {kind}")]
pub struct FetchError {
    source_id: SourceId,
    url: String,
    // Boxed: the error travels through every `Result` of a fetch.
    kind: Box<FetchErrorKind>,
}

impl FetchError {
    pub(crate) fn new(source_id: &SourceId, redacted_url: &str, kind: FetchErrorKind) -> Self {
        FetchError {
            source_id: source_id.clone(),
            url: redacted_url.to_owned(),
            kind: Box::new(kind),
        }
    }

    pub fn source_id(&self) -> &SourceId {
        &self.source_id
    }

    /// The repository URL, with any password or token removed.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn kind(&self) -> &FetchErrorKind {
        &self.kind
    }
}

/// What went wrong in a fetch.
#[derive(Debug, thiserror::Error)]
pub enum FetchErrorKind {
    /// The server refused the credentials, or wanted some and none were given.
    #[error("authentication failed: {detail}")]
    Authentication { detail: String },
    /// The server (or the file system, for `file://`) has no repository at that path.
    #[error("repository not found: {detail}")]
    RepositoryNotFound { detail: String },
    /// The repository has no such branch, tag or commit.
    #[error("{reference} not found in the repository")]
    ReferenceNotFound { reference: String },
    /// The server could not be reached or the connection broke.
    #[error("network error: {detail}")]
    Network { detail: String },
    /// The fetch did not finish within its deadline and was cancelled.
    #[error("timed out after {after:?}")]
    Timeout { after: Duration },
    /// The ssh server's host key was refused.
    #[error(transparent)]
    HostKey(#[from] HostKeyError),
    /// The source cannot be fetched as configured (URL, credentials for another transport).
    #[error("invalid source: {detail}")]
    InvalidSource { detail: String },
    /// The local cache directory could not be read or written.
    #[error("cache {}: {detail}", path.display())]
    Cache { path: PathBuf, detail: String },
    /// Anything else libgit2 reported.
    #[error("{detail}")]
    Other { detail: String },
    /// Given up unfinished because its replica stops ([`FetchStop`](crate::fetch::FetchStop)).
    #[error("given up: this replica is stopping")]
    Stopped,
}

/// A checkout that failed.
#[derive(Debug, thiserror::Error)]
#[error("checking out {commit} of {source_id}: {kind}")]
pub struct CheckoutError {
    source_id: SourceId,
    commit: String,
    kind: CheckoutErrorKind,
}

impl CheckoutError {
    pub(crate) fn new(source_id: &SourceId, commit: &str, kind: CheckoutErrorKind) -> Self {
        CheckoutError {
            source_id: source_id.clone(),
            commit: commit.to_owned(),
            kind,
        }
    }

    pub fn source_id(&self) -> &SourceId {
        &self.source_id
    }

    pub fn commit(&self) -> &str {
        &self.commit
    }

    pub fn kind(&self) -> &CheckoutErrorKind {
        &self.kind
    }
}

/// What went wrong in a checkout.
#[derive(Debug, thiserror::Error)]
pub enum CheckoutErrorKind {
    /// The commit is not in the source's cache (fetch it first).
    #[error("the commit is not in the cache")]
    NotFetched,
    #[error("subPath {sub_path:?} does not exist at this commit")]
    SubPathNotFound { sub_path: String },
    #[error("subPath {sub_path:?} is not a directory at this commit")]
    SubPathNotADirectory { sub_path: String },
    /// A subPath or tree entry that would escape the checkout directory.
    #[error("unsafe path {path:?}")]
    UnsafePath { path: String },
    /// A directory nests deeper than [`arbor_source::files::MAX_DEPTH`]; nothing below it is written.
    #[error(
        "directory {path:?} is nested more than {limit} directories deep; Arbor checks out at most {limit}"
    )]
    TooDeep { path: String, limit: usize },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the repository: {detail}")]
    Git { detail: String },
}
