//! GitTrackObject and ClusterGitTrackObject: one declared object each, owned by its source.
//!
//! gitsync records every object it reads from git as one of these (namespaced objects as
//! GitTrackObjects, cluster-scoped ones as ClusterGitTrackObjects) and applies it from there.
//! The applied object carries no ownerReference back (DESIGN.md, gitsync step 4): deletion goes
//! through the gitsync finalizer on these records, so it always passes the action table.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The declared object and how to find it on the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredObject {
    /// `metadata.name` of the declared object.
    pub name: String,
    /// `kind` of the declared object.
    pub kind: String,
    /// The object as declared in git, complete with apiVersion, kind and metadata; for a
    /// Secret, without `data` and `stringData` (see `payloadDigest`).
    #[schemars(schema_with = "crate::schema::any_object")]
    pub data: serde_json::Value,
    /// For a Secret: a keyed digest (`hmac-sha256:<hex>`) of its declared `data` and
    /// `stringData`, which are never copied here, so this object stays outside Secret
    /// protection without holding a secret. gitsync compares it to notice a change; the payload
    /// itself is applied from the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_digest: Option<String>,
}

/// How the declared object is doing on the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitTrackObjectStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `ObjectInSync`: whether the object on the cluster matches the declaration. Absent while
    /// nothing went wrong: gitsync creates a tracking object for an object it then applies, and
    /// writes this condition only when it says more (a failure, or `InSync` again after one).
    /// Reasons: `InSync`, `Unmanaged` (exists without the
    /// management label), `Drifted` (the update failed), `NotOnCluster` (the create failed),
    /// `SyncNotDeclared`, `ApplyFailed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One tracked-object kind: everything but kind, scope, short name and description is the
/// same for GitTrackObject and ClusterGitTrackObject.
macro_rules! tracked_object_kind {
    ($(#[$meta:meta])* $spec:ident for $kind:tt { $(scope: $scope:ident,)? shortname: $short:tt, doc: $doc:tt $(,)? }) => {
        arbor_kind! {
            $(#[$meta])*
            pub struct $spec for $kind {
                $(scope: $scope,)?
                status: "GitTrackObjectStatus",
                shortname: $short,
                doc: $doc,
                columns: [
                    (name = "Kind", type_ = "string", json_path = ".spec.kind"),
                    (name = "Object", type_ = "string", json_path = ".spec.name"),
                    (name = "InSync", type_ = "string", json_path = ".status.conditions[?(@.type==\"ObjectInSync\")].status"),
                    (name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
                ],
            }
            {
                #[serde(flatten)]
                pub object: DeclaredObject,
            }
        }
    };
}

tracked_object_kind! {
    /// A namespaced object declared by a GitTrack or a ClusterGitTrack.
    GitTrackObjectSpec for "GitTrackObject" {
        scope: namespaced,
        shortname: "gto",
        doc: "A namespaced object declared in git, as read by Arbor's gitsync.",
    }
}

tracked_object_kind! {
    /// A cluster-scoped object declared by a ClusterGitTrack.
    ClusterGitTrackObjectSpec for "ClusterGitTrackObject" {
        shortname: "cgto",
        doc: "A cluster-scoped object declared in git, as read by Arbor's gitsync.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_object_keeps_every_field_of_data() {
        let data = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team-a"},
            "data": {"nested": "value"},
        });
        let gto: GitTrackObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "GitTrackObject",
            "metadata": {"name": "configmap-settings", "namespace": "team-a"},
            "spec": {"name": "settings", "kind": "ConfigMap", "data": data},
        }))
        .unwrap();
        assert_eq!(gto.spec.object.data, data);
        assert_eq!(
            serde_json::to_value(&gto).unwrap()["spec"]["kind"],
            "ConfigMap"
        );
    }
}
