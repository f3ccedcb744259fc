//! Which objects each value set renders: disabled components, disruption budgets, Services,
//! NetworkPolicies, the ServiceMonitor, the hierarchy configuration and the CRDs.

mod common;

use arbor_policy::keys::Keys;
use common::manifest::{Manifest, render};
use common::value_sets::{self, ValueSet};
use common::workload::{assert_flags, component_name, hierarchy_config};
use common::{COMPONENTS, NAMESPACE, workspace_root};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

fn component_of(manifest: &Manifest) -> Option<&str> {
    manifest.object["metadata"]["labels"]["app.kubernetes.io/component"].as_str()
}

#[test]
fn a_disabled_component_renders_nothing() {
    let gitsync_only = render(&value_sets::gitsync_only_one_namespace());
    let components: std::collections::BTreeSet<&str> = gitsync_only
        .manifests
        .iter()
        .filter_map(component_of)
        .collect();
    assert_eq!(components.into_iter().collect::<Vec<_>>(), vec!["gitsync"]);

    let no_webhook = render(&value_sets::webhook_disabled());
    assert!(
        no_webhook
            .manifests
            .iter()
            .all(|manifest| component_of(manifest) != Some("webhook"))
    );
    for component in ["gitsync", "hierarchy", "observer"] {
        assert!(
            no_webhook
                .find("Deployment", &component_name(component))
                .is_some(),
            "{component}"
        );
    }
}

#[test]
fn disruption_budgets_cover_every_replicated_component_and_only_those() {
    let budgets = |set: &ValueSet| -> Vec<String> {
        render(set)
            .typed_of_kind::<PodDisruptionBudget>("PodDisruptionBudget")
            .into_iter()
            .map(|budget| {
                let spec = budget.spec.unwrap_or_default();
                assert_eq!(spec.min_available, Some(IntOrString::Int(1)));
                budget.metadata.name.unwrap_or_default()
            })
            .collect()
    };
    assert_eq!(
        budgets(&value_sets::defaults()),
        vec![component_name("observer"), component_name("webhook")]
    );
    assert_eq!(
        budgets(&ValueSet::new("two gitsync", &["gitsync.replicas=2"])),
        vec![
            component_name("gitsync"),
            component_name("observer"),
            component_name("webhook")
        ]
    );
}

#[test]
fn gitsync_and_the_observer_share_their_work_by_shards_only_when_asked() {
    let defaults = render(&value_sets::defaults());
    for component in ["gitsync", "observer"] {
        assert_flags(&defaults, component, &[("--shards", "1")]);
    }
    assert_eq!(
        common::workload::deployment(&defaults, "gitsync")
            .spec
            .replicas,
        Some(1)
    );
    for component in ["hierarchy", "webhook"] {
        let args = common::workload::args(&defaults, component);
        assert_eq!(
            common::workload::flag_value(&args, "--shards"),
            None,
            "{component}"
        );
    }
    let sharded = render(&ValueSet::new(
        "sharded",
        &[
            "gitsync.replicas=3",
            "gitsync.shards=6",
            "observer.replicas=3",
            "observer.shards=12",
        ],
    ));
    assert_flags(&sharded, "gitsync", &[("--shards", "6")]);
    assert_flags(&sharded, "observer", &[("--shards", "12")]);
    // A gitsync replica passes a request about another replica's shard to it: each says on
    // its membership Lease where it serves (its pod IP), verified as the Service's certificate.
    let service_dns = format!("{}.{NAMESPACE}.svc", component_name("gitsync"));
    assert_flags(
        &sharded,
        "gitsync",
        &[
            ("--grpc-advertise-address", "https://$(POD_IP):9090"),
            ("--grpc-advertise-server-name", &service_dns),
        ],
    );
    let pod_ip = common::workload::container(&sharded, "gitsync")
        .env
        .unwrap_or_default()
        .into_iter()
        .find(|var| var.name == "POD_IP")
        .and_then(|var| var.value_from)
        .and_then(|from| from.field_ref)
        .map(|field| field.field_path);
    assert_eq!(pod_ip.as_deref(), Some("status.podIP"));
    for component in ["gitsync", "observer"] {
        let replicas = common::workload::deployment(&sharded, component)
            .spec
            .replicas;
        assert_eq!(replicas, Some(3), "{component}");
    }
}

#[test]
fn every_component_has_a_grpc_service_and_a_metrics_service() {
    let rendered = render(&value_sets::defaults());
    for component in COMPONENTS {
        let grpc: Service = rendered.get("Service", &component_name(component));
        let ports = grpc.spec.and_then(|spec| spec.ports).unwrap_or_default();
        assert!(
            ports
                .iter()
                .any(|port| port.port == 9090 && port.name.as_deref() == Some("grpc")),
            "{component}"
        );
        let metrics = rendered
            .find("Service", &format!("{}-metrics", component_name(component)))
            .unwrap_or_else(|| panic!("{component}: no metrics Service"));
        assert_eq!(
            metrics.object["metadata"]["labels"]["arbor.dev/metrics"],
            Value::String("true".to_owned())
        );
    }
}

