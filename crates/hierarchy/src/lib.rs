//! arbor-hierarchy: the namespace tree of seeds/001 (Accurate) and seeds/003 (Innu).
//!
//! # Model
//!
//! The controller observes, asks arbor-policy, and acts:
//!
//! - **Observe** ([`watch`], [`index`]): watches on namespaces, SubNamespaces and every kind
//!   listed in `watches` keep an in-memory [`index::Index`]; each event names the namespaces
//!   it touches (the namespace itself and the namespaces below it).
//! - **Decide** (arbor-policy's `propagation` module): roles, labels and annotations to
//!   receive, the copy table (create / update / delete by mode and `from`), generated
//!   objects, SubNamespace creation and deletion, cycles.
//! - **Act** ([`namespace_reconciler`], [`subnamespace_reconciler`], [`writer`]):
//!   server-side apply under the field manager `arbor-hierarchy`, only where the live state
//!   differs; deletes guarded by uid. What the controller writes goes into the index at once
//!   (and triggers the namespaces below), so a reconcile that runs before the watch event
//!   arrives does not write it again. Propagation halts in namespaces on or below a cycle
//!   (an event `CycleDetected` on each member) and resumes when it is broken.
//!
//! Before any of that, [`controller::start`] checks the configuration (Accurate's file format,
//! read by [`arbor_api::hierarchy_config`]), resolves the watched kinds by discovery
//! ([`kinds`]: only namespaced kinds) and asks the API server whether RBAC allows every verb it
//! uses ([`access`]). [`grpc`] serves `HierarchyService` (GetTree, GetNamespace,
//! ExplainPropagation) from the index.
//! [`run()`](run::run) adds what a deployment needs: leader election, the admin server (metrics
//! and a readiness gate that opens once the caches synced) and graceful shutdown.
//!
//! The key domain (`--domain`) selects the keys read and written: `arbor.dev` by default,
//! `accurate.cybozu.com` or `innu.cybozu.com` to take over from those systems as they are.

pub mod access;
pub mod args;
pub mod context;
pub mod controller;
pub mod grpc;
pub mod index;
pub mod kinds;
pub mod metrics;
pub mod namespace_reconciler;
pub mod owners;
pub mod run;
pub mod subnamespace_reconciler;
pub mod watch;
pub mod writer;

pub use args::Args;
pub use controller::{Running, Settings, StartError, start};
pub use run::{RunError, run};
