//! `pods/portforward` through kube-rs's own client (`Api::<Pod>::portforward`): the WebSocket
//! protocol as kube-rs speaks it to kube-apiserver, bridged to a loopback "pod" named by the
//! Pod's annotation; refusals as kube-apiserver words them.

mod support;

use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::authz::DenyRule;
use arbor_kube_emu::portforward::ADDRESS_ANNOTATION;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A loopback server standing in for a container: it answers every line with `echo: <line>`.
async fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(read) = stream.read(&mut buffer).await {
                    if read == 0 {
                        return;
                    }
                    let mut answer = b"echo: ".to_vec();
                    answer.extend_from_slice(&buffer[..read]);
                    if stream.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A running pod `name` in `default` whose port 9090 is `address`.
async fn running_pod(client: &kube::Client, name: &str, annotation: &str) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {ADDRESS_ANNOTATION: annotation}},
        "spec": {"containers": [{"name": "app", "image": "app", "ports": [{"containerPort": 9090}]}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    pods
}

#[tokio::test]
async fn bytes_reach_the_pods_address_and_come_back() {
    let (_emu, client) = support::start().await;
    let echo = echo_server().await;
    let pods = running_pod(&client, "app", &format!("9090={echo}")).await;

    assert_eq!(round_trip(&pods, "hello").await, "echo: hello");
    // A second forward over a new connection works as well: every connection is its own.
    assert_eq!(round_trip(&pods, "again").await, "echo: again");
}

/// Sends `text` to port 9090 of pod `app` over a new port-forward; what comes back.
async fn round_trip(pods: &Api<Pod>, text: &str) -> String {
    let mut forwarder = pods.portforward("app", &[9090]).await.unwrap();
    let mut stream = forwarder.take_stream(9090).expect("a stream for 9090");
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; "echo: ".len() + text.len()];
    stream.read_exact(&mut answer).await.unwrap();
    String::from_utf8(answer).unwrap()
}

#[tokio::test]
async fn a_port_nothing_listens_on_gets_the_kubelets_error_message() {
    let (_emu, client) = support::start().await;
    let echo = echo_server().await;
    let pods = running_pod(&client, "app", &format!("9090={echo}")).await;

    let mut forwarder = pods.portforward("app", &[8080]).await.unwrap();
    let error = forwarder.take_error(8080).unwrap().await;
    let message = error.expect("an error message on the error channel");
    assert!(
        message.starts_with("error forwarding port 8080 to pod default/app"),
        "{message}"
    );
    assert!(message.contains("does not name it"), "{message}");
}

#[tokio::test]
async fn port_forward_needs_create_on_pods_portforward() {
    let rule = DenyRule::parse("deny verb=create resource=pods/portforward").unwrap();
    let emu = KubeEmu::builder().deny(rule).start().await.unwrap();
    let client = support::client(&emu).await;
    let echo = echo_server().await;
    let pods = running_pod(&client, "app", &format!("9090={echo}")).await;

    let error = pods
        .portforward("app", &[9090])
        .await
        .err()
        .expect("refused");
    let status = support::api_status(error);
    assert_eq!(status.code, 403);
    assert!(
        status
            .message
            .contains("cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"default\""),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn a_missing_pod_is_not_found() {
    let (_emu, client) = support::start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let error = pods
        .portforward("gone", &[9090])
        .await
        .err()
        .expect("refused");
    let status = support::api_status(error);
    assert_eq!(status.code, 404);
    assert_eq!(status.message, "pods \"gone\" not found");
}
