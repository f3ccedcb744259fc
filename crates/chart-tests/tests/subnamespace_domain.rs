//! #17.1: the SubNamespace kind follows `domain`. Under Accurate's or Innu's domain the chart
//! installs that group's SubNamespace CRD (kept on uninstall, `v2` served and stored, `spec`
//! optional), and the hierarchy controller's RBAC, the webhook's RBAC and the webhook
//! configuration name that group; under the default domain nothing of that is rendered.

mod common;

use common::manifest::render;
use common::value_sets::ValueSet;
use common::workload::component_name;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn groups_granted_subnamespaces(role: &ClusterRole) -> Vec<String> {
    role.rules
        .iter()
        .flatten()
        .filter(|rule| {
            rule.resources
                .iter()
                .flatten()
                .any(|r| r == "subnamespaces")
        })
        .flat_map(|rule| rule.api_groups.clone().unwrap_or_default())
        .collect()
}

#[test]
fn the_domain_s_subnamespace_crd_and_rbac_are_rendered() {
    for domain in ["accurate.cybozu.com", "innu.cybozu.com"] {
        let set = ValueSet::new(domain, &[&format!("domain={domain}")]);
        let rendered = render(&set);
        let crd: CustomResourceDefinition = rendered.get(
            "CustomResourceDefinition",
            &format!("subnamespaces.{domain}"),
        );
        let served: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert!(served.contains(&("v2", true, true)), "{domain}: {served:?}");
        assert_eq!(
            crd.metadata
                .annotations
                .unwrap_or_default()
                .get("helm.sh/resource-policy")
                .map(String::as_str),
            Some("keep")
        );
        for version in &crd.spec.versions {
            let required = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| s.required.clone())
                .unwrap_or_default();
            assert!(!required.contains(&"spec".to_owned()), "{domain}");
        }
        for component in ["hierarchy", "webhook"] {
            let role: ClusterRole = rendered.get("ClusterRole", &component_name(component));
            let groups = groups_granted_subnamespaces(&role);
            assert!(
                !groups.is_empty() && groups.iter().all(|g| g == domain),
                "{domain} {component}: {groups:?}"
            );
        }
        let webhook: ValidatingWebhookConfiguration =
            rendered.get("ValidatingWebhookConfiguration", &component_name("webhook"));
        let rule_groups: Vec<String> = webhook
            .webhooks
            .iter()
            .flatten()
            .flat_map(|w| w.rules.clone().unwrap_or_default())
            .filter(|r| {
                r.resources
                    .iter()
                    .flatten()
                    .any(|res| res == "subnamespaces")
            })
            .flat_map(|r| r.api_groups.unwrap_or_default())
            .collect();
        assert_eq!(rule_groups, [domain.to_owned()]);
    }
}

#[test]
fn the_default_domain_renders_no_other_subnamespace_crd() {
    let rendered = render(&ValueSet::new("defaults", &[]));
    for domain in ["accurate.cybozu.com", "innu.cybozu.com"] {
        assert!(
            rendered
                .find(
                    "CustomResourceDefinition",
                    &format!("subnamespaces.{domain}")
                )
                .is_none()
        );
    }
}
