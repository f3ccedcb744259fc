//! # arbor-runtime
//!
//! The wiring that every Arbor binary shares, so that each `main.rs` only parses its own flags
//! and hands the context [`component::Component`] builds to its controller:
//!
//! - [`api_error`]: API server errors rendered as kube-apiserver's Status message;
//! - [`compact_object`]: a watched object held small in a cache (metadata typed, the rest as
//!   JSON text), for kinds a controller caches whole;
//! - [`component`]: the start-up sequence of a controller process, built on the rest;
//! - [`decode`]: watching a kind as dynamic objects and decoding each one, so that one object
//!   of the wrong shape is reported and skipped instead of stopping the kind's watch;
//! - [`discovery`]: which API resource serves a kind, cached, for dynamic objects;
//! - [`flags`]: the common command-line flags (each with an environment variable);
//! - [`telemetry`]: tracing output as text or JSON;
//! - [`client`]: a Kubernetes client from a kubeconfig, a context, or the in-cluster account;
//! - [`metrics`] and [`admin`]: a prometheus-client registry with one sub-registry per
//!   component, served with `/healthz` and `/readyz` (ready only once caches have synced);
//! - [`lease`]: leader election on `coordination.k8s.io` Leases;
//! - [`shards`]: `--shards N`, one component's work shared by replicas through shard Leases;
//! - [`listener`]: the one accept loop of every listener (webhook HTTPS, gRPC, admin), with
//!   bounded connections, TLS-handshake, idle and HTTP/2 keep-alive timeouts, and load shedding
//!   that is counted and logged;
//! - [`grpc`]: gRPC servers and channels over rustls, with mutual TLS, where plaintext is only
//!   accepted on loopback addresses; [`authz`]: which client certificate may call which method;
//! - [`throttle`]: every client retries requests the API server throttled (429) or could not
//!   serve (503), after `Retry-After` or a backoff, with jitter;
//! - [`shutdown`]: SIGTERM / SIGINT handling that lets in-flight work finish within a bound;
//! - [`allocator`]: at most two glibc malloc arenas per controller process.
//!
//! Nothing here knows about Arbor's resources; the controllers bring those.

pub mod admin;
pub mod allocator;
pub mod api_error;
pub mod authz;
pub mod client;
pub mod compact_object;
pub mod component;
pub mod decode;
pub mod discovery;
pub mod flags;
pub mod grpc;
pub mod lease;
pub mod listener;
pub mod metrics;
pub mod shards;
pub mod shutdown;
pub mod telemetry;
pub mod throttle;

pub use component::{Component, LeaseGate, LostLease, StartError};
pub use flags::CommonArgs;
pub use shards::{ShardArgs, ShardGuard, ShardMetrics, Shards};
pub use shutdown::Shutdown;
