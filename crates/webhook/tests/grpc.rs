//! PolicyService over gRPC on loopback gives the decisions admission gives.

mod support;

use arbor_policy::ownership::ClusterGitTrackMode;
use arbor_proto::v1 as proto;
use arbor_proto::v1::policy_service_client::PolicyServiceClient;
use arbor_webhook::grpc::PolicyGrpc;
use arbor_webhook::metrics::WebhookMetrics;
use arbor_webhook::rules::drift::UnreachableAnswer;
use serde_json::{Value, json};
use support::*;
use tokio_util::sync::CancellationToken;

struct GrpcServer {
    client: PolicyServiceClient<tonic::transport::Channel>,
    stop: CancellationToken,
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(policy: arbor_webhook::Policy) -> GrpcServer {
    let (incoming, address) = arbor_runtime::grpc::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let server = arbor_runtime::grpc::server(address, None)
        .unwrap()
        .add_service(PolicyGrpc::new(policy, WebhookMetrics::default()).into_service())
        .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
    tokio::spawn(server);
    let channel = arbor_runtime::grpc::connect(&format!("http://{address}"), None)
        .await
        .unwrap();
    GrpcServer {
        client: PolicyServiceClient::new(channel),
        stop,
    }
}

fn deployment(replicas: u64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "labels": {"arbor.dev/managed": "enabled"}},
        "spec": {"replicas": replicas},
    })
}

/// The same question as an AdmissionReview fixture and as a ReviewRequest.
fn cases() -> Vec<(Value, proto::ReviewRequest)> {
    let user = |name: &str| proto::UserInfo {
        username: name.into(),
        groups: vec!["system:authenticated".into()],
        ..Default::default()
    };
    let namespace_update = (
        cycle_request(),
        proto::ReviewRequest {
            operation: proto::Operation::Update as i32,
            object: Some(proto::ObjectRef {
                version: "v1".into(),
                kind: "Namespace".into(),
                name: "a".into(),
                ..Default::default()
            }),
            object_json: namespace_object(&sub("a", "b")).to_string(),
            old_object_json: namespace_object(&sub("a", "r")).to_string(),
            user: Some(user("alice")),
            sub_resource: String::new(),
        },
    );
    let deployment_ref = proto::ObjectRef {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: "team-a".into(),
        name: "web".into(),
    };
    let drift = |username: &str| {
        (
            request(
                "UPDATE",
                ("apps", "v1", "Deployment"),
                Some("team-a"),
                "web",
                username,
                Some(deployment(5)),
                Some(deployment(2)),
            ),
            proto::ReviewRequest {
                operation: proto::Operation::Update as i32,
                object: Some(deployment_ref.clone()),
                object_json: deployment(5).to_string(),
                old_object_json: deployment(2).to_string(),
                user: Some(user(username)),
                sub_resource: String::new(),
            },
        )
    };
    vec![namespace_update, drift("alice"), drift(GITSYNC_SA)]
}

#[tokio::test]
async fn review_over_grpc_returns_the_admission_decision() {
    let tree = cycle_tree();
    let mut settings = settings(ClusterGitTrackMode::IncludeNamespaced);
    settings.drift = Some(drift_settings(UnreachableAnswer::Allow));
    let policy = policy(
        settings,
        tree,
        Some(ScriptedDeclared::declaring("web", deployment(2))),
    );
    let mut server = start(policy.clone()).await;
    let mut denied = 0;
    for (admission, grpc) in cases() {
        let expected = decide(&policy, admission).await;
        let answer = server.client.review(grpc).await.unwrap().into_inner();
        let decision = answer.decision.unwrap();
        let want = expected.decision();
        assert_eq!(
            (
                decision.allowed,
                decision.rule.as_str(),
                decision.reason.as_str()
            ),
            (want.allowed, want.rule.as_str(), want.reason.as_str())
        );
        assert_eq!(answer.checks.len(), expected.checks.len());
        denied += usize::from(!decision.allowed);
    }
    assert_eq!(denied, 2, "the cycle and the user's drift are refused");
}

#[tokio::test]
async fn review_requests_without_identity_or_with_bad_json_are_invalid_arguments() {
    let mut server = start(policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    ))
    .await;
    let (_, mut request) = cases().remove(0);
    request.object_json = "{".into();
    let status = server.client.review(request.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("object_json"), "{status}");
    request.object = None;
    let status = server.client.review(request).await.unwrap_err();
    assert!(status.message().starts_with("object"), "{status}");
}

#[tokio::test]
async fn check_ownership_answers_with_the_matrix_cell() {
    let mut server = start(policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    ))
    .await;
    let ask = |owner_ns: &str, kind: proto::TrackedObjectKind, object_ns: &str, modes| {
        proto::CheckOwnershipRequest {
            owner: Some(proto::SourceRef {
                kind: if owner_ns.is_empty() {
                    proto::SourceKind::ClusterGitTrack
                } else {
                    proto::SourceKind::GitTrack
                } as i32,
                namespace: owner_ns.into(),
                name: "apps".into(),
            }),
            object_kind: kind as i32,
            object_namespace: object_ns.into(),
            modes,
        }
    };
    let decision = |response: tonic::Response<proto::CheckOwnershipResponse>| {
        response.into_inner().decision.unwrap()
    };
    let cross = decision(
        server
            .client
            .check_ownership(ask(
                "foo",
                proto::TrackedObjectKind::GitTrackObject,
                "bar",
                None,
            ))
            .await
            .unwrap(),
    );
    assert!(!cross.allowed);
    assert_eq!(cross.rule, "seeds/002 ownership GitTrack cross-namespace");
    assert!(cross.reason.contains("Cross namespace never allowed"));

    let excluded = proto::InstallationModes {
        git_track_mode: proto::GitTrackMode::Disabled as i32,
        cluster_git_track_mode: proto::ClusterGitTrackMode::ExcludeNamespaced as i32,
        namespace: String::new(),
    };
    let cluster = decision(
        server
            .client
            .check_ownership(ask(
                "",
                proto::TrackedObjectKind::GitTrackObject,
                "foo",
                Some(excluded),
            ))
            .await
            .unwrap(),
    );
    assert!(!cluster.allowed);
    assert!(
        cluster.rule.contains("ExcludeNamespaced"),
        "{}",
        cluster.rule
    );

    let status = server
        .client
        .check_ownership(ask("", proto::TrackedObjectKind::Unspecified, "", None))
        .await
        .unwrap_err();
    assert!(status.message().starts_with("object_kind"), "{status}");
}
