//! The generated contracts: service paths, wire round trips, and a real call over loopback.

use std::collections::BTreeSet;
use std::pin::Pin;

use arbor_proto::v1::observer_service_client::ObserverServiceClient;
use arbor_proto::v1::observer_service_server::{ObserverService, ObserverServiceServer};
use arbor_proto::v1::policy_service_client::PolicyServiceClient;
use arbor_proto::v1::policy_service_server::{PolicyService, PolicyServiceServer};
use arbor_proto::v1::{
    self, ActionInputs, Decision, DriftEvent, ExplainResponse, ObjectRef, SourceKind, SourceRef,
};
use prost::Message;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

fn descriptor_set() -> prost_types::FileDescriptorSet {
    prost_types::FileDescriptorSet::decode(arbor_proto::FILE_DESCRIPTOR_SET).unwrap()
}

#[test]
fn descriptor_set_lists_every_method_path_of_the_design() {
    let mut paths = BTreeSet::new();
    let mut streaming = BTreeSet::new();
    for file in descriptor_set()
        .file
        .iter()
        .filter(|f| f.package() == "arbor.v1")
    {
        for service in &file.service {
            for method in &service.method {
                let path = format!("/arbor.v1.{}/{}", service.name(), method.name());
                if method.server_streaming() || method.client_streaming() {
                    streaming.insert(path.clone());
                }
                paths.insert(path);
            }
        }
    }
    let expected: BTreeSet<String> = [
        "/arbor.v1.SyncService/GetStatus",
        "/arbor.v1.SyncService/ListManaged",
        "/arbor.v1.SyncService/Explain",
        "/arbor.v1.SyncService/TriggerSync",
        "/arbor.v1.SyncService/ReportDrift",
        "/arbor.v1.SyncService/GetDeclared",
        "/arbor.v1.SyncService/Preview",
        "/arbor.v1.HierarchyService/GetTree",
        "/arbor.v1.HierarchyService/GetNamespace",
        "/arbor.v1.HierarchyService/ExplainPropagation",
        "/arbor.v1.ObserverService/ListApplications",
        "/arbor.v1.ObserverService/GetObservation",
        "/arbor.v1.ObserverService/WatchDrift",
        "/arbor.v1.PolicyService/CheckOwnership",
        "/arbor.v1.PolicyService/Review",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(paths, expected);
    assert_eq!(
        streaming,
        BTreeSet::from(["/arbor.v1.ObserverService/WatchDrift".to_owned()])
    );
}

#[test]
fn service_names_match_the_generated_servers() {
    use tonic::server::NamedService;
    assert_eq!(arbor_proto::service_names::SYNC, "arbor.v1.SyncService");
    assert_eq!(
        <ObserverServiceServer<Observer> as NamedService>::NAME,
        arbor_proto::service_names::OBSERVER
    );
    assert_eq!(
        <PolicyServiceServer<Policy> as NamedService>::NAME,
        arbor_proto::service_names::POLICY
    );
    assert_eq!(
        arbor_proto::service_names::HIERARCHY,
        "arbor.v1.HierarchyService"
    );
}

#[test]
fn explain_response_round_trips_and_keeps_not_applicable_apart_from_false() {
    let response = ExplainResponse {
        object: Some(role("shipping-prod", "job-creator")),
        declarations: vec![v1::Declaration {
            source: Some(SourceRef {
                kind: SourceKind::ClusterGitTrack.into(),
                namespace: String::new(),
                name: "foo-corp".into(),
            }),
            file: "namespaces/online/shipping-app-backend/pod-creator-rolebinding.yaml".into(),
            commit: "0123abc".into(),
            inherited_from: "namespaces/online/shipping-app-backend".into(),
        }],
        inputs: Some(ActionInputs {
            sync_declared: true,
            resource_declared: true,
            on_cluster: true,
            has_label: Some(false),
            matches: None,
        }),
        decision: Some(Decision {
            allowed: false,
            action: v1::Action::None.into(),
            rule: "seeds/000 row 3".into(),
            reason: "the object on the cluster has no management label".into(),
        }),
        state: v1::ManagedState::Unmanaged.into(),
    };
    let decoded = ExplainResponse::decode(response.encode_to_vec().as_slice()).unwrap();
    assert_eq!(decoded, response);
    let inputs = decoded.inputs.unwrap();
    assert_eq!((inputs.has_label, inputs.matches), (Some(false), None));
}

fn role(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        kind: "Role".into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// Answers ownership questions by namespace equality only: enough to see that requests and
/// answers cross the wire intact, not the real matrix (that is arbor-policy's).
#[derive(Debug)]
struct Policy;

#[tonic::async_trait]
impl PolicyService for Policy {
    async fn check_ownership(
        &self,
        request: Request<v1::CheckOwnershipRequest>,
    ) -> Result<Response<v1::CheckOwnershipResponse>, Status> {
        let request = request.into_inner();
        let owner = request
            .owner
            .ok_or_else(|| Status::invalid_argument("owner is required"))?;
        let allowed = owner.namespace == request.object_namespace;
        Ok(Response::new(v1::CheckOwnershipResponse {
            decision: Some(Decision {
                allowed,
                action: v1::Action::Unspecified.into(),
                rule: "test same-namespace".into(),
                reason: format!("owner in {:?}", owner.namespace),
            }),
        }))
    }

    async fn review(
        &self,
        request: Request<v1::ReviewRequest>,
    ) -> Result<Response<v1::ReviewResponse>, Status> {
        let request = request.into_inner();
        Err(Status::failed_precondition(format!(
            "review of {} is not answered by this test server",
            request.operation().as_str_name()
        )))
    }
}

/// Streams one drift event per name in the requested application, then ends.
#[derive(Debug)]
struct Observer;

type DriftStream = Pin<Box<dyn Stream<Item = Result<DriftEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ObserverService for Observer {
    type WatchDriftStream = DriftStream;

    async fn list_applications(
        &self,
        _: Request<v1::ListApplicationsRequest>,
    ) -> Result<Response<v1::ListApplicationsResponse>, Status> {
        Ok(Response::new(v1::ListApplicationsResponse::default()))
    }

    async fn get_observation(
        &self,
        request: Request<v1::GetObservationRequest>,
    ) -> Result<Response<v1::GetObservationResponse>, Status> {
        Err(Status::not_found(format!(
            "no application {}",
            request.get_ref().name
        )))
    }

    async fn watch_drift(
        &self,
        request: Request<v1::WatchDriftRequest>,
    ) -> Result<Response<DriftStream>, Status> {
        let request = request.into_inner();
        let events: Vec<Result<DriftEvent, Status>> = request
            .application
            .split(',')
            .map(|name| {
                Ok(DriftEvent {
                    object: Some(role(&request.namespace, name)),
                    kind: v1::DriftKind::Modified.into(),
                    changed_fields: vec!["rules".into()],
                    reporter: "test".into(),
                    ..DriftEvent::default()
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(events))))
    }
}

#[tokio::test]
async fn unary_and_streaming_calls_cross_a_loopback_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PolicyServiceServer::new(Policy))
            .add_service(ObserverServiceServer::new(Observer))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    stopped.await.ok();
                },
            ),
    );
    let endpoint = format!("http://{address}");

    let mut policy = PolicyServiceClient::connect(endpoint.clone())
        .await
        .unwrap();
    let owner = SourceRef {
        kind: SourceKind::GitTrack.into(),
        namespace: "foo".into(),
        name: "apps".into(),
    };
    let answer = policy
        .check_ownership(v1::CheckOwnershipRequest {
            owner: Some(owner),
            object_kind: v1::TrackedObjectKind::GitTrackObject.into(),
            object_namespace: "bar".into(),
            modes: None,
        })
        .await
        .unwrap()
        .into_inner();
    let decision = answer.decision.unwrap();
    assert!(!decision.allowed);
    assert_eq!(decision.reason, "owner in \"foo\"");
    let refused = policy
        .review(v1::ReviewRequest {
            operation: v1::Operation::Delete.into(),
            ..v1::ReviewRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(refused.message().contains("OPERATION_DELETE"));

    let mut observer = ObserverServiceClient::connect(endpoint).await.unwrap();
    let mut stream = observer
        .watch_drift(v1::WatchDriftRequest {
            namespace: "shipping-prod".into(),
            application: "a,b".into(),
            include_managed: true,
        })
        .await
        .unwrap()
        .into_inner();
    let mut names = Vec::new();
    while let Some(event) = stream.next().await {
        names.push(event.unwrap().object.unwrap().name);
    }
    assert_eq!(names, ["a", "b"]);

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
