//! Drift of git-managed objects is reported to gitsync's `SyncService.ReportDrift`: a fake
//! SyncService in the test records the calls.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use arbor_proto::v1::sync_service_server::{SyncService, SyncServiceServer};
use arbor_proto::v1::{
    DriftEvent, DriftKind, ExplainRequest, ExplainResponse, GetDeclaredRequest,
    GetDeclaredResponse, GetStatusRequest, GetStatusResponse, ListManagedRequest,
    ListManagedResponse, ReportDriftRequest, ReportDriftResponse, TriggerSyncRequest,
    TriggerSyncResponse,
};
use kube::api::PostParams;
use serde_json::json;
use support::{Cluster, NAMESPACE, eventually};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// A SyncService that records every ReportDrift event and answers nothing else; it refuses
/// the first `refusals` reports with `Unavailable`, as a gitsync replica that stops does.
#[derive(Clone, Default)]
struct FakeGitsync {
    reported: Arc<Mutex<Vec<DriftEvent>>>,
    refusals: Arc<Mutex<usize>>,
}

impl FakeGitsync {
    fn refusing(refusals: usize) -> Self {
        Self {
            refusals: Arc::new(Mutex::new(refusals)),
            ..Self::default()
        }
    }

    fn reported(&self) -> Vec<DriftEvent> {
        self.reported.lock().unwrap().clone()
    }

    /// Serves on `address` until the returned token is cancelled.
    async fn serve(&self, address: SocketAddr) -> anyhow::Result<CancellationToken> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let token = CancellationToken::new();
        let server = tonic::transport::Server::builder()
            .add_service(SyncServiceServer::new(self.clone()))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                token.clone().cancelled_owned(),
            );
        tokio::spawn(server);
        Ok(token)
    }
}

#[tonic::async_trait]
impl SyncService for FakeGitsync {
    async fn get_status(
        &self,
        _: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn list_managed(
        &self,
        _: Request<ListManagedRequest>,
    ) -> Result<Response<ListManagedResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn explain(
        &self,
        _: Request<ExplainRequest>,
    ) -> Result<Response<ExplainResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn trigger_sync(
        &self,
        _: Request<TriggerSyncRequest>,
    ) -> Result<Response<TriggerSyncResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn preview(
        &self,
        _: Request<arbor_proto::v1::PreviewRequest>,
    ) -> Result<Response<arbor_proto::v1::PreviewResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_declared(
        &self,
        _: Request<GetDeclaredRequest>,
    ) -> Result<Response<GetDeclaredResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn report_drift(
        &self,
        request: Request<ReportDriftRequest>,
    ) -> Result<Response<ReportDriftResponse>, Status> {
        {
            let mut refusals = self.refusals.lock().unwrap();
            if *refusals > 0 {
                *refusals -= 1;
                return Err(Status::unavailable(
                    "replica gitsync-0 began to stop; report them again, to another replica",
                ));
            }
        }
        let events = request.into_inner().events;
        let accepted = u32::try_from(events.len()).unwrap_or(u32::MAX);
        self.reported.lock().unwrap().extend(events);
        Ok(Response::new(ReportDriftResponse {
            accepted,
            unknown: Vec::new(),
        }))
    }
}

fn reports_of<'a>(events: &'a [DriftEvent], name: &str) -> Vec<&'a DriftEvent> {
    events
        .iter()
        .filter(|event| {
            event
                .object
                .as_ref()
                .is_some_and(|object| object.name == name)
        })
        .collect()
}

/// Creates the ConfigMaps `managed` (with the management label) and `plain` (without).
async fn config_maps(cluster: &Cluster) -> anyhow::Result<()> {
    let api = cluster.config_maps();
    for (name, labels) in [
        ("managed", json!({"arbor.dev/managed": "enabled"})),
        ("plain", json!({})),
    ] {
        let object = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "data": {"mode": "declared"},
        }))?;
        api.create(&PostParams::default(), &object).await?;
    }
    Ok(())
}

async fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(listener.local_addr()?)
}

fn observer_flags(address: SocketAddr) -> Vec<String> {
    vec![
        "--gitsync-addr".into(),
        format!("http://{address}"),
        "--drift-kinds".into(),
        "v1/ConfigMap".into(),
    ]
}

/// An observer reporting drift to `address`, once its drift watch has listed.
async fn ready_observer(
    cluster: &Cluster,
    address: SocketAddr,
) -> anyhow::Result<arbor_observer::Running> {
    let flags = observer_flags(address);
    let observer = cluster
        .observer(&flags.iter().map(String::as_str).collect::<Vec<_>>())
        .await?;
    eventually("the drift watch to list", || async {
        Ok(observer.readiness.is_ready().then_some(()))
    })
    .await
    .map_err(|error| error.context(format!("pending: {:?}", observer.readiness.pending())))?;
    Ok(observer)
}

#[tokio::test]
async fn edit_of_a_labelled_config_map_is_reported_once_and_an_unlabelled_one_never()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    config_maps(&cluster).await?;
    let gitsync = FakeGitsync::default();
    let address = free_port().await?;
    let server = gitsync.serve(address).await?;
    let observer = ready_observer(&cluster, address).await?;

    let api = cluster.config_maps();
    cluster
        .edit(&api, "managed", json!({"data": {"mode": "edited"}}))
        .await?;
    let first = eventually("the edit to be reported", || async {
        Ok(reports_of(&gitsync.reported(), "managed")
            .first()
            .map(|event| (*event).clone()))
    })
    .await?;
    assert_eq!(first.changed_fields, ["data.mode"]);
    assert_eq!(first.kind, DriftKind::Modified as i32);
    assert_eq!(first.reporter, "arbor-observer");
    let observed: serde_json::Value = serde_json::from_str(&first.observed_json)?;
    assert_eq!(observed["data"]["mode"], "edited");

    // An unlabelled edit, then a second labelled one: when the second arrives, everything
    // before it has been reported, so the counts are final.
    cluster
        .edit(&api, "plain", json!({"data": {"mode": "edited"}}))
        .await?;
    cluster
        .edit(&api, "managed", json!({"data": {"mode": "again"}}))
        .await?;
    eventually("the second edit to be reported", || async {
        Ok((reports_of(&gitsync.reported(), "managed").len() >= 2).then_some(()))
    })
    .await?;
    let reported = gitsync.reported();
    let managed = reports_of(&reported, "managed");
    assert_eq!(managed.len(), 2, "each edit reported once: {managed:?}");
    assert!(managed[1].observed_json.contains("again"));
    assert!(
        reports_of(&reported, "plain").is_empty(),
        "unlabelled objects are not gitsync's"
    );

    server.cancel();
    cluster.finish(observer).await
}

#[tokio::test]
async fn drift_seen_while_gitsync_is_down_is_reported_when_it_comes_up() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    config_maps(&cluster).await?;
    let address = free_port().await?;
    let observer = ready_observer(&cluster, address).await?;

    let api = cluster.config_maps();
    cluster
        .edit(&api, "managed", json!({"data": {"mode": "edited"}}))
        .await?;
    let metrics = observer.registry.metrics().clone();
    eventually("a failed delivery", || async {
        Ok((metrics.drift_report_failures.get() >= 1).then_some(()))
    })
    .await?;

    let gitsync = FakeGitsync::default();
    let server = gitsync.serve(address).await?;
    let reported = eventually("the report after gitsync came up", || async {
        Ok(reports_of(&gitsync.reported(), "managed")
            .first()
            .map(|event| (*event).clone()))
    })
    .await?;
    assert_eq!(reported.changed_fields, ["data.mode"]);
    assert_eq!(metrics.drift_reports_sent.get(), 1);

    server.cancel();
    cluster.finish(observer).await
}

