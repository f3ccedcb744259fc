//! GitTrack (namespaced) and ClusterGitTrack (cluster-scoped): the sources gitsync syncs.
//!
//! Both flatten [`GitSourceSpec`], so they are identical on the wire except for the secret
//! reference. [`GitSource`] is the interface seeds/002 asks for, so the gitsync controller is
//! written once for both kinds.

use kube::{Resource, ResourceExt};

use crate::keys::SourceRef;
use crate::source::{
    GitSourceSpec, GitSourceStatus, NamespacedSecretRef, SecretRef, SecretReference,
};
use crate::validation::FieldError;

/// One source kind: everything but kind, scope, short name, description and the secret
/// reference is the same for GitTrack and ClusterGitTrack.
macro_rules! git_source_kind {
    ($(#[$meta:meta])* $spec:ident for $kind:tt { $(scope: $scope:ident,)? shortname: $short:tt, doc: $doc:tt, secret: $secret:ty $(, fields: { $($fields:tt)* })? $(,)? }) => {
        arbor_kind! {
            $(#[$meta])*
            pub struct $spec for $kind {
                $(scope: $scope,)?
                status: "GitSourceStatus",
                shortname: $short,
                doc: $doc,
                columns: [
                    (name = "Repository", type_ = "string", json_path = ".spec.repository"),
                    (name = "Commit", type_ = "string", json_path = ".status.observedCommit"),
                    (name = "Applied", type_ = "integer", json_path = ".status.objectsApplied"),
                    (name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
                    (name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
                ],
            }
            {
                #[serde(flatten)]
                pub source: GitSourceSpec<$secret>,
                $($($fields)*)?
            }
        }
    };
}

git_source_kind! {
    /// A git repository whose objects are applied inside this GitTrack's namespace.
    GitTrackSpec for "GitTrack" {
        scope: namespaced,
        shortname: "gt",
        doc: "A git repository whose objects Arbor applies inside this namespace.",
        secret: SecretRef,
        fields: {
            /// The ServiceAccount of this namespace whose permissions the objects are applied
            /// with (gitsync impersonates it), so a GitTrack can never do what that account
            /// cannot. Unset: the installation's default, or gitsync's own identity when the
            /// installation has none and does not require one.
            #[serde(
                default,
                rename = "serviceAccountName",
                skip_serializing_if = "Option::is_none"
            )]
            pub service_account_name: Option<String>,
        },
    }
}

git_source_kind! {
    /// A git repository whose objects Arbor applies across the cluster.
    ClusterGitTrackSpec for "ClusterGitTrack" {
        shortname: "cgt",
        doc: "A git repository whose objects Arbor applies across the cluster.",
        secret: NamespacedSecretRef,
    }
}

/// Where a source's credentials are, once its scope is taken into account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAuth<'a> {
    pub type_: crate::source::AuthType,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// What the gitsync controller needs from either kind of source.
pub trait GitSource: Resource + ResourceExt {
    type Secret: SecretReference;

    fn source_spec(&self) -> &GitSourceSpec<Self::Secret>;

    fn source_status(&self) -> Option<&GitSourceStatus>;

    /// The value of the source annotation on the objects this source applies.
    fn source_ref(&self) -> SourceRef;

    /// The credentials secret, located; `None` without auth. An unset namespace (a GitTrack
    /// object not read from the API) is an error naming the field.
    fn resolved_auth(&self) -> Result<Option<ResolvedAuth<'_>>, FieldError> {
        let Some(auth) = &self.source_spec().auth else {
            return Ok(None);
        };
        let (namespace, name) = auth.secret_ref.locate(self.meta().namespace.as_deref());
        let namespace = namespace.ok_or_else(|| {
            FieldError::required("metadata.namespace", "the secret's namespace is unknown")
        })?;
        Ok(Some(ResolvedAuth {
            type_: auth.type_,
            namespace,
            name,
        }))
    }

    /// The ServiceAccount (in the source's namespace) to apply as; only a GitTrack has one.
    fn service_account_name(&self) -> Option<&str> {
        None
    }

    /// Checks the spec, for the webhook and the controller.
    fn validate(&self) -> Result<(), Vec<FieldError>> {
        self.source_spec().validate()
    }
}

impl GitSource for GitTrack {
    type Secret = SecretRef;

    fn source_spec(&self) -> &GitSourceSpec<SecretRef> {
        &self.spec.source
    }

    fn source_status(&self) -> Option<&GitSourceStatus> {
        self.status.as_ref()
    }

    fn service_account_name(&self) -> Option<&str> {
        self.spec.service_account_name.as_deref()
    }

    fn source_ref(&self) -> SourceRef {
        SourceRef::GitTrack {
            namespace: self.namespace().unwrap_or_default(),
            name: self.name_any(),
        }
    }
}

impl GitSource for ClusterGitTrack {
    type Secret = NamespacedSecretRef;

    fn source_spec(&self) -> &GitSourceSpec<NamespacedSecretRef> {
        &self.spec.source
    }

    fn source_status(&self) -> Option<&GitSourceStatus> {
        self.status.as_ref()
    }

    fn source_ref(&self) -> SourceRef {
        SourceRef::ClusterGitTrack {
            name: self.name_any(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{AuthType, GitReference};

    fn gittrack_json() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "GitTrack",
            "metadata": {"name": "apps", "namespace": "team-a"},
            "spec": {
                "repository": "git@example.com:team-a/apps.git",
                "reference": {"branch": "main"},
                "subPath": "deploy",
                "layout": "Flat",
                "auth": {"type": "SSH", "secretRef": {"name": "deploy-key"}},
                "pollInterval": "30s",
            },
        })
    }

    #[test]
    fn gittrack_spec_fields_sit_directly_under_spec() {
        let track: GitTrack = serde_json::from_value(gittrack_json()).unwrap();
        assert_eq!(track.spec.source.reference, GitReference::branch("main"));
        assert_eq!(track.spec.source.sub_path.as_deref(), Some("deploy"));
        let back = serde_json::to_value(&track).unwrap();
        assert_eq!(back["spec"]["subPath"], "deploy");
        assert_eq!(back["spec"]["prune"], true);
    }

    #[test]
    fn gittrack_secret_is_in_its_own_namespace() {
        let track: GitTrack = serde_json::from_value(gittrack_json()).unwrap();
        assert_eq!(
            track.resolved_auth().unwrap(),
            Some(ResolvedAuth {
                type_: AuthType::Ssh,
                namespace: "team-a",
                name: "deploy-key"
            })
        );
        assert_eq!(track.source_ref().to_string(), "GitTrack/team-a/apps");
        assert_eq!(track.validate(), Ok(()));
    }

    #[test]
    fn cluster_gittrack_secret_names_its_namespace() {
        let track: ClusterGitTrack = serde_json::from_value(serde_json::json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "ClusterGitTrack",
            "metadata": {"name": "platform"},
            "spec": {
                "repository": "https://example.com/platform.git",
                "reference": {"tag": "v2"},
                "auth": {"type": "Token", "secretRef": {"name": "tok", "namespace": "arbor-system"}},
            },
        }))
        .unwrap();
        let auth = track.resolved_auth().unwrap().unwrap();
        assert_eq!((auth.namespace, auth.name), ("arbor-system", "tok"));
        assert_eq!(track.source_ref().to_string(), "ClusterGitTrack/platform");
    }

    #[test]
    fn gittrack_without_namespace_cannot_locate_its_secret() {
        let mut value = gittrack_json();
        value["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        let track: GitTrack = serde_json::from_value(value).unwrap();
        assert_eq!(
            track.resolved_auth().unwrap_err().field,
            "metadata.namespace"
        );
    }
}
