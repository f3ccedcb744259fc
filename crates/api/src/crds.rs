//! The CustomResourceDefinitions of every Arbor kind, and their YAML.
//!
//! `arborctl crds` writes [`render_all`] to `charts/arbor/crds/`; a test renders again and
//! compares, so the committed YAML can never drift from these types. Rendering goes through
//! `serde_json::Value` first: its maps are ordered by insertion and the CRD structs serialise
//! their fields in a fixed order (schema properties are B-tree maps), so the output is stable
//! from run to run.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{
    Application, ClusterGitTrack, ClusterGitTrackObject, GitTrack, GitTrackObject, SubNamespace,
    SyncResource,
};

/// The API group of every Arbor kind.
pub const GROUP: &str = "arbor.dev";
/// The one served and stored version.
pub const VERSION: &str = "v1alpha1";

/// Why a CRD could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot convert CRD {name} to JSON: {source}")]
    Json {
        name: String,
        source: serde_json::Error,
    },
    #[error("cannot write CRD {name} as YAML: {source}")]
    Yaml {
        name: String,
        source: serde_saphyr::SerializeError,
    },
}

/// Every Arbor CRD, in a fixed order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        GitTrack::crd(),
        ClusterGitTrack::crd(),
        GitTrackObject::crd(),
        ClusterGitTrackObject::crd(),
        SyncResource::crd(),
        SubNamespace::crd(),
        Application::crd(),
    ]
}

/// The file a CRD is written to: `<plural>.<group>.yaml`, which is its object name.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.{}.yaml", crd.spec.names.plural, crd.spec.group)
}

/// One CRD as a YAML document.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    let name = || crd.metadata.name.clone().unwrap_or_default();
    let value = serde_json::to_value(crd).map_err(|source| RenderError::Json {
        name: name(),
        source,
    })?;
    serde_saphyr::to_string(&value).map_err(|source| RenderError::Yaml {
        name: name(),
        source,
    })
}

/// Every CRD as `(file name, YAML)`, in the order of [`all`].
pub fn render_all() -> Result<Vec<(String, String)>, RenderError> {
    all()
        .iter()
        .map(|crd| Ok((file_name(crd), to_yaml(crd)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crd_is_in_the_arbor_group_and_category() {
        let crds = all();
        assert_eq!(crds.len(), 7);
        for crd in &crds {
            assert_eq!(crd.spec.group, GROUP);
            assert_eq!(crd.spec.versions.len(), 1);
            assert_eq!(crd.spec.versions[0].name, VERSION);
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["arbor".to_owned()][..])
            );
            let status = crd.spec.versions[0]
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref());
            assert!(
                status.is_some(),
                "{} has no status subresource",
                crd.spec.names.kind
            );
        }
    }

    #[test]
    fn scopes_follow_the_design_table() {
        let scopes: Vec<(String, String)> = all()
            .into_iter()
            .map(|crd| (crd.spec.names.kind, crd.spec.scope))
            .collect();
        let expected = [
            ("GitTrack", "Namespaced"),
            ("ClusterGitTrack", "Cluster"),
            ("GitTrackObject", "Namespaced"),
            ("ClusterGitTrackObject", "Cluster"),
            ("Sync", "Cluster"),
            ("SubNamespace", "Namespaced"),
            ("Application", "Namespaced"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, s)| (k.to_string(), s.to_string()))
            .collect();
        assert_eq!(scopes, expected);
    }

    #[test]
    fn file_names_are_the_crd_names() {
        for crd in all() {
            assert_eq!(
                file_name(&crd),
                format!("{}.yaml", crd.metadata.name.as_deref().unwrap())
            );
        }
    }

    #[test]
    fn yaml_reads_back_as_the_same_crd() {
        for crd in all() {
            let yaml = to_yaml(&crd).unwrap();
            let back: CustomResourceDefinition = serde_saphyr::from_str(&yaml).unwrap();
            assert_eq!(back, crd, "{}", file_name(&crd));
        }
    }
}
