//! Processes and servers for Arbor's local demo and its end-to-end tests.
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
//! - [`memory`]: a running process's peak and current resident memory, from `/proc`;
//! - [`tls`]: a certificate authority and one mutual-TLS identity per component, as files;
//! - [`cluster`]: applying YAML to a cluster, and bounded polling;
//! - [`system`]: `arbor-kube-emu` and the four controllers as processes, wired to each other
//!   over gRPC with mutual TLS: what `arborctl demo` runs and what the end-to-end tests start;
//! - [`release`]: the running system published in the emulator as the Helm chart's release
//!   would look (Services, ready pods whose ports the emulator port-forwards to the processes,
//!   the operators' certificate Secret), for arborctl's way in through a kubeconfig alone;
//! - [`source`]: where a system's API server comes from, an emulator it starts or an existing
//!   cluster (`ARBOR_E2E_KUBECONFIG`), and [`shared`]: taking turns on such a cluster and
//!   leaving it as it was found.
//!
//! Functions that wait take a timeout and fail with [`Error::Timeout`], naming what they
//! waited for, so nothing in a test or the demo can hang.

pub mod binaries;
pub mod cluster;
mod error;
pub mod git_http;
pub mod git_repo;
pub mod memory;
pub mod ports;
pub mod process;
pub mod release;
pub mod shared;
pub mod source;
pub mod system;
pub mod tls;

pub use error::Error;
pub use git_http::{BasicAuth, GitHttpServer};
pub use git_repo::GitRepo;
pub use process::{Process, ProcessSpec};
pub use system::{System, SystemConfig};
