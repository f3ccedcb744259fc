//! Identities and deny rules: service-account tokens, a denied verb answered with kube's 403, and
//! SelfSubjectAccessReview agreeing with it.

mod support;

use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::authz::DenyRule;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::json;
use support::api_status;

async fn ssar(client: &kube::Client, verb: &str, resource: &str) -> serde_json::Value {
    let (code, body) = support::post(
        client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": "team"}}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    body["status"].clone()
}

#[tokio::test]
async fn a_denied_verb_is_forbidden_in_kube_words_and_ssar_agrees() {
    let rule = DenyRule::parse(
        "deny user=system:serviceaccount:arbor-system:arbor-hierarchy verb=delete resource=secrets namespace=*",
    )
    .expect("parses");
    let emu = KubeEmu::builder().deny(rule).start().await.expect("starts");
    let admin = support::client(&emu).await;
    support::post(
        &admin,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "team"}}),
    )
    .await;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("key".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    let token = emu.service_account_token("arbor-system", "arbor-hierarchy");
    let robot = support::client_as(&emu, &token).await;
    let secrets: Api<Secret> = Api::namespaced(robot.clone(), "team");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create is allowed");
    let status = api_status(
        secrets
            .delete("key", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert!(
        status.message.starts_with(
            "secrets \"key\" is forbidden: User \"system:serviceaccount:arbor-system:arbor-hierarchy\" cannot delete resource \"secrets\" in API group \"\" in the namespace \"team\""
        ),
        "{}",
        status.message
    );
    let denied = ssar(&robot, "delete", "secrets").await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["reason"]
            .as_str()
            .is_some_and(|r| r.contains("verb=delete")),
        "{denied}"
    );
    assert_eq!(ssar(&robot, "get", "secrets").await["allowed"], true);
    assert_eq!(ssar(&admin, "delete", "secrets").await["allowed"], true);
    let records = emu.requests().snapshot();
    let refused = records
        .iter()
        .find(|r| r.code == 403)
        .expect("the 403 is accounted");
    assert_eq!(
        refused.identity,
        "system:serviceaccount:arbor-system:arbor-hierarchy"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn minted_tokens_authenticate_as_their_user_beside_the_token_file() {
    let emu = KubeEmu::builder()
        .token(arbor_kube_emu::StaticToken::new(
            "s3cret",
            "admin",
            "1",
            &["system:masters"],
        ))
        .start()
        .await
        .expect("starts");
    let token = emu.token_for("carol", &["auditors"]);
    let carol = support::client_as(&emu, &token).await;
    let secrets: Api<Secret> = Api::namespaced(carol, "default");
    secrets
        .list(&Default::default())
        .await
        .expect("carol is authenticated");
    let identity = &emu.requests().snapshot()[0].identity;
    assert_eq!(identity, "carol");
    let stranger = support::client_as(&emu, "not-a-token").await;
    let status = api_status(
        Api::<Secret>::namespaced(stranger, "default")
            .list(&Default::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 401);
    emu.shutdown().await;
}
