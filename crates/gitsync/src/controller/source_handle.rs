//! One source, GitTrack or ClusterGitTrack, in the terms the round needs.
//!
//! seeds/002 asks for one controller for both kinds; [`SourceHandle::of`] is where the two
//! differ (scope, owner in the ownership matrix, secret namespace), so the round is written once.

use std::collections::BTreeMap;
use std::time::Duration;

use arbor_api::keys::{ArborKeys, Keys, SourceRef};
use arbor_api::source::{AuthType, DeletionPolicy, GitSourceStatus, Layout, Revision};
use arbor_api::{FieldError, GitSource};
use arbor_policy::ownership::Owner;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use crate::fetch::{self, SourceId};

/// Where a source's credentials are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthLocation {
    pub type_: AuthType,
    pub namespace: String,
    pub name: String,
}

/// A source as the round sees it.
#[derive(Debug, Clone)]
pub struct SourceHandle {
    pub reference: SourceRef,
    pub owner: Owner,
    pub fetch_id: SourceId,
    /// The ownerReference its tracking objects carry (controller = true).
    pub owner_reference: OwnerReference,
    pub uid: String,
    /// The namespace of a GitTrack.
    pub namespace: Option<String>,
    pub repository: String,
    /// The configured revision, as `branch:main`, `tag:v1` or `commit:0123abc`.
    pub revision_text: String,
    pub revision: Option<fetch::GitReference>,
    pub sub_path: String,
    pub layout: arbor_policy::layout::Layout,
    pub suspend: bool,
    pub prune: bool,
    pub deletion_policy: DeletionPolicy,
    pub poll_interval: Duration,
    pub auth: Option<AuthLocation>,
    pub allow_mass_prune: bool,
    /// `spec.serviceAccountName` of a GitTrack.
    pub service_account: Option<String>,
    pub generation: Option<i64>,
    pub status: GitSourceStatus,
    /// Problems with the spec; a source with any is not synced.
    pub spec_errors: Vec<FieldError>,
}

impl SourceHandle {
    /// Reads `source`; `keys` names the allow-mass-prune annotation.
    pub fn of<K>(source: &K, keys: &Keys) -> Self
    where
        K: GitSource + Resource<DynamicType = ()>,
    {
        let spec = source.source_spec();
        let mut spec_errors = source.validate().err().unwrap_or_default();
        let reference = source.source_ref();
        let (owner, fetch_id, namespace) = match &reference {
            SourceRef::GitTrack { namespace, name } => (
                Owner::gittrack(namespace.clone()),
                SourceId::git_track(namespace.clone(), name.clone()),
                Some(namespace.clone()),
            ),
            SourceRef::ClusterGitTrack { name } => (
                Owner::ClusterGitTrack,
                SourceId::cluster_git_track(name.clone()),
                None,
            ),
        };
        let revision = match spec.reference.resolve("spec.reference") {
            Ok(revision) => Some(revision),
            Err(error) => {
                push_once(&mut spec_errors, error);
                None
            }
        };
        let auth = match source.resolved_auth() {
            Ok(auth) => auth.map(|auth| AuthLocation {
                type_: auth.type_,
                namespace: auth.namespace.to_owned(),
                name: auth.name.to_owned(),
            }),
            Err(error) => {
                push_once(&mut spec_errors, error);
                None
            }
        };
        let poll_interval = spec.poll_interval().unwrap_or_else(|error| {
            push_once(&mut spec_errors, error);
            arbor_api::source::DEFAULT_POLL_INTERVAL
        });
        let annotations: &BTreeMap<String, String> = source.annotations();
        let allow_mass_prune = annotations
            .get(&keys.allow_mass_prune_annotation())
            .is_some_and(|value| value == "true");
        Self {
            owner,
            fetch_id,
            owner_reference: source.controller_owner_ref(&()).unwrap_or_default(),
            uid: source.uid().unwrap_or_default(),
            namespace,
            repository: spec.repository.clone(),
            revision_text: revision.map(describe_revision).unwrap_or_default(),
            revision: revision.map(to_fetch_reference),
            sub_path: spec.sub_path.clone().unwrap_or_default(),
            layout: match spec.layout {
                Layout::Flat => arbor_policy::layout::Layout::Flat,
                Layout::Hierarchical => arbor_policy::layout::Layout::Hierarchical,
            },
            suspend: spec.suspend,
            prune: spec.prune,
            deletion_policy: spec.deletion_policy,
            poll_interval,
            auth,
            allow_mass_prune,
            service_account: source.service_account_name().map(str::to_owned),
            generation: source.meta().generation,
            status: source.source_status().cloned().unwrap_or_default(),
            spec_errors,
            reference,
        }
    }
}

impl SourceHandle {
    /// Every spec error in one message (`; `-separated), or `None` when the spec is valid.
    pub fn spec_error_message(&self) -> Option<String> {
        (!self.spec_errors.is_empty()).then(|| {
            self.spec_errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// The source, for Events about it.
    pub fn object_ref(&self) -> ObjectReference {
        super::notice::regarding_source(&self.reference, &self.uid)
    }
}

fn push_once(errors: &mut Vec<FieldError>, error: FieldError) {
    if !errors.contains(&error) {
        errors.push(error);
    }
}

fn describe_revision(revision: Revision<'_>) -> String {
    match revision {
        Revision::Branch(branch) => format!("branch:{branch}"),
        Revision::Tag(tag) => format!("tag:{tag}"),
        Revision::Commit(commit) => format!("commit:{commit}"),
    }
}

fn to_fetch_reference(revision: Revision<'_>) -> fetch::GitReference {
    match revision {
        Revision::Branch(branch) => fetch::GitReference::Branch(branch.to_owned()),
        Revision::Tag(tag) => fetch::GitReference::Tag(tag.to_owned()),
        Revision::Commit(commit) => fetch::GitReference::Commit(commit.to_ascii_lowercase()),
    }
}