/// Issue 22 follow-up: a gitsync replica that stops answers a report it did not carry out with
/// `Unavailable`; the observer keeps the events and sends them again, with backoff, until a
/// replica takes them, instead of dropping them.
#[tokio::test]
async fn a_report_refused_as_unavailable_is_sent_again_with_its_events() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    config_maps(&cluster).await?;
    let gitsync = FakeGitsync::refusing(2);
    let address = free_port().await?;
    let server = gitsync.serve(address).await?;
    let observer = ready_observer(&cluster, address).await?;

    cluster
        .edit(
            &cluster.config_maps(),
            "managed",
            json!({"data": {"mode": "edited"}}),
        )
        .await?;
    let reported = eventually("the report to be taken after two refusals", || async {
        Ok(reports_of(&gitsync.reported(), "managed")
            .first()
            .map(|event| (*event).clone()))
    })
    .await?;
    assert_eq!(reported.changed_fields, ["data.mode"]);
    let metrics = observer.registry.metrics().clone();
    assert_eq!(
        metrics.drift_report_failures.get(),
        2,
        "both refusals counted"
    );
    assert_eq!(metrics.drift_reports_sent.get(), 1);

    server.cancel();
    cluster.finish(observer).await
}

/// Two observer replicas sharing two shards both watch every labelled object, but a drift is
/// reported by the one holding the object's shard only: gitsync hears of each edit once.
/// Before, every replica reported every drift.
#[tokio::test]
async fn with_shards_each_drift_is_reported_by_one_replica() -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    config_maps(&cluster).await?;
    let gitsync = FakeGitsync::default();
    let address = free_port().await?;
    let server = gitsync.serve(address).await?;
    let mut replicas = Vec::new();
    for identity in ["observer-a", "observer-b"] {
        let mut flags = observer_flags(address);
        flags.extend(
            [
                "--leader-election=true",
                "--shards=2",
                "--lease-duration=3s",
                "--lease-renew-interval=1s",
            ]
            .map(str::to_owned),
        );
        flags.push(format!("--lease-identity={identity}"));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        replicas.push(cluster.observer(&flags).await?);
    }
    let leases: kube::Api<Lease> = kube::Api::namespaced(cluster.client.clone(), "arbor-system");
    eventually("each replica to hold one shard", || async {
        let mut holders = Vec::new();
        for shard in 0..2 {
            let holder = leases
                .get_opt(&format!("arbor-observer-shard-{shard}"))
                .await?
                .and_then(|lease| lease.spec)
                .and_then(|spec| spec.holder_identity);
            holders.push(holder);
        }
        let ready = replicas.iter().all(|replica| replica.readiness.is_ready());
        Ok(
            (ready && holders[0].is_some() && holders[1].is_some() && holders[0] != holders[1])
                .then_some(()),
        )
    })
    .await?;

    let api = cluster.config_maps();
    cluster
        .edit(&api, "managed", json!({"data": {"mode": "edited"}}))
        .await?;
    eventually("the edit to be reported", || async {
        Ok((!reports_of(&gitsync.reported(), "managed").is_empty()).then_some(()))
    })
    .await?;
    cluster
        .edit(&api, "managed", json!({"data": {"mode": "again"}}))
        .await?;
    eventually("the second edit to be reported", || async {
        Ok(reports_of(&gitsync.reported(), "managed")
            .iter()
            .any(|event| event.observed_json.contains("again"))
            .then_some(()))
    })
    .await?;
    // Past the drift window and a report's round trip, so a second replica's report would be in.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let reported = gitsync.reported();
    let managed = reports_of(&reported, "managed");
    assert_eq!(managed.len(), 2, "each edit reported once: {managed:?}");

    server.cancel();
    for replica in replicas {
        replica.stop().await?;
    }
    cluster.shutdown().await;
    Ok(())
}
