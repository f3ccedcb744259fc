//! The ValidatingWebhookConfiguration and the Service the API server reaches it through.

mod common;

use common::NAMESPACE;
use common::manifest::render;
use common::value_sets::{self, ValueSet};
use common::workload::component_name;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingWebhook, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn webhooks(set: &ValueSet) -> Vec<ValidatingWebhook> {
    let rendered = render(set);
    let configuration: ValidatingWebhookConfiguration =
        rendered.get("ValidatingWebhookConfiguration", &component_name("webhook"));
    configuration.webhooks.unwrap_or_default()
}

/// (group, resource) pairs a webhook's rules send to Arbor.
fn covered(webhook: &ValidatingWebhook) -> Vec<(String, String, Vec<String>)> {
    webhook
        .rules
        .iter()
        .flatten()
        .flat_map(|rule| {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            let operations = rule.operations.clone().unwrap_or_default();
            groups.into_iter().flat_map(move |group| {
                let operations = operations.clone();
                resources
                    .clone()
                    .into_iter()
                    .map(move |resource| (group.clone(), resource, operations.clone()))
            })
        })
        .collect()
}

#[test]
fn the_webhook_reviews_arbors_kinds_and_namespaces() {
    let all = webhooks(&value_sets::defaults());
    assert_eq!(all.len(), 1, "one webhook without drift prevention");
    let webhook = &all[0];
    let covered = covered(webhook);
    let operations_of = |group: &str, resource: &str| {
        covered
            .iter()
            .find(|(g, r, _)| g == group && r == resource)
            .map(|(_, _, operations)| operations.clone())
            .unwrap_or_else(|| panic!("no rule for {group}/{resource}"))
    };
    for resource in [
        "gittracks",
        "clustergittracks",
        "gittrackobjects",
        "clustergittrackobjects",
    ] {
        let operations = operations_of("arbor.dev", resource);
        assert!(
            operations.contains(&"CREATE".to_owned()) && operations.contains(&"UPDATE".to_owned()),
            "{resource}"
        );
    }
    for (group, resource) in [("arbor.dev", "subnamespaces"), ("", "namespaces")] {
        let operations = operations_of(group, resource);
        assert!(
            operations.contains(&"DELETE".to_owned()),
            "{resource}: deleting a parent with children is refused, so DELETE is reviewed"
        );
    }
    assert_eq!(webhook.side_effects, "None");
    assert_eq!(webhook.admission_review_versions, vec!["v1".to_owned()]);
    assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
    let service = webhook
        .client_config
        .service
        .clone()
        .expect("a service reference");
    assert_eq!(service.name, component_name("webhook"));
    assert_eq!(service.namespace, NAMESPACE);
    assert_eq!(service.port, Some(443));
}

#[test]
fn the_webhook_never_reviews_kube_system_or_its_own_namespace() {
    for webhook in webhooks(&value_sets::cert_manager_monitoring_network_policies()) {
        let selector = webhook
            .namespace_selector
            .clone()
            .expect("a namespaceSelector");
        let excluded = selector
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .find(|expression| {
                expression.key == "kubernetes.io/metadata.name" && expression.operator == "NotIn"
            })
            .and_then(|expression| expression.values)
            .unwrap_or_default();
        for namespace in ["kube-system", NAMESPACE] {
            assert!(
                excluded.contains(&namespace.to_owned()),
                "{}: {namespace} is not excluded",
                webhook.name
            );
        }
    }
}

#[test]
fn failure_policy_is_a_value() {
    for webhook in webhooks(&ValueSet::new("ignore", &["webhook.failurePolicy=Ignore"])) {
        assert_eq!(webhook.failure_policy.as_deref(), Some("Ignore"));
    }
}

#[test]
fn drift_prevention_reviews_every_object_with_the_management_label() {
    let all = webhooks(&ValueSet::new(
        "drift",
        &[
            "webhook.preventDrift=true",
            "managementLabel=nomos.dev/managed=enabled",
        ],
    ));
    let drift = all
        .iter()
        .find(|webhook| webhook.name == "drift.arbor.dev")
        .expect("a drift webhook when preventDrift is on");
    let labels = drift
        .object_selector
        .clone()
        .and_then(|selector| selector.match_labels)
        .unwrap_or_default();
    assert_eq!(
        labels.get("nomos.dev/managed").map(String::as_str),
        Some("enabled")
    );
    let covered = covered(drift);
    assert!(
        covered
            .iter()
            .any(|(group, resource, operations)| group == "*"
                && resource == "*"
                && operations.contains(&"UPDATE".to_owned())
                && operations.contains(&"DELETE".to_owned()))
    );
}

#[test]
fn the_webhook_service_maps_443_to_the_webhook_port() {
    let rendered = render(&value_sets::defaults());
    let service: Service = rendered.get("Service", &component_name("webhook"));
    let port = service
        .spec
        .and_then(|spec| spec.ports)
        .unwrap_or_default()
        .into_iter()
        .find(|port| port.port == 443)
        .expect("port 443");
    assert_eq!(
        port.target_port,
        Some(IntOrString::String("webhook".to_owned()))
    );
}

#[test]
fn without_the_webhook_there_is_no_webhook_configuration() {
    let rendered = render(&value_sets::webhook_disabled());
    assert!(
        rendered
            .of_kind("ValidatingWebhookConfiguration")
            .is_empty()
    );
}
