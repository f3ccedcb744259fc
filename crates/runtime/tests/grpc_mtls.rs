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
    let channel = grpc::connect(address, Some(tls))
        .await
        .map_err(|e| e.to_string())?;
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
