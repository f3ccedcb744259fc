//! Admission throughput and latency over HTTPS on loopback, against a bare axum + rustls
//! handler that always allows, measured in the same run; the ratio is the figure (it cancels
//! out the machine). Prints Markdown.
//!
//! The realistic review is a GitTrackObject CREATE (a ConfigMap of ~2 KiB, an ownerReference
//! and a source annotation) judged by the ownership matrix, and a Namespace UPDATE judged
//! against a tree of 500 namespaces. Both servers get the same clients: `CLIENTS` keep-alive
//! HTTP/1.1 connections sending `REQUESTS_PER_CLIENT` requests each, one at a time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbor_policy::keys::Keys;
use arbor_policy::ownership::{
    ClusterGitTrackMode, GitTrackMode, NamespaceRestriction, WatchScope,
};
use arbor_policy::propagation::NamespaceState;
use arbor_testkit::pki::Authority;
use arbor_webhook::Policy;
use arbor_webhook::metrics::WebhookMetrics;
use arbor_webhook::server::{self, AppState};
use arbor_webhook::settings::PolicySettings;
use arbor_webhook::tls::ReloadingCert;
use arbor_webhook::tree::FixedTree;
use axum::routing::post;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const CLIENTS: usize = 4;
const REQUESTS_PER_CLIENT: usize = 500;

fn tree() -> Vec<NamespaceState> {
    let mut namespaces = Vec::new();
    for team in 0..50 {
        let root = format!("team-{team}");
        namespaces.push(NamespaceState::new(&root).with_label("arbor.dev/type", "root"));
        for env in 0..9 {
            namespaces.push(
                NamespaceState::new(format!("{root}-env-{env}"))
                    .with_label("arbor.dev/parent", &root),
            );
        }
    }
    namespaces
}

fn review(request: Value) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }))
        .expect("serialisable"),
    )
}

fn gittrack_object_review() -> Bytes {
    let data: serde_json::Map<String, Value> = (0..40)
        .map(|i| {
            (
                format!("key-{i}"),
                json!(format!("value-{i}-{}", "x".repeat(32))),
            )
        })
        .collect();
    let object = json!({
        "apiVersion": "arbor.dev/v1alpha1",
        "kind": "GitTrackObject",
        "metadata": {
            "name": "configmap-settings",
            "namespace": "team-7",
            "annotations": {"arbor.dev/source": "GitTrack/team-7/apps"},
            "ownerReferences": [{"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack", "name": "apps", "uid": "1", "controller": true}],
        },
        "spec": {"name": "settings", "kind": "ConfigMap", "data": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team-7"},
            "data": data,
        }},
    });
    review(json!({
        "uid": "bench", "operation": "CREATE", "name": "configmap-settings", "namespace": "team-7",
        "kind": {"group": "arbor.dev", "version": "v1alpha1", "kind": "GitTrackObject"},
        "resource": {"group": "arbor.dev", "version": "v1alpha1", "resource": "gittrackobjects"},
        "userInfo": {"username": "system:serviceaccount:arbor-system:arbor-gitsync"},
        "object": object,
    }))
}

fn namespace_update_review() -> Bytes {
    let namespace = |parent: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": "team-3-env-4", "labels": {"arbor.dev/parent": parent, "team": "three"}}})
    };
    review(json!({
        "uid": "bench", "operation": "UPDATE", "name": "team-3-env-4",
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "resource": {"group": "", "version": "v1", "resource": "namespaces"},
        "userInfo": {"username": "alice"},
        "object": namespace("team-4"),
        "oldObject": namespace("team-3"),
    }))
}

struct Server {
    address: SocketAddr,
    stop: CancellationToken,
}

async fn start(router: axum::Router, tls: Arc<rustls::ServerConfig>) -> Server {
    let listener = server::bind(
        "127.0.0.1:0".parse().expect("address"),
        tls,
        arbor_runtime::listener::Limits::default(),
    )
    .await
    .expect("bind");
    let address = listener.local_addr();
    let stop = CancellationToken::new();
    tokio::spawn(listener.serve(router, stop.clone()));
    Server { address, stop }
}

