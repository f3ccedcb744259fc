//! Test support for Arbor: the system on one machine from [`arbor_demo`] (processes, the
//! loopback git server, certificates, the whole system on arbor-kube-emu), re-exported under
//! the names the tests use, and what only tests and benchmarks need on top of it:
//!
//! - [`release`]: the running system published in the emulator as the Helm chart's release
//!   would look (Services, ready pods whose ports the emulator port-forwards to the processes,
//!   the operators' certificate Secret), for arborctl's way in through a kubeconfig alone;
//! - [`crds`]: the committed CRD YAML installed as a user installs it, and a CRD loosened so
//!   that the API server stores objects the controllers cannot read;
//! - [`mod@bench`]: the one table shape of every benchmark's figures (measured, baseline, target);
//! - [`memory`]: a running process's peak and current resident memory, from `/proc`;
//! - [`source`] and [`shared`]: the end-to-end suite's existing cluster (from the environment),
//!   taken in turns by the tests and left as it was found;
//! - [`Cluster`]: an in-process arbor-kube-emu and its client, on which the controllers'
//!   integration tests run their controller; [`client_faults`]: faults only the client's side
//!   can make (a request that panics in its sender's task);
//! - [`eventually`] (from the demo, which waits the same way): the one bounded poll of every
//!   test, generic over the error type and the poll interval ([`Patience`]).
//!
//! A dev-dependency only: no binary links it.

pub mod bench;
pub mod client_faults;
pub mod crds;
pub mod emulator;
pub mod memory;
pub mod release;
pub mod shared;
pub mod source;

pub use arbor_demo::cluster::{Patience, TimedOut, eventually};
pub use emulator::Cluster;

pub use arbor_demo::{
    BasicAuth, Error, GitHttpServer, GitRepo, Process, ProcessSpec, System, SystemConfig, binaries,
    cluster, git_http, git_repo, pki, ports, process, system, tls,
};
