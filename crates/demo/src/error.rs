//! The one error type of the harness: every variant names what it was doing.

use std::path::PathBuf;
use std::time::Duration;

/// Why a harness step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {args}` in {dir} failed: {stderr}")]
    Git {
        dir: PathBuf,
        args: String,
        stderr: String,
    },
    #[error("{binary} is not built in {dir}: run `cargo build --workspace --bins` first")]
    MissingBinary { binary: String, dir: PathBuf },
    #[error(
        "{process} exited ({status}) while waiting for {waiting_for}; last lines of {log}:\n{tail}"
    )]
    Exited {
        process: String,
        status: std::process::ExitStatus,
        waiting_for: String,
        log: PathBuf,
        tail: String,
    },
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
    #[error(transparent)]
    Pki(#[from] crate::pki::PkiError),
    #[error(transparent)]
    Client(#[from] arbor_runtime::client::ClientError),
}

impl From<crate::cluster::TimedOut> for Error {
    fn from(timed_out: crate::cluster::TimedOut) -> Self {
        Error::Timeout {
            what: timed_out.what,
            after: timed_out.after,
        }
    }
}

impl Error {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }

    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let what = what.into();
        move |source| Error::Kube { what, source }
    }
}
