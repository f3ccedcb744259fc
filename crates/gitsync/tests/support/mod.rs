//! Real servers and repositories for the fetch tests, all on loopback and in temporary
//! directories.
// Each test binary uses a different part of the support code.
#![allow(dead_code)]

pub mod git_repo;
pub mod http_server;
pub mod silent_server;
pub mod sshd;
pub mod tls_server;

use std::time::Duration;

/// Runs `work` on its own thread and fails the test if it has not finished within `limit`, so
/// a fetch that ignores its deadline fails instead of hanging the test run.
pub fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    finished
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}"))
}

use arbor_gitsync::fetch::{Credentials, GitReference, GitSource, SourceId};

/// A `GitTrack` source `tests/<name>`.
pub fn source(
    name: &str,
    url: &str,
    reference: GitReference,
    credentials: Credentials,
) -> GitSource {
    GitSource {
        id: SourceId::git_track("tests", name),
        url: url.to_owned(),
        reference,
        credentials,
    }
}

pub fn branch(name: &str) -> GitReference {
    GitReference::Branch(name.to_owned())
}

/// Fetches `source` into a fresh cache, expecting the fetch to fail.
pub fn fetch_error(source: &GitSource) -> arbor_gitsync::fetch::FetchError {
    let cache = tempfile::tempdir().expect("temporary directory");
    let settings = arbor_gitsync::fetch::FetchSettings {
        allow_file_repositories: true,
        ..Default::default()
    };
    let fetcher = arbor_gitsync::fetch::Fetcher::new(cache.path(), settings).expect("a cache");
    match fetcher.fetch(source) {
        Ok(fetched) => panic!("the fetch should fail, and it fetched {}", fetched.commit),
        Err(err) => err,
    }
}

/// Asserts that a fetch error is of the kind `pattern` matches, showing it otherwise.
macro_rules! assert_kind {
    ($err:expr, $pattern:pat) => {{
        let err = &$err;
        assert!(matches!(err.kind(), $pattern), "unexpected error: {err}");
    }};
}
pub(crate) use assert_kind;
