//! What every cluster of the served Kubernetes version has, found where clients look for it:
//! the `kubernetes` Service, the local APIServices, the other built-in kinds, and the
//! subresources that write one field (`pods/ephemeralcontainers`,
//! `certificatesigningrequests/approval`). The kube crates' own cluster tests (`make
//! client-suite`) met each of these missing.

mod support;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery;
use serde_json::{Value, json};
use support::{create, get, start};

fn from_json<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

#[tokio::test]
async fn the_kubernetes_service_and_the_local_api_services_are_there_from_the_start() {
    let (_emu, client) = start().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let kubernetes = services
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    let spec = kubernetes.spec.expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.1"));
    let port = &spec.ports.expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("https"), 443));

    // As kube-client's group_discovery_oneshot finds them: through discovery of the group.
    let group = discovery::group(&client, "apiregistration.k8s.io")
        .await
        .expect("the apiregistration.k8s.io group is served");
    let (resource, _) = group
        .recommended_kind("APIService")
        .expect("APIService is a kind of the group");
    let api_services: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let names: Vec<String> = api_services
        .list(&Default::default())
        .await
        .expect("APIServices list")
        .items
        .into_iter()
        .filter_map(|service| service.metadata.name)
        .collect();
    for expected in [
        "v1.",
        "v1.apps",
        "v1.apiregistration.k8s.io",
        "v1.events.k8s.io",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} in {names:?}"
        );
    }
    let apps = api_services.get("v1.apps").await.expect("v1.apps");
    assert_eq!(apps.data["spec"]["group"], "apps");
    assert_eq!(apps.data["status"]["conditions"][0]["type"], "Available");
    assert_eq!(apps.data["status"]["conditions"][0]["status"], "True");
}

#[tokio::test]
async fn the_other_stored_kinds_of_kubernetes_1_32_are_served() {
    let (_emu, client) = start().await;
    let collections = [
        "/api/v1/nodes",
        "/api/v1/namespaces/default/endpoints",
        "/api/v1/persistentvolumes",
        "/api/v1/namespaces/default/persistentvolumeclaims",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "/apis/apps/v1/namespaces/default/controllerrevisions",
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        "/apis/networking.k8s.io/v1/ingressclasses",
        "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
        "/apis/node.k8s.io/v1/runtimeclasses",
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/storage.k8s.io/v1/csidrivers",
        "/apis/storage.k8s.io/v1/csinodes",
        "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities",
        "/apis/storage.k8s.io/v1/volumeattachments",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
    ];
    for path in collections {
        let (status, body) = get(&client, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(
            body["kind"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("List")),
            "{path}: {body}"
        );
    }
}

fn busybox(name: &str) -> Pod {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "busybox", "image": "busybox:stable"}]},
    }))
}

fn ephemeral(name: &str) -> Value {
    json!({"name": name, "image": "busybox:stable", "command": ["sh", "-c", "sleep 1"]})
}

#[tokio::test]
async fn ephemeral_containers_are_written_through_their_subresource_and_nothing_else_is() {
    let (_emu, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &busybox("debug-me")).await;
    let read = pods
        .get_ephemeral_containers("debug-me")
        .await
        .expect("the subresource reads the pod");
    assert_eq!(read.spec.expect("spec").ephemeral_containers, None);

    // A replace through the subresource sets the list; the image of the pod's own container
    // in the same body is not taken.
    let mut body = busybox("debug-me");
    let spec = body.spec.as_mut().expect("spec");
    spec.containers[0].image = Some("changed:latest".into());
    spec.ephemeral_containers = Some(vec![from_json(ephemeral("first"))]);
    let replaced = pods
        .replace_ephemeral_containers("debug-me", &PostParams::default(), &body)
        .await
        .expect("replaced through ephemeralcontainers");
    let spec = replaced.spec.expect("spec");
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:stable"));
    let names: Vec<_> = spec
        .ephemeral_containers
        .expect("set")
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["first"]);

    // A strategic-merge patch adds to the list, merged by name.
    let patch: Pod = from_json(json!({"spec": {"ephemeralContainers": [ephemeral("second")]}}));
    let patched = pods
        .patch_ephemeral_containers(
            "debug-me",
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .expect("patched through ephemeralcontainers");
    let names: Vec<_> = patched
        .spec
        .expect("spec")
        .ephemeral_containers
        .expect("set")
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["first", "second"]);
}

