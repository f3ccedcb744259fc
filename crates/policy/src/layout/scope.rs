//! Whether a kind is namespaced or cluster-scoped.
//!
//! The layout rules need the scope of every kind they place, without asking a cluster: a
//! built-in table covers the Kubernetes kinds and Arbor's own, and a CustomResourceDefinition
//! declared in the repository's `cluster/` directory adds (or overrides) its kind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::SourceError;
use super::input::Identified;
use crate::code::ErrorCode;
use crate::object::{GroupKind, str_at};

/// A kind's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// The group and kind of CustomResourceDefinitions.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
pub const CRD_KIND: &str = "CustomResourceDefinition";

/// Namespaced kinds of Kubernetes 1.37 and of earlier releases (a repository written for an
/// older cluster still names them: `extensions` Deployments, `settings.k8s.io` PodPresets), and
/// Arbor's own.
const NAMESPACED: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "Binding",
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "PersistentVolumeClaim",
            "Pod",
            "PodTemplate",
            "ReplicationController",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
        ],
    ),
    (
        "apps",
        &[
            "ControllerRevision",
            "DaemonSet",
            "Deployment",
            "ReplicaSet",
            "StatefulSet",
        ],
    ),
    ("authorization.k8s.io", &["LocalSubjectAccessReview"]),
    ("autoscaling", &["HorizontalPodAutoscaler"]),
    ("batch", &["CronJob", "Job"]),
    ("coordination.k8s.io", &["Lease", "LeaseCandidate"]),
    ("discovery.k8s.io", &["EndpointSlice"]),
    ("events.k8s.io", &["Event"]),
    // Removed in 1.16 (workloads) and 1.22 (Ingress).
    (
        "extensions",
        &[
            "DaemonSet",
            "Deployment",
            "Ingress",
            "NetworkPolicy",
            "ReplicaSet",
        ],
    ),
    ("networking.k8s.io", &["Ingress", "NetworkPolicy"]),
    ("policy", &["PodDisruptionBudget"]),
    ("rbac.authorization.k8s.io", &["Role", "RoleBinding"]),
    (
        "resource.k8s.io",
        &[
            "ResourceClaim",
            "ResourceClaimTemplate",
            "PodSchedulingContext",
        ],
    ),
    // Removed in 1.20.
    ("settings.k8s.io", &["PodPreset"]),
    ("storage.k8s.io", &["CSIStorageCapacity"]),
    (
        "arbor.dev",
        &["Application", "GitTrack", "GitTrackObject", "SubNamespace"],
    ),
];

/// Cluster-scoped kinds of Kubernetes 1.37 and of earlier releases, and Arbor's own.
const CLUSTER: &[(&str, &[&str])] = &[
    (
        "",
        &["ComponentStatus", "Namespace", "Node", "PersistentVolume"],
    ),
    (
        "admissionregistration.k8s.io",
        &[
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingWebhookConfiguration",
        ],
    ),
    (CRD_GROUP, &[CRD_KIND]),
    ("apiregistration.k8s.io", &["APIService"]),
    (
        "authentication.k8s.io",
        &["SelfSubjectReview", "TokenReview"],
    ),
    (
        "authorization.k8s.io",
        &[
            "SelfSubjectAccessReview",
            "SelfSubjectRulesReview",
            "SubjectAccessReview",
        ],
    ),
    (
        "certificates.k8s.io",
        &["CertificateSigningRequest", "ClusterTrustBundle"],
    ),
    // Removed in 1.25 (PodSecurityPolicy also lived in `policy`).
    ("extensions", &["PodSecurityPolicy"]),
    (
        "flowcontrol.apiserver.k8s.io",
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
    ("internal.apiserver.k8s.io", &["StorageVersion"]),
    (
        "networking.k8s.io",
        &["IPAddress", "IngressClass", "ServiceCIDR"],
    ),
    ("node.k8s.io", &["RuntimeClass"]),
    // Removed in 1.25.
    ("policy", &["PodSecurityPolicy"]),
    (
        "rbac.authorization.k8s.io",
        &["ClusterRole", "ClusterRoleBinding"],
    ),
    ("resource.k8s.io", &["DeviceClass", "ResourceSlice"]),
    ("scheduling.k8s.io", &["PriorityClass"]),
    (
        "storage.k8s.io",
        &[
            "CSIDriver",
            "CSINode",
            "StorageClass",
            "VolumeAttachment",
            "VolumeAttributesClass",
        ],
    ),
    (
        "arbor.dev",
        &["ClusterGitTrack", "ClusterGitTrackObject", "Sync"],
    ),
];

/// The scope of a kind Kubernetes or Arbor itself serves, if it is one of them.
pub fn builtin_scope(group_kind: &GroupKind) -> Option<Scope> {
    let listed = |table: &[(&str, &[&str])]| {
        table.iter().any(|(group, kinds)| {
            *group == group_kind.group && kinds.contains(&group_kind.kind.as_str())
        })
    };
    if listed(NAMESPACED) {
        Some(Scope::Namespaced)
    } else if listed(CLUSTER) {
        Some(Scope::Cluster)
    } else {
        None
    }
}

/// The scopes known to one source: the built-in table plus the source's own CRDs (and, where a
/// cluster was asked, the kinds it serves).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeTable {
    declared: BTreeMap<GroupKind, Scope>,
}

