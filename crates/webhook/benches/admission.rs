//! Admission throughput and latency over HTTPS on loopback, against a bare axum + rustls
//! handler that always allows, measured in the same run; the ratio is the figure (it cancels
//! out the machine). Prints Markdown.
//!
//! The realistic review is a GitTrackObject CREATE (a ConfigMap of ~2 KiB, an ownerReference
//! and a source annotation) judged by the ownership matrix, and a Namespace UPDATE judged
//! against a tree of 500 namespaces. Both servers get the same clients: `CLIENTS` keep-alive
//! HTTP/1.1 connections sending [`requests_per_client`] requests each, one at a time. The two
//! servers take turns for `ROUNDS` rounds, so a burst of other work on the machine falls on
//! both; the ratio is the median of the rounds' ratios.
//!
//! A second load level is paced, not flat out: `PACED_PER_SECOND` requests per second for
//! [`paced_for`] (the two reviews alternating), against the webhook running as a process of its
//! own (this bench re-executed with [`SERVE_ENV`]), so its resident memory is its own. A
//! request's latency runs from its send to the end of its answer; a request whose turn came
//! while the one before was still out goes at once after it (the pace catches up), so the
//! achieved rate shows whether the webhook kept up. Emits the shared results table
//! ([`arbor_testkit::bench`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbor_policy::keys::Keys;
use arbor_policy::ownership::{
    ClusterGitTrackMode, GitTrackMode, NamespaceRestriction, WatchScope,
};
use arbor_policy::propagation::NamespaceState;
use arbor_testkit::bench::{self, Row, Table};
use arbor_testkit::memory::{Memory, mib};
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
const ROUNDS: usize = 5;
const PACED_PER_SECOND: u32 = 1_000;
/// Throughput against the bare handler (issue 21 item 5).
const TARGET_RATIO: f64 = 0.85;
/// The webhook's p99 at the flat-out load.
const TARGET_P99: Duration = Duration::from_millis(1);
/// The webhook's memory (issue 21 item 4).
const TARGET_MIB: u64 = 50;

/// Requests each connection sends per round (500; `ARBOR_BENCH_WEBHOOK_REQUESTS` or the shared
/// `ARBOR_BENCH_SCALE` for a quick run).
fn requests_per_client() -> usize {
    bench::size("ARBOR_BENCH_WEBHOOK_REQUESTS", 500).expect("ARBOR_BENCH_WEBHOOK_REQUESTS")
}

/// How long the paced load runs (30 s; `ARBOR_BENCH_WEBHOOK_PACED_SECONDS` or the shared
/// `ARBOR_BENCH_SCALE`).
fn paced_for() -> Duration {
    let seconds = bench::size("ARBOR_BENCH_WEBHOOK_PACED_SECONDS", 30)
        .expect("ARBOR_BENCH_WEBHOOK_PACED_SECONDS");
    Duration::from_secs(seconds as u64)
}
/// Connections the paced load is spread over.
const PACED_CONNECTIONS: u32 = 8;
/// Set to a directory holding `tls.crt` and `tls.key`: this process serves the webhook alone
/// and prints its address.
const SERVE_ENV: &str = "ARBOR_ADMISSION_BENCH_SERVE";

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

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// One keep-alive HTTPS connection to `address`.
async fn connect(address: SocketAddr, config: Arc<rustls::ClientConfig>) -> Sender {
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("handshake");
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("http handshake");
    tokio::spawn(connection);
    sender
}

/// Sends one review and reads the whole answer.
async fn send(sender: &mut Sender, body: Bytes) {
    let request = hyper::Request::post("/validate")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .expect("request");
    sender.ready().await.expect("connection ready");
    let response = sender.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("body");
}

/// One keep-alive connection sending `count` requests; returns each request's latency.
async fn client(
    address: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    count: usize,
) -> Vec<Duration> {
    let mut sender = connect(address, config).await;
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        send(&mut sender, body.clone()).await;
        latencies.push(started.elapsed());
    }
    latencies
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Figures {
    fn of(mut latencies: Vec<Duration>, elapsed: Duration) -> Figures {
        latencies.sort();
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        Figures {
            per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
            p50: at(0.50),
            p99: at(0.99),
            max: latencies.last().copied().unwrap_or_default(),
        }
    }
}

