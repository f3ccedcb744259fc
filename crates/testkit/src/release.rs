//! The running [`System`] as the Helm chart's release looks in a cluster, so that a client
//! with nothing but the kubeconfig finds the components the way it would find them there.
//!
//! [`publish`] writes into the emulator, in [`SYSTEM_NAMESPACE`], for each running controller:
//! its Service `arbor-<component>` (the chart's selector labels, port `grpc` → target port
//! `grpc`), and one Running, Ready pod with those labels whose container port `grpc` (9090)
//! the emulator port-forwards to the process's gRPC address (the emulator's
//! `kube-emu.arbor.dev/port-forward` annotation, its stand-in for a kubelet); and the Secret
//! `arbor-operator-tls` with the client certificate the controllers accept from operators.
//! The controllers' certificates carry the Service DNS names ([`service_dns_names`]), as the
//! chart's do.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use arbor_demo::Error;
use arbor_demo::cluster::{apply, ensure_namespace};
pub use arbor_demo::system::{RELEASE, service_dns_names};
use arbor_demo::system::{SYSTEM_NAMESPACE, System};

/// The container port the chart gives every component's gRPC listener.
pub const GRPC_PORT: u16 = 9090;

/// The emulator's annotation mapping a pod's ports to loopback addresses.
const PORT_FORWARD_ANNOTATION: &str = "kube-emu.arbor.dev/port-forward";

/// The chart's selector labels of component `name`.
fn selector(name: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "arbor",
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": name,
    })
}

/// Publishes `system`'s running controllers and the operators' Secret (see the module docs).
pub async fn publish(system: &System) -> Result<(), Error> {
    let controllers = [
        ("gitsync", &system.gitsync),
        ("hierarchy", &system.hierarchy),
        ("observer", &system.observer),
        ("webhook", &system.webhook),
    ];
    for (name, controller) in controllers {
        if let Some(controller) = controller {
            publish_component(&system.client, name, controller.grpc).await?;
        }
    }
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path).map_err(Error::io(format!("reading {}", path.display())))
    };
    publish_operator_secret(
        &system.client,
        &read(&system.client_identity.cert)?,
        &read(&system.client_identity.key)?,
        system.tls.ca_pem(),
    )
    .await
}

/// The Secret `arbor-operator-tls` with a client certificate, its key and the CA.
pub async fn publish_operator_secret(
    client: &Client,
    cert_pem: &str,
    key_pem: &str,
    ca_pem: &str,
) -> Result<(), Error> {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("{RELEASE}-operator-tls"), "namespace": SYSTEM_NAMESPACE},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": cert_pem, "tls.key": key_pem, "ca.crt": ca_pem},
    });
    apply(client, &secret, None).await.map(drop)
}

/// Component `name`'s Service and its one ready pod `arbor-<name>-0`, whose gRPC port the
/// emulator forwards to `grpc`.
pub async fn publish_component(client: &Client, name: &str, grpc: SocketAddr) -> Result<(), Error> {
    ensure_namespace(client, SYSTEM_NAMESPACE).await?;
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": format!("{RELEASE}-{name}"), "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "selector": selector(name),
            "ports": [{"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"}],
        },
    });
    apply(client, &service, None).await?;
    let pod_name = format!("{RELEASE}-{name}-0");
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": SYSTEM_NAMESPACE,
            "labels": selector(name),
            "annotations": {PORT_FORWARD_ANNOTATION: format!("{GRPC_PORT}={grpc}")},
        },
        "spec": {"containers": [{
            "name": name,
            "image": format!("arbor-{name}"),
            "ports": [{"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"}],
        }]},
    });
    apply(client, &pod, None).await?;
    set_pod_ready(client, &pod_name, true).await
}

/// Marks pod `name` in [`SYSTEM_NAMESPACE`] Running and Ready, or Running and not Ready.
pub async fn set_pod_ready(client: &Client, name: &str, ready: bool) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let status = json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(Error::kube(format!("setting the status of pod {name}")))?;
    Ok(())
}
