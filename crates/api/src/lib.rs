//! # arbor-api
//!
//! Arbor's Kubernetes API: the `arbor.dev/v1alpha1` custom resources, their status
//! conditions, the well-known names Arbor writes onto objects, and the CRD YAML.
//!
//! | kind | scope | module | controller |
//! |---|---|---|---|
//! | [`GitTrack`], [`ClusterGitTrack`] | Namespaced, Cluster | [`gittrack`], [`source`] | arbor-gitsync |
//! | [`GitTrackObject`], [`ClusterGitTrackObject`] | Namespaced, Cluster | [`gittrack_object`] | arbor-gitsync |
//! | `Sync` ([`SyncResource`]) | Cluster | [`sync`] | arbor-gitsync |
//! | [`SubNamespace`] | Namespaced | [`subnamespace`] | arbor-hierarchy |
//! | [`Application`] | Namespaced | [`application`] | arbor-observer |
//!
//! Types only: no client, and no I/O but reading the hierarchy configuration file
//! ([`hierarchy_config`], the one loader arbor-hierarchy and arbor-webhook share). Specs carry
//! `validate()` methods returning [`FieldError`]s that name the field path; the webhook
//! refuses with them and the controllers report them in a `Stalled` condition. [`condition`]
//! holds the kstatus condition types, reasons and [`set_condition`]; [`keys`] the finalizers,
//! field managers and annotations; [`crds`] the CustomResourceDefinitions and their YAML.

#[macro_use]
mod declare;

pub mod application;
pub mod condition;
pub mod crds;
pub mod gittrack;
pub mod gittrack_object;
pub mod hierarchy_config;
pub mod keys;
pub mod schema;
pub mod source;
pub mod subnamespace;
pub mod sync;
pub mod validation;

pub use application::{Application, ApplicationSpec, ApplicationState, ApplicationStatus};
pub use condition::{ConditionStatus, ConditionUpdate, set_condition};
pub use gittrack::{
    ClusterGitTrack, ClusterGitTrackSpec, GitSource, GitTrack, GitTrackSpec, ResolvedAuth,
};
pub use gittrack_object::{
    ClusterGitTrackObject, ClusterGitTrackObjectSpec, DeclaredObject, GitTrackObject,
    GitTrackObjectSpec, GitTrackObjectStatus,
};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
pub use keys::{Keys, ManagementLabel, SourceRef};
pub use source::{
    AuthType, DeletionPolicy, DeletionProgress, GitAuth, GitReference, GitSourceSpec,
    GitSourceStatus, Layout, NamespacedSecretRef, PruneWindowStatus, Revision, SecretRef,
    SecretReference, SourceError,
};
pub use subnamespace::{SubNamespace, SubNamespaceApi, SubNamespaceSpec, SubNamespaceStatus};
pub use sync::{HierarchyMode, SyncResource, SyncSpec, SyncState, SyncStatus};
pub use validation::{FieldError, FieldErrorKind};
