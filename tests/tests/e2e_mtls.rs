//! gRPC between components is mutual TLS: a client with a certificate from the CA is served;
//! one without a client certificate, or without TLS at all, is refused.

use arbor_e2e::system::{client_tls, start};
use arbor_proto::v1::GetStatusRequest;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_runtime::grpc::{TlsMaterial, connect};

async fn get_status(address: &str, tls: Option<&TlsMaterial>) -> Result<usize, String> {
    let channel = connect(address, tls)
        .await
        .map_err(|error| error.to_string())?;
    SyncServiceClient::new(channel)
        .get_status(GetStatusRequest { source: None })
        .await
        .map(|response| response.into_inner().sources.len())
        .map_err(|status| status.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitsync_serves_a_client_certificate_and_refuses_a_client_without_one() {
    let system = start(&["gitsync"]).await.unwrap();
    let gitsync = system.gitsync.as_ref().unwrap();
    let with_certificate = client_tls(&system).unwrap();

    let served = get_status(&gitsync.grpc_url(), Some(&with_certificate)).await;
    assert_eq!(served, Ok(0), "no sources yet");

    let anonymous = TlsMaterial {
        cert_pem: None,
        key_pem: None,
        ca_pem: with_certificate.ca_pem.clone(),
    };
    let refused = get_status(&gitsync.grpc_url(), Some(&anonymous)).await;
    assert!(
        refused.is_err(),
        "a client without a certificate was served: {refused:?}"
    );

    let plaintext = get_status(&format!("http://{}", gitsync.grpc), None).await;
    assert!(
        plaintext.is_err(),
        "a plaintext client was served: {plaintext:?}"
    );
}
