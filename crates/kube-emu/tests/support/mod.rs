//! Shared test support: start an emulator, build a kube-rs client from its kubeconfig, send raw
//! requests when a test needs the exact status code and body.

#![allow(dead_code)]

pub mod webhook;

use std::time::Duration;

use std::collections::BTreeMap;

use arbor_kube_emu::{KubeEmu, KubeEmuBuilder};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

/// A bound for waits on asynchronous outcomes; generous, since the machine may be busy.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The client configuration a program would build from this kubeconfig.
pub async fn config_from(kubeconfig_yaml: &str) -> kube::Config {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig_yaml).expect("the kubeconfig parses");
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig is usable")
}

/// A kube-rs client configured from the emulator's kubeconfig, as any program would be.
pub async fn client(emu: &KubeEmu) -> kube::Client {
    kube::Client::try_from(config_from(&emu.kubeconfig_yaml()).await).expect("a client")
}

/// A client of the emulator that authenticates with `token` (say, from `KubeEmu::token_for`).
pub async fn client_as(emu: &KubeEmu, token: &str) -> kube::Client {
    kube::Client::try_from(config_from(&emu.kubeconfig_yaml_for(token)).await).expect("a client")
}

pub async fn start() -> (KubeEmu, kube::Client) {
    start_with(KubeEmu::builder()).await
}

pub async fn start_with(builder: KubeEmuBuilder) -> (KubeEmu, kube::Client) {
    let emu = builder.start().await.expect("the emulator starts");
    let client = client(&emu).await;
    (emu, client)
}

/// A ConfigMap with `data.value = "1"` and the given labels.
pub fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
            .filter(|labels: &BTreeMap<String, String>| !labels.is_empty()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), "1".to_owned())])),
        ..ConfigMap::default()
    }
}

/// Creates `object` through `api`; the test fails if the server refuses.
pub async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&kube::api::PostParams::default(), object)
        .await
        .expect("created")
}

/// Removes every finalizer of the object, as its controller would when done.
pub async fn clear_finalizers<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizers cleared");
}

/// Sends a request and returns the status code and JSON body, whatever the status.
pub async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let bytes = body
        .map(|body| serde_json::to_vec(&body).expect("serializable"))
        .unwrap_or_default();
    raw_bytes(client, method, path, content_type, bytes).await
}

pub async fn raw_bytes(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .expect("a valid request");
    send(client, request).await
}

/// Sends a prepared request; the status code and the body as JSON (or as a string).
pub async fn send(
    client: &kube::Client,
    request: http::Request<kube::client::Body>,
) -> (u16, Value) {
    let response = client.send(request).await.expect("the server answers");
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the body arrives")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// A GET of `path` as JSON.
pub async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    raw(client, "GET", path, "application/json", None).await
}

/// A POST of `body` as JSON.
pub async fn post(client: &kube::Client, path: &str, body: Value) -> (u16, Value) {
    raw(client, "POST", path, "application/json", Some(body)).await
}

/// The Status a failed kube-rs call carried.
pub fn api_status(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A GET with an explicit Accept header (Table, PartialObjectMetadata).
pub async fn get_as(client: &kube::Client, path: &str, accept: &str) -> (u16, Value) {
    let request = http::Request::builder()
        .method("GET")
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .expect("a valid request");
    send(client, request).await
}

/// kubectl's Accept header for `kubectl get`.
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
