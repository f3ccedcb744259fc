//! The controllers' pods: hardened, probed, bounded, and started with the flags their
//! binaries take.

mod common;

use common::manifest::{Rendered, render};
use common::value_sets::{self, ValueSet};
use common::workload::{
    args, assert_flags, component_name, container, deployment, flag_value, pod_spec,
};
use common::{COMPONENTS, NAMESPACE};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn deployments(rendered: &Rendered) -> Vec<Deployment> {
    let deployments: Vec<Deployment> = rendered.typed_of_kind("Deployment");
    assert!(
        !deployments.is_empty(),
        "[{}] renders no Deployment",
        rendered.set
    );
    deployments
}

#[test]
fn every_container_runs_as_non_root_with_a_read_only_root_and_no_capabilities() {
    for set in value_sets::all() {
        let rendered = render(&set);
        for deployment in deployments(&rendered) {
            let name = deployment.metadata.name.clone().unwrap_or_default();
            let pod = pod_spec(&deployment);
            let pod_security = pod.security_context.clone().unwrap_or_default();
            assert_eq!(
                pod_security.run_as_non_root,
                Some(true),
                "[{}] {name}: pod runAsNonRoot",
                set.name
            );
            for container in pod
                .containers
                .iter()
                .chain(pod.init_containers.iter().flatten())
            {
                let at = format!("[{}] {name}/{}", set.name, container.name);
                let security = container
                    .security_context
                    .clone()
                    .unwrap_or_else(|| panic!("{at}: no securityContext"));
                assert_eq!(security.run_as_non_root, Some(true), "{at}: runAsNonRoot");
                assert_eq!(security.run_as_user, Some(65532), "{at}: runAsUser");
                assert_eq!(
                    security.read_only_root_filesystem,
                    Some(true),
                    "{at}: readOnlyRootFilesystem"
                );
                assert_eq!(
                    security.allow_privilege_escalation,
                    Some(false),
                    "{at}: allowPrivilegeEscalation"
                );
                let dropped = security
                    .capabilities
                    .and_then(|caps| caps.drop)
                    .unwrap_or_default();
                assert_eq!(dropped, vec!["ALL".to_owned()], "{at}: capabilities.drop");
                let seccomp = security
                    .seccomp_profile
                    .or(pod_security.seccomp_profile.clone())
                    .unwrap_or_else(|| panic!("{at}: no seccompProfile"));
                assert_eq!(seccomp.type_, "RuntimeDefault", "{at}: seccompProfile");
                assert!(
                    container
                        .volume_mounts
                        .iter()
                        .flatten()
                        .any(|mount| mount.mount_path == "/tmp"),
                    "{at}: a read-only root needs a writable /tmp"
                );
            }
        }
    }
}

