//! The Resource Ownership Matrix (seeds/002) on GitTrackObjects and ClusterGitTrackObjects.
//!
//! A tracking object names its source twice: in `metadata.ownerReferences` (kind GitTrack or
//! ClusterGitTrack in Arbor's API group) and in the source annotation
//! (`<domain>/source: GitTrack/<namespace>/<name>` or `ClusterGitTrack/<name>`). An
//! ownerReference has no namespace, so a GitTrack owner read from it is where its uid says
//! ([`GitTrackLocator`]: a uid of another namespace's GitTrack is a cross-namespace claim), else
//! in the object's own namespace (the API server's rule for namespaced owners) and, for a
//! cluster-scoped ClusterGitTrackObject, in no namespace at all; the annotation is the other
//! place a cross-namespace claim shows. Every owner found is judged by [`may_own`] for this installation's
//! `--clustergittrack-mode`, and the denial quotes the matrix row and the seed's reason.

use arbor_api::keys::{ArborKeys, SourceRef};
use arbor_policy::ownership::{
    Owner, OwnershipRule, OwnershipVerdict, OwningSourceKind, TrackingObject, WatchScope, may_own,
};
use kube::Resource;
use serde_json::Value;

use super::shape::{ShapeError, string_at};
use crate::gittrack_owners::GitTrackLocator;
use crate::review::ReviewInput;
use crate::review_outcome::{Check, ReviewOutcome};
use crate::settings::PolicySettings;

/// Which tracking kind is under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackingKind {
    GitTrackObject,
    ClusterGitTrackObject,
}

/// The rule id of a matrix cell, like `seeds/002 ownership GitTrack cross-namespace`.
pub fn rule_id(verdict: OwnershipVerdict) -> String {
    let cell = match verdict.rule {
        OwnershipRule::SameNamespace => "same-namespace",
        OwnershipRule::CrossNamespaceNeverAllowed => "cross-namespace",
        OwnershipRule::GitTrackCanNeverOwnClusterScoped => "cluster-scoped",
        OwnershipRule::ClusterGitTracksCanAlwaysOwnClusterGitTrackObjects => "cgto",
        OwnershipRule::IncludeNamespacedAllowsNamespaced => "include-namespaced",
        OwnershipRule::ExcludeNamespacedDisallowsNamespaced => "exclude-namespaced",
        OwnershipRule::DisabledDisallowsNamespaced => "disabled",
    };
    format!("seeds/002 ownership {} {cell}", verdict.row)
}

/// How messages name an owner. A GitTrack named by the ownerReference of a cluster-scoped
/// object has no namespace to name (an ownerReference carries none, and the object has none
/// to lend it), so it is named by its kind alone rather than "in namespace" nothing.
pub fn describe_owner(owner: &Owner) -> String {
    match owner {
        Owner::GitTrack { namespace } if namespace.is_empty() => "GitTrack".to_owned(),
        owner => owner.to_string(),
    }
}

/// The check for one owner and tracking object.
pub fn judge(scope: &WatchScope, owner: &Owner, tracking: &TrackingObject) -> Check {
    let verdict = may_own(owner, tracking, scope.cluster_gittrack_mode());
    let reason = format!(
        "a {} {} a {tracking}: matrix row \"{}\" (--clustergittrack-mode={}) says {verdict}",
        describe_owner(owner),
        if verdict.allowed() {
            "may own"
        } else {
            "may not own"
        },
        verdict.row,
        scope.cluster_gittrack_mode(),
    );
    Check {
        rule: rule_id(verdict),
        allowed: verdict.allowed(),
        reason,
    }
}

