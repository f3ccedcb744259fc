//! arbor-kube-emu: an in-memory Kubernetes API server for Arbor's tests and local demo.
//!
//! **Test and demo infrastructure only — never run it in production.** It keeps everything in
//! memory, has no persistence, and no controllers beyond the few the API semantics need. By
//! default every authenticated request is allowed; deny rules can refuse chosen verbs to chosen
//! identities (see [`authz`]), and `--authorization rbac` ([`KubeEmuBuilder::rbac`]) enforces
//! the stored Roles, ClusterRoles and bindings as kube-apiserver's RBAC authorizer does
//! (aggregated ClusterRoles included, kube's bootstrap policy stored at start; see `rbac`), and
//! refuses a Role, ClusterRole or binding that would grant what its writer does not hold, as
//! kube-apiserver's RBAC storage does (`rbac::escalation`). Impersonation headers are honoured (see `impersonation`): the
//! impersonator needs the `impersonate` verb, and the impersonated user is who the rest sees.
//!
//! It speaks the Kubernetes REST API closely enough that kube-rs (Api, watcher, reflector,
//! Controller), kubectl and other clients behave as against kube-apiserver for what Arbor does:
//! discovery, get / list / watch / create / update / patch / server-side apply / delete /
//! deletecollection on built-in kinds and on kinds added by CustomResourceDefinitions, with
//! label and field selectors, paging, bookmarks, 410 Gone, optimistic concurrency, generation,
//! status and scale subresources, finalizers, owner-reference garbage collection, namespace termination,
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
//! A request goes through `api`: route, authenticate ([`auth`]), authorize ([`authz`]), injected
//! faults ([`faults`]), then a verb handler in `handlers`; writes call the admission webhooks of
//! stored Mutating/ValidatingWebhookConfigurations (`admission`) before they are stored; custom
//! resources are then pruned, defaulted and validated against their CRD's structural schema
//! (`schema`, compiled once when the CRD is registered), with `fieldValidation` deciding whether
//! unknown fields warn or refuse; built-in kinds get the defaults, size limits and immutable
//! fields of kube-apiserver's registry strategies (`strategy`) and the label and annotation
//! rules of `validation`. Tables for kubectl evaluate printer columns with Kubernetes JSONPath
//! (`jsonpath`). A kind can be a view of another kind's storage (`registry::view`): Events of
//! `events.k8s.io/v1` are the core `v1` Events, converted field by field on the way in and out,
//! as in kube-apiserver. Besides `/status` and `/scale`, a few subresources write one field of
//! their object (`pods/ephemeralcontainers`, `certificatesigningrequests/approval`). The server
//! starts with what kube-apiserver keeps in every cluster: the namespaces, the `kubernetes`
//! Service and the local APIServices. Every
//! resource request is recorded ([`accounting`]). Patches and server-side apply are computed by
//! [`patch`]. The emulator's own endpoints live under `/__emu/` (faults and the request report,
//! see the `admin` module's docs).
//!
//! A pod's `portforward` subresource is served over WebSocket (`v4.channel.k8s.io`, as kube-rs
//! and the kubelet speak it) and bridged to the loopback addresses a test names in the Pod's
//! [`portforward::ADDRESS_ANNOTATION`]: the emulator's stand-in for a kubelet (see
//! [`portforward`]).
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
//! Acting as other users, misbehaving on purpose and counting requests:
//!
//! ```no_run
//! # async fn example() -> Result<(), arbor_kube_emu::Error> {
//! use arbor_kube_emu::KubeEmu;
//! use arbor_kube_emu::authz::DenyRule;
//! use arbor_kube_emu::faults::Fault;
//!
//! let rule = DenyRule::parse("deny user=system:serviceaccount:arbor-system:arbor-hierarchy verb=delete resource=secrets")
//!     .expect("a valid rule");
//! let emu = KubeEmu::builder().deny(rule).start().await?;
//! let token = emu.service_account_token("arbor-system", "arbor-hierarchy");
//! let _kubeconfig = emu.kubeconfig_yaml_for(&token);
//! emu.faults().inject(Fault::status(409).verbs(&["update"]).resources(&["configmaps"]));
//! // ... run the code under test ...
//! assert_eq!(emu.requests().writes(), 0);
//! emu.faults().clear();
//! # Ok(())
//! # }
//! ```
//!
//! Admission webhooks reached through a `service` reference need its address, since there is no
//! cluster DNS: `KubeEmu::builder().service_address("arbor-system", "arbor-webhook", 443, addr)`.
//!
//! The binary `arbor-kube-emu` does the same from the command line (see [`cli`]).
//!
//! ## Measured against a suite written elsewhere
//!
//! `make client-suite` (`client-suite/run.sh`) runs the published `kube`, `kube-client` and
//! `kube-runtime` crates' own cluster tests against the binary; the script lists the tests it
//! leaves out and why (those that need a kubelet).

pub mod accounting;
mod admin;
mod admission;
mod api;
pub mod auth;
pub mod authz;
pub mod cli;
mod discovery;
mod error;
pub mod faults;
mod handlers;
mod impersonation;
mod jsonpath;
mod kinds;
mod kubeconfig;
mod lifecycle;
mod managed;
mod meta;
mod openapi;
pub mod patch;
pub mod portforward;
mod present;
mod protobuf;
mod rbac;
mod registry;
mod route;
mod schema;
mod selector;
mod server;
mod state;
mod status;
mod store;
mod strategy;
mod table;
mod tls;
mod validation;

pub use auth::StaticToken;
pub use error::Error;
pub use server::{KubeEmu, KubeEmuBuilder};