/// One round: `CLIENTS` connections sending flat out; the latencies and the time it took.
async fn flat_out(
    address: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    body: &Bytes,
) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            tokio::spawn(client(
                address,
                config.clone(),
                body.clone(),
                requests_per_client(),
            ))
        })
        .collect();
    let mut latencies = Vec::new();
    for handle in clients {
        latencies.extend(handle.await.expect("client"));
    }
    (latencies, started.elapsed())
}

/// The bare handler's and the webhook's figures over `ROUNDS` alternating rounds, and the
/// median of the rounds' throughput ratios.
async fn compare(
    bare: SocketAddr,
    webhook: SocketAddr,
    ca: &Authority,
    body: &Bytes,
) -> (Figures, Figures, f64) {
    let config = client_config(ca);
    // Warm-up: connections, allocator, caches.
    for address in [bare, webhook] {
        client(address, config.clone(), body.clone(), 50).await;
    }
    let (mut bare_all, mut webhook_all) = (Vec::new(), Vec::new());
    let (mut bare_time, mut webhook_time) = (Duration::ZERO, Duration::ZERO);
    let mut ratios = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let (latencies, bare_took) = flat_out(bare, &config, body).await;
        bare_all.extend(latencies);
        let (latencies, webhook_took) = flat_out(webhook, &config, body).await;
        webhook_all.extend(latencies);
        ratios.push(bare_took.as_secs_f64() / webhook_took.as_secs_f64());
        bare_time += bare_took;
        webhook_time += webhook_took;
    }
    ratios.sort_by(f64::total_cmp);
    (
        Figures::of(bare_all, bare_time),
        Figures::of(webhook_all, webhook_time),
        ratios[ROUNDS / 2],
    )
}