#[test]
fn every_deployment_probes_health_on_the_admin_port_and_bounds_its_resources() {
    let admin = Some(IntOrString::String("admin".to_owned()));
    for set in value_sets::all() {
        let rendered = render(&set);
        for deployment in deployments(&rendered) {
            let name = deployment.metadata.name.clone().unwrap_or_default();
            for container in pod_spec(&deployment).containers {
                let at = format!("[{}] {name}/{}", set.name, container.name);
                let admin_port = container
                    .ports
                    .iter()
                    .flatten()
                    .find(|port| port.name.as_deref() == Some("admin"))
                    .unwrap_or_else(|| panic!("{at}: no port named admin"));
                assert_eq!(admin_port.container_port, 8080, "{at}: admin port");
                for (probe, path) in [
                    (container.liveness_probe.clone(), "/healthz"),
                    (container.readiness_probe.clone(), "/readyz"),
                ] {
                    let get = probe
                        .and_then(|probe| probe.http_get)
                        .unwrap_or_else(|| panic!("{at}: no HTTP probe on {path}"));
                    assert_eq!(get.path.as_deref(), Some(path), "{at}");
                    assert_eq!(Some(get.port), admin, "{at}: {path} on the admin port");
                }
                let resources = container
                    .resources
                    .clone()
                    .unwrap_or_else(|| panic!("{at}: no resources"));
                for (what, quantities) in [
                    ("requests", resources.requests),
                    ("limits", resources.limits),
                ] {
                    let quantities = quantities.unwrap_or_default();
                    for resource in ["cpu", "memory"] {
                        assert!(
                            quantities.contains_key(resource),
                            "{at}: no {what}.{resource}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_component_takes_the_common_flags_and_each_controller_its_lease_and_pod_identity() {
    let rendered = render(&value_sets::defaults());
    for component in COMPONENTS {
        assert_flags(
            &rendered,
            component,
            &[
                ("--admin-addr", "0.0.0.0:8080"),
                ("--grpc-addr", "0.0.0.0:9090"),
                ("--log-level", "info"),
                ("--log-format", "json"),
                ("--tls-cert", "/etc/arbor/tls/tls.crt"),
                ("--tls-key", "/etc/arbor/tls/tls.key"),
                ("--tls-client-ca", "/etc/arbor/tls/ca.crt"),
            ],
        );
        let container = container(&rendered, component);
        assert_eq!(
            container.image.as_deref(),
            Some(format!("example.invalid/arbor/arbor-{component}:0.1.0").as_str()),
            "{component}: image from image.registry and the appVersion"
        );
        let env = container.env.clone().unwrap_or_default();
        if component == "webhook" {
            // Every webhook replica answers admission requests; none is elected, so neither
            // the lease flags nor the pod identity they use are passed.
            let args = args(&rendered, component);
            for flag in ["--leader-election", "--lease-name"] {
                assert_eq!(
                    flag_value(&args, flag),
                    None,
                    "the webhook is passed {flag}"
                );
            }
            assert!(env.is_empty(), "the webhook needs no pod identity: {env:?}");
        } else {
            let lease = component_name(component);
            assert_flags(
                &rendered,
                component,
                &[("--leader-election", "true"), ("--lease-name", &lease)],
            );
            for (variable, field) in [
                ("POD_NAME", "metadata.name"),
                ("POD_NAMESPACE", "metadata.namespace"),
            ] {
                let from = env
                    .iter()
                    .find(|var| var.name == variable)
                    .and_then(|var| var.value_from.clone())
                    .and_then(|from| from.field_ref)
                    .unwrap_or_else(|| {
                        panic!("{component}: {variable} is not from the downward API")
                    });
                assert_eq!(from.field_path, field, "{component}: {variable}");
            }
        }
        let grpc = container
            .ports
            .iter()
            .flatten()
            .find(|port| port.name.as_deref() == Some("grpc"))
            .unwrap_or_else(|| panic!("{component}: no grpc port"));
        assert_eq!(grpc.container_port, 9090);
        let tls_mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|mount| mount.mount_path == "/etc/arbor/tls")
            .unwrap_or_else(|| panic!("{component}: nothing mounted at /etc/arbor/tls"));
        let tls_volume = pod_spec(&deployment(&rendered, component))
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|volume| volume.name == tls_mount.name)
            .and_then(|volume| volume.secret)
            .and_then(|secret| secret.secret_name);
        assert_eq!(
            tls_volume,
            Some(format!("{}-grpc-tls", component_name(component)))
        );
    }
}

#[test]
fn each_controller_takes_its_own_flags() {
    let rendered = render(&value_sets::defaults());
    let gitsync_addr = format!("https://arbor-gitsync.{NAMESPACE}.svc:9090");
    assert_flags(
        &rendered,
        "gitsync",
        &[
            ("--gittrack-mode", "Enabled"),
            ("--clustergittrack-mode", "IncludeNamespaced"),
            ("--max-prune-fraction", "0.5"),
            ("--resync-period", "10m"),
            ("--max-concurrent-writes", "16"),
            ("--management-label", "arbor.dev/managed=enabled"),
            ("--cache-dir", "/var/cache/arbor"),
        ],
    );
    assert_flags(
        &rendered,
        "hierarchy",
        &[
            ("--domain", "arbor.dev"),
            ("--config", "/etc/arbor/hierarchy/config.yaml"),
        ],
    );
    assert_flags(
        &rendered,
        "observer",
        &[
            ("--gitsync-addr", &gitsync_addr),
            ("--management-label", "arbor.dev/managed=enabled"),
        ],
    );
    assert_flags(
        &rendered,
        "webhook",
        &[
            ("--webhook-addr", "0.0.0.0:9443"),
            ("--webhook-cert", "/etc/arbor/webhook-tls/tls.crt"),
            ("--webhook-key", "/etc/arbor/webhook-tls/tls.key"),
            ("--clustergittrack-mode", "IncludeNamespaced"),
            ("--gittrack-mode", "Enabled"),
            ("--domain", "arbor.dev"),
            ("--management-label", "arbor.dev/managed=enabled"),
            ("--hierarchy-config", "/etc/arbor/hierarchy/config.yaml"),
            ("--allow-cascading-deletion", "false"),
            ("--prevent-drift", "false"),
            ("--drift-unreachable", "allow"),
            ("--gitsync-addr", &gitsync_addr),
        ],
    );
}

#[test]
fn with_drift_prevention_the_webhook_lets_all_of_arbors_writers_through() {
    let writers = ["gitsync", "hierarchy", "observer"]
        .map(|component| {
            format!(
                "system:serviceaccount:{NAMESPACE}:{}",
                component_name(component)
            )
        })
        .join(",");
    let without = render(&value_sets::defaults());
    assert_eq!(
        flag_value(&args(&without, "webhook"), "--arbor-service-accounts"),
        None,
        "without drift prevention nobody needs letting through"
    );
    // Even the writers this release does not deploy: drift prevention must not refuse them
    // when they are deployed later, or by another release in this namespace.
    for set in [
        ValueSet::new("drift prevention", &["webhook.preventDrift=true"]),
        ValueSet::new(
            "drift prevention, webhook alone",
            &[
                "webhook.preventDrift=true",
                "webhook.driftUnreachable=deny",
                "gitsync.enabled=false",
                "hierarchy.enabled=false",
                "observer.enabled=false",
            ],
        ),
    ] {
        let rendered = render(&set);
        assert_flags(
            &rendered,
            "webhook",
            &[
                ("--prevent-drift", "true"),
                ("--arbor-service-accounts", &writers),
            ],
        );
    }
}

#[test]
fn the_paths_the_flags_name_are_mounted() {
    let rendered = render(&value_sets::defaults());
    for (component, mount_path) in [
        ("gitsync", "/var/cache/arbor"),
        ("hierarchy", "/etc/arbor/hierarchy"),
        ("webhook", "/etc/arbor/hierarchy"),
        ("webhook", "/etc/arbor/webhook-tls"),
    ] {
        let mounted = container(&rendered, component)
            .volume_mounts
            .unwrap_or_default()
            .iter()
            .any(|mount| mount.mount_path == mount_path);
        assert!(mounted, "{component}: nothing mounted at {mount_path}");
    }
    let webhook = container(&rendered, "webhook");
    let webhook_port = webhook
        .ports
        .iter()
        .flatten()
        .find(|port| port.name.as_deref() == Some("webhook"))
        .expect("the webhook container has a port named webhook");
    assert_eq!(webhook_port.container_port, 9443);
}

#[test]
fn gitsync_and_the_webhook_read_the_same_ownership_modes() {
    let rendered = render(&ValueSet::new(
        "modes",
        &[
            "ownership.gitTrackMode=Disabled",
            "ownership.clusterGitTrackMode=ExcludeNamespaced",
        ],
    ));
    for component in ["gitsync", "webhook"] {
        assert_flags(
            &rendered,
            component,
            &[
                ("--gittrack-mode", "Disabled"),
                ("--clustergittrack-mode", "ExcludeNamespaced"),
            ],
        );
    }
}

#[test]
fn gitsync_and_the_webhook_are_restricted_to_a_namespace_only_when_one_is_set() {
    let defaults = render(&value_sets::defaults());
    let scoped = render(&ValueSet::new(
        "one namespace",
        &[
            "ownership.namespace=team-a",
            "ownership.clusterGitTrackMode=Disabled",
        ],
    ));
    for component in ["gitsync", "webhook"] {
        assert_eq!(flag_value(&args(&defaults, component), "--namespace"), None);
        assert_flags(
            &scoped,
            component,
            &[
                ("--namespace", "team-a"),
                ("--clustergittrack-mode", "Disabled"),
            ],
        );
    }
}

#[test]
fn the_domain_and_the_management_label_reach_every_controller_that_uses_them() {
    let rendered = render(&ValueSet::new(
        "nomos keys",
        &[
            "domain=accurate.cybozu.com",
            "managementLabel=nomos.dev/managed=enabled",
        ],
    ));
    for component in ["hierarchy", "webhook"] {
        assert_flags(&rendered, component, &[("--domain", "accurate.cybozu.com")]);
    }
    for component in ["gitsync", "observer", "webhook"] {
        assert_flags(
            &rendered,
            component,
            &[("--management-label", "nomos.dev/managed=enabled")],
        );
    }
}

#[test]
fn the_image_registry_and_tag_are_values() {
    let rendered = render(&ValueSet::new(
        "registry",
        &[
            "image.registry=registry.example.invalid/team",
            "image.tag=1.2.3",
        ],
    ));
    for component in COMPONENTS {
        assert_eq!(
            container(&rendered, component).image,
            Some(format!(
                "registry.example.invalid/team/arbor-{component}:1.2.3"
            ))
        );
    }
}

#[test]
fn the_observer_and_the_webhook_run_two_replicas_by_default() {
    let rendered = render(&value_sets::defaults());
    for component in ["observer", "webhook"] {
        let replicas = deployment(&rendered, component).spec.replicas;
        assert_eq!(replicas, Some(2), "{component}");
    }
}

/// The values of every `flag` in `args` (a repeated flag), in order.
fn flag_values(args: &[String], flag: &str) -> Vec<String> {
    args.windows(2)
        .filter(|pair| pair[0] == flag)
        .map(|pair| pair[1].clone())
        .collect()
}

/// issue #23 items 5 and 11 in the chart: every component's listeners are bounded from
/// `listeners`, and its gRPC calls are authorized by `grpcAuthorization`: on gitsync the
/// observer's and the webhook's certificates (named by their Service, a SAN of each) may call
/// ReportDrift and GetDeclared, the operators' certificates everything else everywhere.
#[test]
fn listeners_are_bounded_and_grpc_calls_authorized_per_caller() {
    let rendered = render(&value_sets::defaults());
    for component in COMPONENTS {
        assert_flags(
            &rendered,
            component,
            &[
                ("--max-connections", "256"),
                ("--tls-handshake-timeout", "5s"),
                ("--idle-timeout", "2m"),
                ("--http2-keepalive-interval", "30s"),
                ("--http2-keepalive-timeout", "10s"),
            ],
        );
        let rules = flag_values(&args(&rendered, component), "--grpc-allow");
        let mut expected = Vec::new();
        if component == "gitsync" {
            // gitsync's replicas pass each other what they cannot answer alone.
            let gitsync = component_name("gitsync");
            expected.push(format!(
                "SyncService/ReportDrift={},{gitsync}",
                component_name("observer")
            ));
            expected.push(format!(
                "SyncService/GetDeclared={},{gitsync}",
                component_name("webhook")
            ));
            expected.push(format!("*=arbor-operator,{gitsync}"));
        } else {
            expected.push("*=arbor-operator".to_owned());
        }
        assert_eq!(rules, expected, "{component}: --grpc-allow");
    }
    let operator: k8s_openapi::api::core::v1::Secret =
        rendered.get("Secret", &format!("{}-operator-tls", common::RELEASE));
    let data = operator.data.unwrap_or_default();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(data.contains_key(key), "the operator Secret has {key}");
    }
}

/// The shutdown grace each container's binary runs with: its `--shutdown-grace`, else the
/// binary's default (read from the flags, not restated here).
fn shutdown_grace(args: &[String]) -> std::time::Duration {
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        common: arbor_runtime::CommonArgs,
    }

    match flag_value(args, "--shutdown-grace") {
        Some(value) => arbor_runtime::flags::parse_duration(value).expect("a valid duration"),
        None => {
            Flags::try_parse_from(["arbor"])
                .expect("the common flags parse with their defaults")
                .common
                .shutdown_grace
        }
    }
}

/// A stopping component waits for its writes, then releases its Lease, then stops its servers,
/// each for at most its shutdown grace: Kubernetes must not kill it before the three are over,
/// or the Lease is left to expire and the next replica waits a lease duration to take over.
#[test]
fn every_pod_is_given_time_for_its_whole_shutdown() {
    for set in value_sets::all() {
        let rendered = render(&set);
        for deployment in deployments(&rendered) {
            let name = deployment.metadata.name.clone().unwrap_or_default();
            let pod = pod_spec(&deployment);
            let given = pod.termination_grace_period_seconds.unwrap_or_else(|| {
                panic!(
                    "[{}] {name}: no terminationGracePeriodSeconds (Kubernetes' 30 s applies)",
                    set.name
                )
            });
            for container in &pod.containers {
                let needed = shutdown_grace(container.args.as_deref().unwrap_or_default()) * 3;
                assert!(
                    u64::try_from(given).unwrap_or(0) > needed.as_secs(),
                    "[{}] {name}/{}: terminationGracePeriodSeconds {given} does not cover three shutdown graces ({needed:?})",
                    set.name,
                    container.name
                );
            }
        }
    }
}
