//! The bounded listener and gRPC authorization, in process on loopback: a flood of silent
//! connections is held to `--max-connections` while a mutual-TLS client is served, and a call
//! is allowed or refused by the caller's certificate.

use std::time::Duration;

use arbor_demo::pki::Authority;
use arbor_runtime::authz::{Authz, AuthzArgs};
use arbor_runtime::grpc::{self, TlsMaterial};
use arbor_runtime::listener::{Limits, ListenerArgs, ListenerMetrics, ShedReason};
use tokio_util::sync::CancellationToken;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

fn material(ca: &Authority, name: &str) -> TlsMaterial {
    let issued = ca.issue(name, &["localhost", "127.0.0.1"]).unwrap();
    TlsMaterial {
        cert_pem: Some(issued.cert_pem),
        key_pem: Some(issued.key_pem),
        ca_pem: Some(ca.cert_pem().to_owned()),
    }
}

struct Server {
    url: String,
    metrics: ListenerMetrics,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A health service behind the gRPC listener with `max_connections` and `rules`.
async fn serve(ca: &Authority, max_connections: u32, rules: &[&str]) -> Server {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let metrics = ListenerMetrics::default();
    let limits = Limits::new(
        ListenerArgs {
            max_connections,
            ..ListenerArgs::default()
        },
        metrics.clone(),
    );
    let tls = material(ca, "server");
    let listener = grpc::listener("127.0.0.1:0".parse().unwrap(), Some(&tls), limits)
        .await
        .unwrap();
    let url = format!("https://{}", listener.local_addr());
    let authz = Authz::from_args(&AuthzArgs {
        grpc_allow: rules.iter().map(|rule| (*rule).to_owned()).collect(),
    })
    .unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(listener.serve(
        grpc::router(tonic::service::Routes::new(health), authz),
        stop.clone(),
    ));
    Server { url, metrics, stop }
}

async fn check(url: &str, tls: &TlsMaterial) -> Result<(), tonic::Status> {
    let channel = grpc::connect(url, Some(tls))
        .await
        .map_err(|error| tonic::Status::unavailable(error.to_string()))?;
    HealthClient::new(channel)
        .check(HealthCheckRequest::default())
        .await
        .map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_is_held_to_the_bound_and_a_client_is_served() {
    const MAX: u32 = 50;
    let ca = Authority::generate("listener test CA").unwrap();
    let server = serve(&ca, MAX, &[]).await;
    let client = material(&ca, "arborctl");
    let address = server.url.trim_start_matches("https://").to_owned();

    let mut flood = Vec::new();
    for round in 0..4 {
        for _ in 0..500 {
            flood.push(tokio::net::TcpStream::connect(&address).await.unwrap());
        }
        check(&server.url, &client)
            .await
            .unwrap_or_else(|status| panic!("after {} connections: {status}", (round + 1) * 500));
        let held = server.metrics.connections("grpc");
        assert!(held <= i64::from(MAX), "{held} connections held");
    }
    assert!(server.metrics.shed("grpc", ShedReason::Evicted) >= 2_000 - u64::from(MAX));
    drop(flood);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_that_never_starts_is_dropped_after_the_timeout() {
    let ca = Authority::generate("listener test CA").unwrap();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let metrics = ListenerMetrics::default();
    let limits = Limits::new(
        ListenerArgs {
            handshake_timeout: Duration::from_millis(200),
            ..ListenerArgs::default()
        },
        metrics.clone(),
    );
    let listener = grpc::listener(
        "127.0.0.1:0".parse().unwrap(),
        Some(&material(&ca, "server")),
        limits,
    )
    .await
    .unwrap();
    let address = listener.local_addr();
    let stop = CancellationToken::new();
    tokio::spawn(listener.serve(
        grpc::router(tonic::service::Routes::new(health), None),
        stop.clone(),
    ));
    let mut silent = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut buffer = [0u8; 1];
    let read = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::AsyncReadExt::read(&mut silent, &mut buffer),
    )
    .await
    .expect("the server closes the connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert_eq!(metrics.shed("grpc", ShedReason::HandshakeTimeout), 1);
    assert_eq!(metrics.connections("grpc"), 0);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_allowed_by_the_callers_certificate_and_refused_naming_method_and_caller() {
    let ca = Authority::generate("listener test CA").unwrap();
    let server = serve(
        &ca,
        16,
        &["grpc.health.v1.Health/Watch=observer", "*=arborctl"],
    )
    .await;
    check(&server.url, &material(&ca, "arborctl"))
        .await
        .unwrap();
    let refused = check(&server.url, &material(&ca, "webhook-serving"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("grpc.health.v1.Health/Check")
            && refused.message().contains("CN=webhook-serving"),
        "{}",
        refused.message()
    );
}
