//! Mutual TLS between components: a server that requires client certificates accepts a
//! client holding one from the shared CA and refuses clients without one or from another CA.

use std::net::SocketAddr;

use arbor_demo::pki::{Authority, CertifiedKey};
use arbor_runtime::grpc::{self, TlsMaterial};
use tokio_util::sync::CancellationToken;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

fn material(ca: &Authority, leaf: &CertifiedKey) -> TlsMaterial {
    TlsMaterial {
        cert_pem: Some(leaf.cert_pem.clone()),
        key_pem: Some(leaf.key_pem.clone()),
        ca_pem: Some(ca.cert_pem().to_owned()),
    }
}

async fn serve_health(tls: &TlsMaterial, shutdown: CancellationToken) -> SocketAddr {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (incoming, local) = grpc::bind(addr).await.unwrap();
    let router = grpc::server(addr, Some(tls)).unwrap().add_service(health);
    tokio::spawn(router.serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned()));
    local
}

async fn check(address: &str, tls: &TlsMaterial) -> Result<(), String> {
    check_at(grpc::endpoint(address, Some(tls)).map_err(|e| e.to_string())?).await
}

async fn check_at(endpoint: tonic::transport::Endpoint) -> Result<(), String> {
    let channel = endpoint.connect().await.map_err(|e| format!("{e:?}"))?;
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map(|_| ())
        .map_err(|status| status.to_string())
}

#[tokio::test]
async fn mutual_tls_accepts_a_client_certificate_from_the_shared_ca() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let server_tls = material(
        &ca,
        &ca.issue("gitsync", &["localhost", "127.0.0.1"]).unwrap(),
    );
    let client_tls = material(&ca, &ca.issue("arborctl", &["arborctl"]).unwrap());
    let shutdown = CancellationToken::new();
    let addr = serve_health(&server_tls, shutdown.clone()).await;

    check(&format!("https://localhost:{}", addr.port()), &client_tls)
        .await
        .expect("a client with a certificate from the CA is served");
    shutdown.cancel();
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let server_tls = material(&ca, &ca.issue("gitsync", &["localhost"]).unwrap());
    let anonymous = TlsMaterial {
        ca_pem: Some(ca.cert_pem().to_owned()),
        ..TlsMaterial::default()
    };
    let shutdown = CancellationToken::new();
    let addr = serve_health(&server_tls, shutdown.clone()).await;

    let refused = check(&format!("https://localhost:{}", addr.port()), &anonymous).await;
    assert!(
        refused.is_err(),
        "a client without a certificate must be refused"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_certificate_from_another_ca() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let stranger_ca = Authority::generate("someone else's CA").unwrap();
    let server_tls = material(&ca, &ca.issue("gitsync", &["localhost"]).unwrap());
    let stranger = TlsMaterial {
        ca_pem: Some(ca.cert_pem().to_owned()),
        ..material(
            &stranger_ca,
            &stranger_ca.issue("intruder", &["intruder"]).unwrap(),
        )
    };
    let shutdown = CancellationToken::new();
    let addr = serve_health(&server_tls, shutdown.clone()).await;

    let refused = check(&format!("https://localhost:{}", addr.port()), &stranger).await;
    assert!(
        refused.is_err(),
        "a certificate from another CA must be refused"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn client_refuses_a_server_its_ca_did_not_sign() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let rogue_ca = Authority::generate("rogue CA").unwrap();
    let rogue_server = material(
        &rogue_ca,
        &rogue_ca.issue("gitsync", &["localhost"]).unwrap(),
    );
    let client_tls = material(&ca, &ca.issue("arborctl", &["arborctl"]).unwrap());
    let shutdown = CancellationToken::new();
    let addr = serve_health(&rogue_server, shutdown.clone()).await;

    let refused = check(&format!("https://localhost:{}", addr.port()), &client_tls).await;
    assert!(
        refused.is_err(),
        "a server outside the trusted CA must be refused"
    );
    shutdown.cancel();
}

/// Another replica is reached at its pod IP, which its certificate (issued for the Service)
/// does not name: the caller verifies it against the Service's name instead
/// (`--grpc-advertise-server-name`), and without that name the same connection is refused.
#[tokio::test]
async fn a_replica_at_an_address_its_certificate_does_not_name_is_verified_by_the_service_name() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let service = "arbor-gitsync.arbor-system.svc";
    let server_tls = material(&ca, &ca.issue("arbor-gitsync", &[service]).unwrap());
    let peer_tls = material(&ca, &ca.issue("arbor-gitsync", &[service]).unwrap());
    let shutdown = CancellationToken::new();
    let addr = serve_health(&server_tls, shutdown.clone()).await;
    let address = format!("https://127.0.0.1:{}", addr.port());
    let health = |server_name: Option<&str>| {
        check_at(grpc::endpoint_verified_as(&address, Some(&peer_tls), server_name).unwrap())
    };
    health(Some(service))
        .await
        .expect("verified against the Service's name");
    assert!(
        health(None).await.is_err(),
        "the pod IP is not in the certificate"
    );
    shutdown.cancel();
}
