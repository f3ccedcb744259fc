//! arbor-kube-emu: an in-memory Kubernetes API server for Arbor's tests and local demo.
//!
//! **Test and demo infrastructure only — never run it in production.** It keeps everything in
//! memory, has no persistence, no RBAC (by default every authenticated request is allowed; see
//! [`authz`]) and no controllers beyond the few the API semantics need.
//!
//! It speaks the Kubernetes REST API closely enough that kube-rs (Api, watcher, reflector,
//! Controller), kubectl and other clients behave as against kube-apiserver for what Arbor does:
//! discovery, get / list / watch / create / update / patch / server-side apply / delete /
//! deletecollection on built-in kinds and on kinds added by CustomResourceDefinitions, with
//! label and field selectors, paging, bookmarks, 410 Gone, optimistic concurrency, generation,
//! status subresources, finalizers, owner-reference garbage collection, namespace termination,
//! and errors as kube-apiserver's `Status` objects.
//!
//! ## Model
//!
//! One lock guards the state: the registry of served kinds (`registry`) and the object store
//! (`store`), which gives every write the next value of a global revision (the resourceVersion)
//! and keeps a bounded history of changes. Watches and paged lists read that history; anything older than
//! the window is answered with 410 Gone so clients relist. Work that controllers do in a real
//! cluster (garbage collection, namespace and CRD clean-up) happens in `lifecycle` within the
//! same write.
//!
//! A request goes through `api`: route, authenticate ([`auth`]), authorize ([`authz`]), then a
//! verb handler in `handlers`. Patches and server-side apply are computed by [`patch`].
//!
//! ## Use from tests
//!
//! Start a server on a free loopback port, build whatever client the test needs from its
//! kubeconfig, stop it at the end (dropping it stops it too, without waiting):
//!
//! ```no_run
//! # async fn example() -> Result<(), arbor_kube_emu::Error> {
//! use arbor_kube_emu::{KubeEmu, StaticToken};
//!
//! // Plain HTTP, no authentication: everyone is the cluster admin.
//! let emu = KubeEmu::start().await?;
//! let yaml = emu.kubeconfig_yaml();
//! // In a test with kube as a dev-dependency:
//! //   let config = kube::Config::from_custom_kubeconfig(
//! //       kube::config::Kubeconfig::from_yaml(&yaml)?, &Default::default()).await?;
//! //   let client = kube::Client::try_from(config)?;
//! emu.shutdown().await;
//!
//! // HTTPS with a generated CA, bearer tokens required, a small watch history.
//! let emu = KubeEmu::builder()
//!     .tls(true)
//!     .token(StaticToken::new("s3cret", "alice", "1001", &["system:masters"]))
//!     .history_window(1_000)
//!     .start()
//!     .await?;
//! emu.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//! emu.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! The binary `arbor-kube-emu` does the same from the command line (see [`cli`]).

mod api;
pub mod auth;
pub mod authz;
pub mod cli;
mod discovery;
mod error;
mod handlers;
mod kinds;
mod kubeconfig;
mod lifecycle;
mod managed;
mod meta;
mod openapi;
pub mod patch;
mod present;
mod protobuf;
mod registry;
mod route;
mod selector;
mod server;
mod state;
mod status;
mod store;
mod table;
mod tls;
mod validation;

pub use auth::StaticToken;
pub use error::Error;
pub use server::{KubeEmu, KubeEmuBuilder};