impl ScopeTable {
    /// The scope of `group_kind`: a CRD of the source wins over the built-in table.
    pub fn scope(&self, group_kind: &GroupKind) -> Option<Scope> {
        self.declared
            .get(group_kind)
            .copied()
            .or_else(|| builtin_scope(group_kind))
    }

    /// Adds the kind a CustomResourceDefinition declares.
    pub fn declare(&mut self, group_kind: GroupKind, scope: Scope) {
        self.declared.insert(group_kind, scope);
    }

    /// A table of the kinds a cluster serves, as its discovery lists them.
    pub fn served(kinds: impl IntoIterator<Item = (GroupKind, Scope)>) -> Self {
        Self {
            declared: kinds.into_iter().collect(),
        }
    }

    /// How many kinds beyond the built-in table it knows.
    pub fn len(&self) -> usize {
        self.declared.len()
    }

    pub fn is_empty(&self) -> bool {
        self.declared.is_empty()
    }
}

/// Reads the group, kind and scope that a CustomResourceDefinition declares.
pub(crate) fn crd_declaration(crd: &Identified<'_>) -> Result<(GroupKind, Scope), SourceError> {
    let invalid = |message: &str| {
        SourceError::at_object(
            ErrorCode::InvalidCustomResourceDefinition,
            &crd.location,
            crd.display(),
            message,
        )
    };
    let group = str_at(crd.value, &["spec", "group"])
        .filter(|g| !g.is_empty())
        .ok_or_else(|| invalid("spec.group is missing"))?;
    let kind = str_at(crd.value, &["spec", "names", "kind"])
        .filter(|k| !k.is_empty())
        .ok_or_else(|| invalid("spec.names.kind is missing"))?;
    let scope = match str_at(crd.value, &["spec", "scope"]) {
        Some("Namespaced") => Scope::Namespaced,
        Some("Cluster") => Scope::Cluster,
        Some(other) => {
            return Err(invalid(&format!(
                "spec.scope must be Namespaced or Cluster, not {other:?}"
            )));
        }
        None => return Err(invalid("spec.scope is missing")),
    };
    Ok((GroupKind::new(group, kind), scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_knows_core_and_rbac_scopes() {
        let scope = |g: &str, k: &str| builtin_scope(&GroupKind::new(g, k));
        assert_eq!(scope("", "ConfigMap"), Some(Scope::Namespaced));
        assert_eq!(scope("", "Namespace"), Some(Scope::Cluster));
        assert_eq!(
            scope("rbac.authorization.k8s.io", "RoleBinding"),
            Some(Scope::Namespaced)
        );
        assert_eq!(
            scope("rbac.authorization.k8s.io", "ClusterRole"),
            Some(Scope::Cluster)
        );
        assert_eq!(scope("example.com", "Widget"), None);
    }

    #[test]
    fn a_crd_declared_scope_wins_over_the_builtin_table() {
        let mut table = ScopeTable::default();
        let widget = GroupKind::new("example.com", "Widget");
        assert_eq!(table.scope(&widget), None);
        table.declare(widget.clone(), Scope::Cluster);
        assert_eq!(table.scope(&widget), Some(Scope::Cluster));
    }

    #[test]
    fn removed_kinds_keep_their_scope_for_repositories_written_for_older_clusters() {
        let scope = |g: &str, k: &str| builtin_scope(&GroupKind::new(g, k));
        assert_eq!(scope("policy", "PodSecurityPolicy"), Some(Scope::Cluster));
        assert_eq!(
            scope("extensions", "PodSecurityPolicy"),
            Some(Scope::Cluster)
        );
        assert_eq!(scope("extensions", "Deployment"), Some(Scope::Namespaced));
        assert_eq!(
            scope("settings.k8s.io", "PodPreset"),
            Some(Scope::Namespaced)
        );
        assert_eq!(
            scope("flowcontrol.apiserver.k8s.io", "FlowSchema"),
            Some(Scope::Cluster)
        );
    }

    #[test]
    fn no_kind_is_listed_with_two_scopes() {
        for (group, kinds) in NAMESPACED {
            for kind in *kinds {
                let listed_cluster = CLUSTER
                    .iter()
                    .any(|(g, ks)| g == group && ks.contains(kind));
                assert!(!listed_cluster, "{group}/{kind} is listed both ways");
            }
        }
    }

    #[test]
    fn kinds_a_cluster_serves_are_known_beyond_the_builtin_table() {
        let widget = GroupKind::new("example.com", "Widget");
        let table = ScopeTable::served([(widget.clone(), Scope::Namespaced)]);
        assert_eq!(table.scope(&widget), Some(Scope::Namespaced));
        assert_eq!(table.len(), 1);
    }
}