/// `PACED_PER_SECOND` requests per second for [`paced_for`], the bodies taking turns.
async fn paced(address: SocketAddr, ca: &Authority, bodies: &[Bytes]) -> Figures {
    let config = client_config(ca);
    let every = Duration::from_secs_f64(f64::from(PACED_CONNECTIONS) / f64::from(PACED_PER_SECOND));
    let count = (paced_for().as_secs_f64() * f64::from(PACED_PER_SECOND)) as usize
        / PACED_CONNECTIONS as usize;
    let started = Instant::now();
    let connections: Vec<_> = (0..PACED_CONNECTIONS)
        .map(|connection| {
            let config = config.clone();
            let bodies = bodies.to_vec();
            tokio::spawn(async move {
                let mut sender = connect(address, config).await;
                // Spread the connections' turns evenly over each period.
                let offset = every / PACED_CONNECTIONS * connection;
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + offset, every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                let mut latencies = Vec::with_capacity(count);
                for index in 0..count {
                    ticks.tick().await;
                    let body = bodies[(index + connection as usize) % bodies.len()].clone();
                    let sent = Instant::now();
                    send(&mut sender, body).await;
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for handle in connections {
        latencies.extend(handle.await.expect("paced connection"));
    }
    Figures::of(latencies, started.elapsed())
}

fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

/// The webhook's router over the bench's tree, as the process serves it.
fn webhook_router() -> axum::Router {
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
    server::router(AppState {
        policy,
        metrics: WebhookMetrics::default(),
    })
}

async fn start_webhook(dir: &Path) -> Server {
    let reloading =
        Arc::new(ReloadingCert::load(dir.join("tls.crt"), dir.join("tls.key")).expect("load"));
    let tls = Arc::new(reloading.server_config().expect("config"));
    start(webhook_router(), tls).await
}

/// The webhook as a process of its own: serves until its standard input closes.
async fn serve_alone(dir: &Path) {
    let webhook = start_webhook(dir).await;
    println!("{}", webhook.address);
    let mut stdin = tokio::io::stdin();
    let mut sink = Vec::new();
    let _ = tokio::io::AsyncReadExt::read_to_end(&mut stdin, &mut sink).await;
    webhook.stop.cancel();
}

/// This bench re-executed as the webhook alone; its address and process id.
fn spawn_webhook_process(dir: &Path) -> (std::process::Child, SocketAddr, u32) {
    let mut child = std::process::Command::new(std::env::current_exe().expect("own path"))
        .env(SERVE_ENV, dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the webhook process starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .expect("the webhook process prints its address");
    let address = line.trim().parse().expect("an address");
    let pid = child.id();
    (child, address, pid)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(dir) = std::env::var_os(SERVE_ENV) {
        runtime.block_on(serve_alone(Path::new(&dir)));
        return;
    }
    runtime.block_on(bench());
}

async fn bench() {
    let ca = Authority::generate("bench CA").expect("CA");
    let issued = ca
        .issue("arbor-webhook", &["127.0.0.1"])
        .expect("certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tls.crt"), &issued.cert_pem).expect("write cert");
    std::fs::write(dir.path().join("tls.key"), &issued.key_pem).expect("write key");
    let webhook = start_webhook(dir.path()).await;

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

    let reviews = [
        (
            "GitTrackObject CREATE (ownership)",
            gittrack_object_review(),
        ),
        ("Namespace UPDATE (tree of 500)", namespace_update_review()),
    ];
    let mut table = Table::new("arbor-webhook: admission over HTTPS on loopback");
    table.note(format!(
        "{CLIENTS} keep-alive connections × {} requests, {ROUNDS} rounds taking turns with the \
         baseline: a bare axum + rustls handler that always allows. Throughput against the \
         baseline is the median of the rounds' ratios.",
        requests_per_client()
    ));
    for (name, body) in &reviews {
        let (baseline, figures, ratio) = compare(bare.address, webhook.address, &ca, body).await;
        table
            .row(
                Row::new(
                    format!("{name}: throughput"),
                    format!("{:.0} requests/s", figures.per_second),
                )
                .baseline(format!(
                    "bare handler: {:.0} requests/s",
                    baseline.per_second
                ))
                .target(
                    format!("≥ {TARGET_RATIO} × baseline (now {ratio:.2} ×)"),
                    ratio >= TARGET_RATIO,
                ),
            )
            .row(
                Row::new(format!("{name}: p99"), micros(figures.p99))
                    .baseline(format!("bare handler: {}", micros(baseline.p99)))
                    .target(
                        format!("< {}", micros(TARGET_P99)),
                        figures.p99 < TARGET_P99,
                    ),
            )
            .row(
                Row::new(
                    format!("{name}: p50, max"),
                    format!("{}, {}", micros(figures.p50), micros(figures.max)),
                )
                .baseline(format!(
                    "bare handler: {}, {}",
                    micros(baseline.p50),
                    micros(baseline.max)
                )),
            );
    }
    webhook.stop.cancel();
    bare.stop.cancel();

    let (mut process, address, pid) = spawn_webhook_process(dir.path());
    let idle = Memory::of_pid(pid).expect("idle reading");
    let bodies: Vec<Bytes> = reviews.iter().map(|(_, body)| body.clone()).collect();
    let figures = paced(address, &ca, &bodies).await;
    let loaded = Memory::of_pid(pid).expect("loaded reading");
    drop(process.stdin.take());
    let _ = process.wait();
    table.row(
        Row::new(
            format!(
                "paced {PACED_PER_SECOND} requests/s for {} s: rate achieved",
                paced_for().as_secs()
            ),
            format!("{:.0} requests/s", figures.per_second),
        )
        .baseline(format!("asked: {PACED_PER_SECOND} requests/s")),
    );
    table.row(Row::new(
        "paced: latency p50, p99, max",
        format!(
            "{}, {}, {}",
            micros(figures.p50),
            micros(figures.p99),
            micros(figures.max)
        ),
    ));
    table.row(
        Row::new(
            "paced: the webhook's RSS (its own process)",
            format!(
                "peak {}, after {}",
                mib(loaded.peak_kib),
                mib(loaded.resident_kib)
            ),
        )
        .baseline(format!("idle {}", mib(idle.resident_kib)))
        .target(
            format!("peak < {TARGET_MIB} MiB"),
            loaded.peak_kib < TARGET_MIB * 1024,
        ),
    );
    table.note(format!(
        "Paced: {PACED_PER_SECOND} requests/s over {PACED_CONNECTIONS} connections, the two \
         reviews taking turns, against the webhook as its own process (this bench re-executed); \
         latency from send to answer; RSS: VmRSS idle before the load, VmHWM and VmRSS after it."
    ));
    table.emit().expect("results written");
}
