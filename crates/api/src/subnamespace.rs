//! SubNamespace: a request, made inside a root or sub namespace, for a child namespace
//! (seeds/001, seeds/003).
//!
//! The child is named like the SubNamespace and gets the parent label; the labels and
//! annotations listed here are set on it (subject to the configured subNamespace key lists).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

arbor_kind! {
    /// Labels and annotations for the sub-namespace.
    #[derive(Default)]
    pub struct SubNamespaceSpec for "SubNamespace" {
        scope: namespaced,
        status: "SubNamespaceStatus",
        shortname: "subns",
        doc: "A child namespace of this namespace, created and kept by Arbor's hierarchy controller.",
        columns: [
            (name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
            (name = "Conflict", type_ = "string", json_path = ".status.conditions[?(@.type==\"Conflict\")].status"),
            (name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
        ],
    }
    {
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub labels: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub annotations: BTreeMap<String, String>,
    }
}

/// Whether the sub-namespace exists as requested.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubNamespaceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Stalled`, and `Conflict` when the namespace belongs to someone else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The kind's name, the same in every group it is served in.
pub const SUB_NAMESPACE_KIND: &str = "SubNamespace";
/// The plural resource name, the same in every group.
pub const SUB_NAMESPACE_PLURAL: &str = "subnamespaces";
/// The versions Accurate's CRD lists besides its storage version `v2`. Accurate serves neither
/// (`served: false`): they are kept only so objects stored under them before its conversion
/// era stay readable. Arbor's CRD for the Accurate and Innu groups lists them the same way, so
/// installing it over Accurate's changes nothing a client sees.
pub const ACCURATE_UNSERVED_VERSIONS: [&str; 2] = ["v1", "v2alpha1"];

/// Where SubNamespaces are served under a key domain (DESIGN.md, "Keys"): the kind follows the
/// domain so a cluster Accurate or Innu ran is taken over with its SubNamespaces as they are.
///
/// | domain | group / version |
/// |---|---|
/// | `accurate.cybozu.com` | `accurate.cybozu.com/v2` (Accurate's storage version) |
/// | `innu.cybozu.com` | `innu.cybozu.com/v2` (Innu is Accurate under its own domain, so its versions) |
/// | anything else | `arbor.dev/v1alpha1` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubNamespaceApi {
    pub group: String,
    pub version: String,
}

impl SubNamespaceApi {
    pub fn for_domain(domain: &str) -> Self {
        match domain {
            crate::keys::ACCURATE_DOMAIN | crate::keys::INNU_DOMAIN => Self {
                group: domain.to_owned(),
                version: "v2".to_owned(),
            },
            _ => Self {
                group: crate::crds::GROUP.to_owned(),
                version: crate::crds::VERSION.to_owned(),
            },
        }
    }

    /// `<group>/<version>`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The resource, for dynamic clients.
    pub fn api_resource(&self) -> kube::core::ApiResource {
        kube::core::ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: SUB_NAMESPACE_KIND.to_owned(),
            plural: SUB_NAMESPACE_PLURAL.to_owned(),
        }
    }

    /// The CustomResourceDefinition that serves SubNamespaces here. `spec` is optional in
    /// every version (Accurate documents a SubNamespace without one).
    pub fn crd(&self) -> CustomResourceDefinition {
        let mut crd = sub_namespace_crd();
        if self.group == crate::crds::GROUP {
            return crd;
        }
        crd.metadata.name = Some(format!("{SUB_NAMESPACE_PLURAL}.{}", self.group));
        crd.spec.group = self.group.clone();
        // Arbor's category gathers Arbor's own kinds; this one belongs to the domain's system.
        // No short name either: `subns` stays arbor.dev's, whose CRD the chart also installs.
        crd.spec.names.categories = None;
        crd.spec.names.short_names = None;
        let mut served = crd.spec.versions[0].clone();
        served.name = self.version.clone();
        let unserved = ACCURATE_UNSERVED_VERSIONS.iter().map(|name| {
            let mut version = served.clone();
            version.name = (*name).to_owned();
            version.served = false;
            version.storage = false;
            version
        });
        let mut versions: Vec<_> = std::iter::once(served.clone()).chain(unserved).collect();
        versions.sort_by(|a, b| a.name.cmp(&b.name));
        crd.spec.versions = versions;
        crd
    }
}

/// `arbor.dev`'s SubNamespace CRD, with `spec` optional.
pub fn sub_namespace_crd() -> CustomResourceDefinition {
    let mut crd = <SubNamespace as kube::CustomResourceExt>::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            && let Some(required) = schema.required.as_mut()
        {
            required.retain(|field| field != "spec");
            if required.is_empty() {
                schema.required = None;
            }
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_follows_the_domain() {
        assert_eq!(
            SubNamespaceApi::for_domain("accurate.cybozu.com").api_version(),
            "accurate.cybozu.com/v2"
        );
        assert_eq!(
            SubNamespaceApi::for_domain("innu.cybozu.com").api_version(),
            "innu.cybozu.com/v2"
        );
        assert_eq!(
            SubNamespaceApi::for_domain("arbor.dev").api_version(),
            "arbor.dev/v1alpha1"
        );
        assert_eq!(
            SubNamespaceApi::for_domain("example.com").api_version(),
            "arbor.dev/v1alpha1"
        );
    }

    #[test]
    fn spec_is_optional_in_every_version() {
        for domain in ["arbor.dev", "accurate.cybozu.com", "innu.cybozu.com"] {
            let crd = SubNamespaceApi::for_domain(domain).crd();
            for version in &crd.spec.versions {
                let schema = version.schema.as_ref().unwrap();
                let required = schema.open_api_v3_schema.as_ref().unwrap().required.clone();
                assert!(
                    !required.unwrap_or_default().contains(&"spec".to_owned()),
                    "{domain} {}",
                    version.name
                );
            }
        }
    }

    #[test]
    fn accurate_crd_stores_v2_and_lists_v1_and_v2alpha1_unserved() {
        let crd = SubNamespaceApi::for_domain("accurate.cybozu.com").crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("subnamespaces.accurate.cybozu.com")
        );
        let versions: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1", false, false),
                ("v2", true, true),
                ("v2alpha1", false, false)
            ]
        );
    }
}
