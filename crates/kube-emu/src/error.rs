//! The library's own failures: starting the server, TLS material, token files, kubeconfigs.
//! (Failures of API requests are [`crate::status::ApiError`] and travel as `Status` objects.)

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {problem}")]
    TokenFile {
        path: String,
        line: usize,
        problem: String,
    },
    #[error("{path}: {problem}")]
    DenyRules { path: String, problem: String },
    #[error("--service-address {value:?}: expected namespace/name:port=host:port")]
    ServiceAddress { value: String },
    #[error("generating the TLS certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("configuring TLS: {0}")]
    Tls(#[from] rustls::Error),
}
