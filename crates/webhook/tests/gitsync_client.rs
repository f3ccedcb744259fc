//! Drift prevention's client of arbor-gitsync's `GetDeclared`, against a scripted SyncService
//! on loopback: answers are cached, a slow or absent gitsync is an error the policy turns into
//! `--drift-unreachable`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use arbor_proto::v1 as proto;
use arbor_proto::v1::sync_service_server::{SyncService, SyncServiceServer};
use arbor_webhook::declared::{Declared, DeclaredState, LookupError, ObjectIdentity};
use arbor_webhook::gitsync_client::GitsyncDeclared;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// Declares `web` (replicas 2) and nothing else; counts calls; can be made slow.
#[derive(Debug, Default, Clone)]
struct ScriptedGitsync {
    calls: Arc<AtomicUsize>,
    delay: Option<Duration>,
}

#[tonic::async_trait]
impl SyncService for ScriptedGitsync {
    async fn get_status(
        &self,
        _: Request<proto::GetStatusRequest>,
    ) -> Result<Response<proto::GetStatusResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
    async fn list_managed(
        &self,
        _: Request<proto::ListManagedRequest>,
    ) -> Result<Response<proto::ListManagedResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
    async fn explain(
        &self,
        _: Request<proto::ExplainRequest>,
    ) -> Result<Response<proto::ExplainResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
    async fn trigger_sync(
        &self,
        _: Request<proto::TriggerSyncRequest>,
    ) -> Result<Response<proto::TriggerSyncResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
    async fn report_drift(
        &self,
        _: Request<proto::ReportDriftRequest>,
    ) -> Result<Response<proto::ReportDriftResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
    async fn preview(
        &self,
        _: Request<arbor_proto::v1::PreviewRequest>,
    ) -> Result<Response<arbor_proto::v1::PreviewResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
    async fn get_declared(
        &self,
        request: Request<proto::GetDeclaredRequest>,
    ) -> Result<Response<proto::GetDeclaredResponse>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        let object = request.into_inner().object.unwrap_or_default();
        if object.name != "web" {
            return Ok(Response::new(proto::GetDeclaredResponse::default()));
        }
        Ok(Response::new(proto::GetDeclaredResponse {
            declared: true,
            object_json: r#"{"spec":{"replicas":2}}"#.into(),
            file: "apps/web.yaml".into(),
            ..Default::default()
        }))
    }
}

async fn serve(gitsync: ScriptedGitsync, stop: &CancellationToken) -> String {
    let (incoming, address) = arbor_runtime::grpc::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    tokio::spawn(
        arbor_runtime::grpc::server(address, None)
            .unwrap()
            .add_service(SyncServiceServer::new(gitsync))
            .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned()),
    );
    format!("http://{address}")
}

fn identity(name: &str) -> ObjectIdentity {
    ObjectIdentity {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: "team-a".into(),
        name: name.into(),
    }
}

fn client(address: &str, timeout: Duration) -> GitsyncDeclared {
    let channel = arbor_runtime::grpc::connect_lazy(address, None).unwrap();
    GitsyncDeclared::new(channel, timeout, Duration::from_secs(600))
}

#[tokio::test]
async fn answers_are_cached_for_the_ttl() {
    let stop = CancellationToken::new();
    let gitsync = ScriptedGitsync::default();
    let address = serve(gitsync.clone(), &stop).await;
    let declared = client(&address, Duration::from_secs(10));
    for _ in 0..3 {
        let answer = declared.declared(&identity("web")).await.unwrap();
        assert!(matches!(answer, Declared::Object { ref file, .. } if file == "apps/web.yaml"));
        assert_eq!(
            declared.declared(&identity("other")).await.unwrap(),
            Declared::NotDeclared
        );
    }
    assert_eq!(
        gitsync.calls.load(Ordering::SeqCst),
        2,
        "one call per object"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_slow_gitsync_times_out() {
    let stop = CancellationToken::new();
    let gitsync = ScriptedGitsync {
        delay: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    let address = serve(gitsync, &stop).await;
    let declared = client(&address, Duration::from_millis(200));
    let error = declared.declared(&identity("web")).await.unwrap_err();
    assert!(matches!(error, LookupError::Timeout(_)), "{error}");
    stop.cancel();
}

#[tokio::test]
async fn an_absent_gitsync_is_unreachable() {
    // A port that was just free: nothing listens on it.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let declared = client(&format!("http://{address}"), Duration::from_secs(10));
    let error = declared.declared(&identity("web")).await.unwrap_err();
    assert!(matches!(error, LookupError::Unreachable(_)), "{error}");
}