/// The always-allow handler: no decoding beyond what answering needs.
async fn allow_all(body: Bytes) -> axum::Json<Value> {
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    axum::Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true},
    }))
}

fn client_config(ca: &Authority) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca.cert_pem().as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

/// One keep-alive connection sending `count` requests; returns each request's latency.
async fn client(
    address: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    count: usize,
) -> Vec<Duration> {
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("handshake");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("http handshake");
    tokio::spawn(connection);
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        let request = hyper::Request::post("/validate")
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .expect("request");
        let started = Instant::now();
        sender.ready().await.expect("connection ready");
        let response = sender.send_request(request).await.expect("response");
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.expect("body");
        latencies.push(started.elapsed());
    }
    latencies
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

async fn measure(address: SocketAddr, ca: &Authority, body: &Bytes) -> Figures {
    let config = client_config(ca);
    // Warm-up: connections, allocator, caches.
    client(address, config.clone(), body.clone(), 50).await;
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            tokio::spawn(client(
                address,
                config.clone(),
                body.clone(),
                REQUESTS_PER_CLIENT,
            ))
        })
        .collect();
    let mut latencies = Vec::new();
    for handle in clients {
        latencies.extend(handle.await.expect("client"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Figures {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

#[tokio::main]
async fn main() {
    let ca = Authority::generate("bench CA").expect("CA");
    let issued = ca
        .issue("arbor-webhook", &["127.0.0.1"])
        .expect("certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &issued.cert_pem).expect("write cert");
    std::fs::write(&key, &issued.key_pem).expect("write key");

    let reloading = Arc::new(ReloadingCert::load(&cert, &key).expect("load"));
    let webhook_tls = Arc::new(reloading.server_config().expect("config"));
    let scope = WatchScope::from_flags(
        GitTrackMode::Enabled,
        ClusterGitTrackMode::IncludeNamespaced,
        NamespaceRestriction::AllNamespaces,
    )
    .expect("scope");
    let policy = Policy::new(
        PolicySettings::new(scope, Keys::default()),
        Arc::new(FixedTree::new(&Keys::default(), tree())),
        None,
    );
    let webhook = start(
        server::router(AppState {
            policy,
            metrics: WebhookMetrics::default(),
        }),
        webhook_tls,
    )
    .await;

    let chain = rustls_pemfile::certs(&mut issued.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("chain");
    let private = rustls_pemfile::private_key(&mut issued.key_pem.as_bytes())
        .expect("key")
        .expect("a key");
    let bare_tls = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .expect("bare config"),
    );
    let bare = start(
        axum::Router::new().route("/validate", post(allow_all)),
        bare_tls,
    )
    .await;

    println!("## arbor-webhook: admission over HTTPS on loopback");
    println!();
    println!(
        "{CLIENTS} keep-alive connections x {REQUESTS_PER_CLIENT} requests; baseline: bare axum + rustls handler that always allows."
    );
    println!();
    println!("| review | server | requests/s | p50 | p99 | throughput vs baseline |");
    println!("|---|---|---|---|---|---|");
    for (name, body) in [
        (
            "GitTrackObject CREATE (ownership)",
            gittrack_object_review(),
        ),
        ("Namespace UPDATE (tree of 500)", namespace_update_review()),
    ] {
        let baseline = measure(bare.address, &ca, &body).await;
        let figures = measure(webhook.address, &ca, &body).await;
        for (server, f) in [("bare allow", &baseline), ("arbor-webhook", &figures)] {
            println!(
                "| {name} | {server} | {:.0} | {} | {} | {:.2} |",
                f.per_second,
                micros(f.p50),
                micros(f.p99),
                f.per_second / baseline.per_second
            );
        }
    }
    println!();
    webhook.stop.cancel();
    bare.stop.cancel();
}
