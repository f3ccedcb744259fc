//! Arbor on one machine: what `arborctl demo` runs, and what the end-to-end tests start
//! through `arbor-testkit`, which re-exports it rather than keeping a copy.
//!
//! Everything here runs on loopback and in directories the caller owns:
//!
//! - [`git_repo`]: a directory made into a git repository with the `git` command line, with
//!   commits, removals and bare copies;
//! - [`git_http`]: git's own `git http-backend` served over smart HTTP, with optional basic
//!   authentication, for a directory of repositories;
//! - [`ports`]: free loopback ports and waiting for a port to accept connections;
//! - [`process`]: a child process whose output goes to a log file, which can be waited on for
//!   a log line or a port, and which is stopped (SIGTERM, then SIGKILL) when dropped;
//! - [`binaries`]: the workspace's binaries in `target/<profile>/`, next to the running one;
//! - [`pki`] and [`tls`]: a certificate authority and one mutual-TLS identity per component,
//!   as files. Issuing certificates is the demo's and the tests' business: the controllers
//!   only load theirs, so this is the only place that links a certificate generator;
//! - [`cluster`]: applying YAML to a cluster, and bounded polling;
//! - [`system`]: `arbor-kube-emu` and the four controllers as processes, wired to each other
//!   over gRPC with mutual TLS;
//! - [`source`]: where a system's API server comes from, an emulator it starts or an existing
//!   cluster (the end-to-end tests' sharing of one is arbor-testkit's).
//!
//! Functions that wait take a timeout and fail with [`Error::Timeout`], naming what they
//! waited for, so nothing in the demo or a test can hang.

pub mod binaries;
pub mod cluster;
mod error;
pub mod git_http;
pub mod git_repo;
pub mod pki;
pub mod ports;
pub mod process;
pub mod source;
pub mod system;
pub mod tls;

pub use error::Error;
pub use git_http::{BasicAuth, GitHttpServer};
pub use git_repo::GitRepo;
pub use process::{Process, ProcessSpec};
pub use system::{System, SystemConfig};
