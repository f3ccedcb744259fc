//! # arbor-runtime
//!
//! The wiring that every Arbor binary shares, so that each `main.rs` only parses its own flags
//! and hands a [`Runtime`]-built context to its controller:
//!
//! - [`component`]: the start-up sequence of a controller process, built on the rest;
//! - [`discovery`]: which API resource serves a kind, cached, for dynamic objects;
//! - [`flags`]: the common command-line flags (each with an environment variable);
//! - [`telemetry`]: tracing output as text or JSON;
//! - [`client`]: a Kubernetes client from a kubeconfig, a context, or the in-cluster account;
//! - [`metrics`] and [`admin`]: a prometheus-client registry with one sub-registry per
//!   component, served with `/healthz` and `/readyz` (ready only once caches have synced);
//! - [`lease`]: leader election on `coordination.k8s.io` Leases;
//! - [`listener`]: the one accept loop of every listener (webhook HTTPS, gRPC, admin), with
//!   bounded connections, TLS-handshake, idle and HTTP/2 keep-alive timeouts, and load shedding
//!   that is counted and logged;
//! - [`grpc`]: gRPC servers and channels over rustls, with mutual TLS, where plaintext is only
//!   accepted on loopback addresses; [`authz`]: which client certificate may call which method;
//! - [`pki`]: a small CA that issues mutual-TLS material for the demo and tests;
//! - [`shutdown`]: SIGTERM / SIGINT handling that lets in-flight work finish within a bound.
//!
//! Nothing here knows about Arbor's resources; the controllers bring those.

pub mod admin;
pub mod authz;
pub mod client;
pub mod component;
pub mod discovery;
pub mod flags;
pub mod grpc;
pub mod lease;
pub mod listener;
pub mod metrics;
pub mod pki;
pub mod shutdown;
pub mod telemetry;

pub use component::{Component, StartError};
pub use flags::CommonArgs;
pub use shutdown::Shutdown;
