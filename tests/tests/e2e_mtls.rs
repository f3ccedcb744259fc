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

/// The mutual-TLS material of a new certificate of the system's CA for `common_name`.
fn identity(system: &arbor_e2e::system::TestSystem, common_name: &str) -> TlsMaterial {
    let issued = system.tls.issue(common_name).unwrap();
    TlsMaterial {
        cert_pem: Some(std::fs::read_to_string(issued.cert).unwrap()),
        key_pem: Some(std::fs::read_to_string(issued.key).unwrap()),
        ca_pem: Some(system.tls.ca_pem().to_owned()),
    }
}

async fn sync_client(
    address: &str,
    tls: &TlsMaterial,
) -> SyncServiceClient<tonic::transport::Channel> {
    SyncServiceClient::new(connect(address, Some(tls)).await.unwrap())
}

/// issue #23 item 11: each SyncService method allows the identities that need it (observer:
/// ReportDrift; webhook: GetDeclared; the operator's client certificate: the rest), by the
/// client certificate's subject, and a refusal is PermissionDenied naming method and caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_methods_allow_only_the_identities_that_need_them() {
    use arbor_proto::v1::{ReportDriftRequest, SourceKind, SourceRef, TriggerSyncRequest};

    let system = start(&["gitsync"]).await.unwrap();
    let address = system.gitsync.as_ref().unwrap().grpc_url();
    let trigger = || TriggerSyncRequest {
        source: Some(SourceRef {
            kind: SourceKind::GitTrack.into(),
            namespace: "nowhere".into(),
            name: "nothing".into(),
        }),
        ..TriggerSyncRequest::default()
    };

    // The webhook's serving certificate is signed by the same CA, and is still not an operator.
    let serving = identity(&system, "webhook-serving");
    let refused = sync_client(&address, &serving)
        .await
        .trigger_sync(trigger())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("SyncService/TriggerSync")
            && refused.message().contains("CN=webhook-serving"),
        "{}",
        refused.message()
    );

    // arborctl's certificate (the operator) may trigger a sync; the source does not exist.
    let operator = client_tls(&system).unwrap();
    let answer = sync_client(&address, &operator)
        .await
        .trigger_sync(trigger())
        .await;
    assert!(
        !matches!(&answer, Err(status) if status.code() == tonic::Code::PermissionDenied),
        "{answer:?}"
    );

    // The observer may report drift, and may not trigger syncs; the operator may not report
    // drift (the method's own rule decides).
    let observer = identity(&system, "observer");
    let answer = sync_client(&address, &observer)
        .await
        .report_drift(ReportDriftRequest::default())
        .await;
    assert!(
        !matches!(&answer, Err(status) if status.code() == tonic::Code::PermissionDenied),
        "{answer:?}"
    );
    let refused = sync_client(&address, &observer)
        .await
        .trigger_sync(trigger())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let refused = sync_client(&address, &operator)
        .await
        .report_drift(ReportDriftRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("CN=arborctl"),
        "{}",
        refused.message()
    );

    // Preview (`arborctl diff`) is an operator method: the observer may not call it; the
    // operator may (the source does not exist).
    let preview = || arbor_proto::v1::PreviewRequest {
        source: trigger().source,
        target: None,
    };
    let refused = sync_client(&address, &observer)
        .await
        .preview(preview())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let answer = sync_client(&address, &operator)
        .await
        .preview(preview())
        .await
        .unwrap_err();
    assert_eq!(answer.code(), tonic::Code::NotFound, "{answer:?}");
}