/// Reviews a tracking object about to be stored.
pub fn review(
    settings: &PolicySettings,
    gittracks: Option<&dyn GitTrackLocator>,
    kind: TrackingKind,
    input: &ReviewInput,
    object: &Value,
    verdict: &mut ReviewOutcome,
) -> Result<(), ShapeError> {
    let tracking = match kind {
        TrackingKind::ClusterGitTrackObject => TrackingObject::ClusterGitTrackObject,
        TrackingKind::GitTrackObject => {
            let namespace = string_at(object, &["metadata", "namespace"])?
                .or(input.namespace.as_deref())
                .ok_or_else(|| ShapeError::missing("metadata.namespace"))?;
            TrackingObject::gittrack_object(namespace)
        }
    };
    let owners = owners(settings, gittracks, &tracking, object)?;
    if owners.is_empty() {
        verdict.warn(format!(
            "{} {} names no GitTrack or ClusterGitTrack owner; no Arbor instance will sync it",
            input.kind.kind,
            input.object_name()
        ));
    }
    for owner in owners {
        if !settings.scope.watches().watches_owner(&owner) {
            verdict.warn(format!(
                "this installation does not manage the {} (--gittrack-mode={}, --clustergittrack-mode={})",
                describe_owner(&owner),
                settings.scope.gittrack_mode(),
                settings.scope.cluster_gittrack_mode()
            ));
        }
        verdict.push(judge(&settings.scope, &owner, &tracking));
    }
    Ok(())
}

/// Every owner the object names, without repeats.
fn owners(
    settings: &PolicySettings,
    gittracks: Option<&dyn GitTrackLocator>,
    tracking: &TrackingObject,
    object: &Value,
) -> Result<Vec<Owner>, ShapeError> {
    let mut owners = Vec::new();
    let mut add = |owner: Owner| {
        if !owners.contains(&owner) {
            owners.push(owner);
        }
    };
    let group = arbor_api::GitTrack::group(&());
    // Read key by key: a JSON pointer copies each of its segments on every lookup.
    let metadata = object.get("metadata");
    let references = match metadata.and_then(|metadata| metadata.get("ownerReferences")) {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(references)) => references.as_slice(),
        Some(_) => return Err(ShapeError::wrong_type("metadata.ownerReferences", "a list")),
    };
    for (index, reference) in references.iter().enumerate() {
        let field = |name: &str| format!("metadata.ownerReferences[{index}].{name}");
        let read = |name: &str| {
            reference
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| ShapeError::missing(field(name)))
        };
        let api_version = read("apiVersion")?;
        let kind = read("kind")?;
        match OwningSourceKind::named_by(&group, api_version, kind) {
            Some(OwningSourceKind::GitTrack) => {
                let located = reference
                    .get("uid")
                    .and_then(Value::as_str)
                    .zip(gittracks)
                    .and_then(|(uid, gittracks)| gittracks.namespace_of(uid));
                add(match located {
                    Some(namespace) => Owner::gittrack(namespace),
                    None => Owner::gittrack(match tracking {
                        TrackingObject::GitTrackObject { namespace } => namespace.as_str(),
                        // Unknowable; [`describe_owner`] names such an owner by kind alone.
                        TrackingObject::ClusterGitTrackObject => "",
                    }),
                });
            }
            Some(OwningSourceKind::ClusterGitTrack) => add(Owner::ClusterGitTrack),
            None => {}
        }
    }
    let annotation = settings.keys.source_annotation();
    let annotations = metadata.and_then(|metadata| metadata.get("annotations"));
    if let Some(value) = annotations.and_then(|a| a.get(&annotation)) {
        let field = || format!("metadata.annotations[{annotation:?}]");
        let text = value
            .as_str()
            .ok_or_else(|| ShapeError::wrong_type(field(), "a string"))?;
        let source: SourceRef =
            text.parse()
                .map_err(|error: arbor_api::keys::InvalidSourceRef| {
                    ShapeError::invalid(field(), error.to_string())
                })?;
        add(match source {
            SourceRef::GitTrack { namespace, .. } => Owner::gittrack(namespace),
            SourceRef::ClusterGitTrack { .. } => Owner::ClusterGitTrack,
        });
    }
    Ok(owners)
}