#[test]
fn network_policies_open_the_webhook_to_all_and_grpc_to_arbor_only() {
    let rendered = render(&value_sets::cert_manager_monitoring_network_policies());
    for component in COMPONENTS {
        let policy: NetworkPolicy = rendered.get("NetworkPolicy", &component_name(component));
        let ingress = policy
            .spec
            .and_then(|spec| spec.ingress)
            .unwrap_or_default();
        let rule_for = |port: &str| {
            ingress
                .iter()
                .find(|rule| {
                    rule.ports
                        .iter()
                        .flatten()
                        .any(|p| p.port == Some(IntOrString::String(port.to_owned())))
                })
                .unwrap_or_else(|| panic!("{component}: no ingress rule for {port}"))
        };
        let grpc_peers = rule_for("grpc").from.clone().unwrap_or_default();
        assert!(
            !grpc_peers.is_empty(),
            "{component}: gRPC is not open to all"
        );
        for peer in grpc_peers {
            let labels = peer
                .pod_selector
                .and_then(|selector| selector.match_labels)
                .unwrap_or_default();
            assert_eq!(
                labels.get("app.kubernetes.io/instance").map(String::as_str),
                Some("arbor")
            );
            assert!(
                peer.namespace_selector.is_none(),
                "{component}: gRPC only from this namespace"
            );
        }
        let admin_peers = rule_for("admin").from.clone().unwrap_or_default();
        assert!(
            admin_peers
                .iter()
                .all(|peer| peer.namespace_selector.is_some()),
            "{component}: metrics from selected namespaces"
        );
        if component == "webhook" {
            assert!(
                rule_for("webhook").from.as_ref().is_none_or(Vec::is_empty),
                "the API server reaches the webhook from anywhere"
            );
        }
    }
    assert!(
        render(&value_sets::defaults())
            .of_kind("NetworkPolicy")
            .is_empty(),
        "off by default"
    );
}

#[test]
fn the_service_monitor_scrapes_the_metrics_services() {
    let rendered = render(&value_sets::cert_manager_monitoring_network_policies());
    let monitors = rendered.of_kind("ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    let spec = &monitors[0].object["spec"];
    assert_eq!(
        spec["selector"]["matchLabels"]["arbor.dev/metrics"],
        Value::String("true".to_owned())
    );
    assert_eq!(
        spec["endpoints"][0]["port"],
        Value::String("metrics".to_owned())
    );
    assert_eq!(
        spec["namespaceSelector"]["matchNames"][0],
        Value::String(NAMESPACE.to_owned())
    );
    assert!(
        render(&value_sets::defaults())
            .of_kind("ServiceMonitor")
            .is_empty(),
        "off by default"
    );
}

#[test]
fn the_hierarchy_configuration_is_one_arbor_hierarchy_accepts() {
    let takeover = workspace_root().join("deploy/values/accurate-takeover.yaml");
    let sets = [
        (value_sets::defaults(), "arbor.dev"),
        (
            ValueSet {
                name: "accurate takeover".to_owned(),
                args: vec!["--values".to_owned(), takeover.display().to_string()],
            },
            "accurate.cybozu.com",
        ),
    ];
    for (set, domain) in sets {
        let rendered = render(&set);
        assert_flags(&rendered, "hierarchy", &[("--domain", domain)]);
        let text = hierarchy_config(&rendered);
        let keys = Keys::for_domain(domain).expect("a valid domain");
        let path = std::path::Path::new("config.yaml");
        if let Err(error) = arbor_api::hierarchy_config::parse(path, &text, &keys) {
            panic!("[{}] {error}\n{text}", set.name);
        }
    }
}

#[test]
fn the_hierarchy_configuration_is_accurates_format_without_chart_only_fields() {
    let text = hierarchy_config(&render(&value_sets::defaults()));
    let config: Value = serde_saphyr::from_str(&text).expect("config.yaml is YAML");
    let keys: Vec<&str> = config
        .as_object()
        .expect("a map")
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "labelKeys",
        "annotationKeys",
        "subNamespaceLabelKeys",
        "subNamespaceAnnotationKeys",
        "watches",
        "propagateLabelKeyExcludes",
        "propagateAnnotationKeyExcludes",
        "namingPolicies",
    ] {
        assert!(keys.contains(&key), "config.yaml has no {key}: {text}");
    }
    let watches = config["watches"].as_array().expect("watches is a list");
    let kinds: Vec<&str> = watches
        .iter()
        .filter_map(|watch| watch["kind"].as_str())
        .collect();
    assert_eq!(kinds, vec!["Role", "RoleBinding", "Secret"]);
    for watch in watches {
        let mut fields: Vec<&str> = watch
            .as_object()
            .expect("a map")
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            vec!["group", "kind", "version"],
            "the chart-only resource field leaks into {watch}"
        );
    }
}

#[test]
fn the_chart_ships_every_arbor_crd() {
    let rendered = render(&value_sets::defaults());
    let mut kinds: Vec<String> = rendered
        .of_kind("CustomResourceDefinition")
        .into_iter()
        .filter(|crd| crd.object["spec"]["group"] == Value::String("arbor.dev".to_owned()))
        .filter_map(|crd| {
            crd.object["spec"]["names"]["kind"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "Application",
            "ClusterGitTrack",
            "ClusterGitTrackObject",
            "GitTrack",
            "GitTrackObject",
            "SubNamespace",
            "Sync"
        ],
        "charts/arbor/crds (generated by `make crds`) must hold every arbor.dev kind"
    );
}