#[tokio::test]
async fn a_certificate_signing_request_is_approved_through_its_approval_subresource() {
    let (_emu, client) = start().await;
    let requests: Api<CertificateSigningRequest> = Api::all(client);
    let csr: CertificateSigningRequest = from_json(json!({
        "metadata": {"name": "alice"},
        "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                 "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["client auth"]},
    }));
    create(&requests, &csr).await;
    let approval = json!({"status": {"conditions": [{
        "type": "Approved", "status": "True", "reason": "Test", "message": "approved by a test"}]}});
    requests
        .patch_approval("alice", &PatchParams::default(), &Patch::Merge(&approval))
        .await
        .expect("approved through approval");
    let read = requests
        .get_approval("alice")
        .await
        .expect("the subresource reads");
    let conditions = read.status.expect("status").conditions.expect("conditions");
    assert_eq!(conditions[0].type_, "Approved");

    // The main resource does not write status, and approval does not write spec.
    let label_and_status = json!({"metadata": {"labels": {"team": "a"}},
        "status": {"conditions": [{"type": "Denied", "status": "True"}]}});
    let after_main = requests
        .patch(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(&label_and_status),
        )
        .await
        .expect("main resource patched");
    assert_eq!(
        after_main.status.expect("status").conditions.expect("kept")[0].type_,
        "Approved"
    );
    let after_approval = requests
        .patch_approval(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"usages": ["server auth"]}})),
        )
        .await
        .expect("approval patched");
    assert_eq!(
        after_approval.spec.usages,
        Some(vec!["client auth".to_owned()])
    );
}

#[tokio::test]
async fn built_in_kinds_are_described_in_openapi_v3() {
    let (_emu, client) = start().await;
    let (status, index) = get(&client, "/openapi/v3").await;
    assert_eq!(status, 200);
    let apps = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 is listed");
    let (status, document) = get(&client, apps).await;
    assert_eq!(status, 200);
    let schemas = &document["components"]["schemas"];
    let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    assert!(
        schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]["description"]
            .as_str()
            .is_some_and(|text| text.contains("desired pods")),
        "{}",
        schemas["io.k8s.api.apps.v1.DeploymentSpec"]
    );
    assert!(schemas["io.k8s.api.core.v1.PodTemplateSpec"].is_object());
}

#[tokio::test]
async fn a_token_request_issues_a_service_account_token_a_token_review_recognizes() {
    use k8s_openapi::api::authentication::v1::{
        TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
    };
    use k8s_openapi::api::core::v1::ServiceAccount;
    let (_emu, client) = start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec!["api".to_owned()]),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let missing = accounts
        .create_token_request("robot", &PostParams::default(), &request)
        .await
        .expect_err("no such service account");
    assert!(
        missing
            .to_string()
            .contains("serviceaccounts \"robot\" not found"),
        "{missing}"
    );
    create(
        &accounts,
        &from_json(json!({"metadata": {"name": "robot"}})),
    )
    .await;
    let issued = accounts
        .create_token_request("robot", &PostParams::default(), &request)
        .await
        .expect("a token");
    let token = issued
        .status
        .and_then(|status| status.token)
        .expect("a token");
    assert!(!token.is_empty());

    let reviews: Api<TokenReview> = Api::all(client.clone());
    let review = |token: &str, audiences: &[&str]| TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            audiences: Some(audiences.iter().map(|a| (*a).to_owned()).collect()),
        },
        ..TokenReview::default()
    };
    let reviewed = reviews
        .create(&PostParams::default(), &review(&token, &["api"]))
        .await
        .expect("reviewed")
        .status
        .expect("status");
    assert_eq!(reviewed.authenticated, Some(true));
    assert_eq!(reviewed.audiences, Some(vec!["api".to_owned()]));
    assert_eq!(
        reviewed.user.and_then(|user| user.username).as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    // Another audience, or a token nobody issued, is not authenticated.
    for (token, audience) in [(token.as_str(), "vault"), ("forged", "api")] {
        let status = reviews
            .create(&PostParams::default(), &review(token, &[audience]))
            .await
            .expect("reviewed")
            .status
            .expect("status");
        assert_eq!(status.authenticated, Some(false), "{token} for {audience}");
    }
    // The token is a bearer token of this server: it authenticates as the service account.
    let as_robot = support::client_as(&_emu, &token).await;
    let (status, body) = support::post(
        &as_robot,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}
