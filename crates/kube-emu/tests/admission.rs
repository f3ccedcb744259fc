//! Admission webhooks end to end: configurations stored through the API, a webhook served by the
//! test over HTTPS, and clients (kube-rs, kubectl) seeing what they would see from
//! kube-apiserver.

mod support;

use std::process::Command;

use arbor_kube_emu::{KubeEmu, StaticToken};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::webhook::{SERVICE_HOST, TestWebhook};
use support::{api_status, config_map};

/// A webhook entry for a configuration: configmaps, CREATE/UPDATE/DELETE, `clientConfig` given.
fn hook(name: &str, client_config: Value, failure_policy: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

fn url_config(webhook: &TestWebhook, path: &str) -> Value {
    json!({"url": webhook.url(path), "caBundle": webhook.ca_bundle()})
}

async fn configure(client: &kube::Client, kind: &str, name: &str, webhooks: Vec<Value>) {
    let plural = format!("{}webhookconfigurations", kind.to_lowercase());
    let (code, body) = support::post(
        client,
        &format!("/apis/admissionregistration.k8s.io/v1/{plural}"),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": format!("{kind}WebhookConfiguration"),
            "metadata": {"name": name},
            "webhooks": webhooks,
        }),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

/// Stores a ValidatingWebhookConfiguration `name` with one webhook.
async fn validate(client: &kube::Client, name: &str, webhook: Value) {
    configure(client, "Validating", name, vec![webhook]).await;
}

/// `deny.example.com`, refusing every configmap write through the test webhook's `/deny`.
fn deny_hook(webhook: &TestWebhook) -> Value {
    hook("deny.example.com", url_config(webhook, "deny"), "Fail")
}

/// The Status of a request the server refused.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    api_status(result.expect_err("the request is refused"))
}

fn config_maps(client: &kube::Client, namespace: &str) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), namespace)
}

#[tokio::test]
async fn a_validating_denial_reaches_the_client_in_kube_apiserver_words() {
    let webhook = TestWebhook::start().await;
    let (emu, client) = support::start().await;
    validate(&client, "guard", deny_hook(&webhook)).await;
    let api = config_maps(&client, "default");
    let status = refusal(
        api.create(&PostParams::default(), &config_map("refused", &[]))
            .await,
    );
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        "admission webhook \"deny.example.com\" denied the request: this object is not welcome"
    );
    assert!(api.get_opt("refused").await.expect("get").is_none());
    let review = &webhook.reviews("deny")[0];
    assert_eq!(review["operation"], "CREATE");
    assert_eq!(
        review["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(review["resource"]["resource"], "configmaps");
    assert_eq!(review["namespace"], "default");
    assert_eq!(review["name"], "refused");
    assert_eq!(review["userInfo"]["username"], "system:admin");
    assert_eq!(review["options"]["kind"], "CreateOptions");
    assert_eq!(review["dryRun"], false);
    emu.shutdown().await;
}

// kubectl blocks its thread while the in-process server answers on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_webhook_denial() {
    let webhook = TestWebhook::start().await;
    // kubectl asks for a username on HTTPS without credentials, so the server wants a token.
    let admin = StaticToken::new("s3cret", "admin", "1", &["system:masters"]);
    let (emu, client) = support::start_with(KubeEmu::builder().tls(true).token(admin)).await;
    validate(&client, "guard", deny_hook(&webhook)).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig).expect("written");
    let output = Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["create", "configmap", "refused", "--from-literal=a=b"])
        .env("KUBECACHEDIR", dir.path().join("cache"))
        .output()
        .expect("kubectl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(
            "admission webhook \"deny.example.com\" denied the request: this object is not welcome"
        ),
        "{stderr}"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn failure_policy_decides_when_the_webhook_is_down() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let down = format!("https://{}/validate", closed.local_addr().expect("addr"));
    drop(closed);
    let webhook = TestWebhook::start().await;
    let (emu, client) = support::start().await;
    let unreachable = json!({"url": down, "caBundle": webhook.ca_bundle()});
    validate(
        &client,
        "lenient",
        hook("lenient.example.com", unreachable.clone(), "Ignore"),
    )
    .await;
    let api = config_maps(&client, "default");
    api.create(&PostParams::default(), &config_map("let-through", &[]))
        .await
        .expect("Ignore lets the request through");
    validate(
        &client,
        "strict",
        hook("strict.example.com", unreachable, "Fail"),
    )
    .await;
    let status = refusal(
        api.create(&PostParams::default(), &config_map("refused", &[]))
            .await,
    );
    assert_eq!(status.code, 500);
    assert_eq!(status.reason, "InternalError");
    assert!(
        status.message.starts_with(
            "Internal error occurred: failed calling webhook \"strict.example.com\": failed to call webhook: Post \"https://127.0.0.1:"
        ),
        "{}",
        status.message
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_webhook_with_the_wrong_ca_bundle_is_a_failed_call() {
    let webhook = TestWebhook::start().await;
    let (other_ca, _) = support::webhook::certificate();
    let (emu, client) = support::start().await;
    let wrong = json!({"url": webhook.url("allow"), "caBundle": base64_of(&other_ca)});
    validate(
        &client,
        "mistrusted",
        hook("mistrusted.example.com", wrong, "Fail"),
    )
    .await;
    let api = config_maps(&client, "default");
    let status = refusal(
        api.create(&PostParams::default(), &config_map("x", &[]))
            .await,
    );
    assert_eq!(status.code, 500);
    assert!(
        status
            .message
            .contains("failed calling webhook \"mistrusted.example.com\""),
        "{}",
        status.message
    );
    assert!(status.message.contains("certificate"), "{}", status.message);
    assert!(webhook.reviews("allow").is_empty(), "no review got through");
    emu.shutdown().await;
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn mutations_apply_before_validation_and_warnings_reach_the_client() {
    let webhook = TestWebhook::start().await;
    let (emu, client) = support::start().await;
    configure(
        &client,
        "Mutating",
        "label",
        vec![hook(
            "mutate.example.com",
            url_config(&webhook, "mutate"),
            "Fail",
        )],
    )
    .await;
    configure(
        &client,
        "Validating",
        "observe",
        vec![
            hook("allow.example.com", url_config(&webhook, "allow"), "Fail"),
            hook("warn.example.com", url_config(&webhook, "warn"), "Fail"),
        ],
    )
    .await;
    let (code, body) = support::post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "patched", "labels": {"own": "label"}}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["metadata"]["labels"],
        json!({"own": "label", "mutated": "yes"})
    );
    let validated = &webhook.reviews("allow")[0];
    assert_eq!(
        validated["object"]["metadata"]["labels"]["mutated"], "yes",
        "validation sees the mutation"
    );
    let request = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "warned"}})
                .to_string()
                .into_bytes(),
        ))
        .expect("request");
    let response = client.send(request).await.expect("answered");
    assert_eq!(response.status(), 201);
    let warnings: Vec<&str> = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|value| value.to_str().expect("text"))
        .collect();
    assert_eq!(warnings, vec![r#"299 - "think \"twice\"""#]);
    emu.shutdown().await;
}

#[tokio::test]
async fn object_selectors_pick_by_new_or_old_labels() {
    let webhook = TestWebhook::start().await;
    let (emu, client) = support::start().await;
    let mut guarded = hook(
        "selective.example.com",
        url_config(&webhook, "deny"),
        "Fail",
    );
    guarded["objectSelector"] = json!({"matchLabels": {"guarded": "true"}});
    validate(&client, "selective", guarded).await;
    let api = config_maps(&client, "default");
    api.create(&PostParams::default(), &config_map("free", &[]))
        .await
        .expect("not selected");
    let status = refusal(
        api.create(
            &PostParams::default(),
            &config_map("kept", &[("guarded", "true")]),
        )
        .await,
    );
    assert_eq!(status.code, 403);
    // Labelling an unguarded object selects it through the new object.
    let labelled = Patch::Merge(json!({"metadata": {"labels": {"guarded": "true"}}}));
    assert_eq!(
        refusal(api.patch("free", &PatchParams::default(), &labelled).await).code,
        403
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn namespace_selectors_look_at_the_namespace_labels() {
    let webhook = TestWebhook::start().await;
    let (emu, client) = support::start().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, labels) in [
        ("open", None),
        (
            "locked",
            Some([("locked".to_owned(), "yes".to_owned())].into()),
        ),
    ] {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels,
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
    }
    let mut locked = hook(
        "locked.example.com",
        url_config(&webhook, "deny-422"),
        "Fail",
    );
    locked["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "locked", "operator": "Exists"}]});
    locked["rules"] = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]);
    validate(&client, "locked", locked).await;
    config_maps(&client, "open")
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .expect("open");
    let status = refusal(
        config_maps(&client, "locked")
            .create(&PostParams::default(), &config_map("a", &[]))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    // For a Namespace the selector looks at the namespace itself.
    let status = refusal(
        namespaces
            .patch(
                "locked",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
            )
            .await,
    );
    assert_eq!(status.code, 422);
    namespaces
        .patch(
            "open",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .expect("an unlabelled namespace is not selected");
    emu.shutdown().await;
}

#[tokio::test]
async fn services_resolve_through_the_address_map_and_reviews_carry_the_caller() {
    let webhook = TestWebhook::start().await;
    let emu = KubeEmu::builder()
        .service_address("webhooks", "hook", 8443, webhook.addr)
        .start()
        .await
        .expect("starts");
    let admin = support::client(&emu).await;
    let service = json!({"service": {"namespace": "webhooks", "name": "hook", "port": 8443, "path": "/allow"}, "caBundle": webhook.ca_bundle()});
    validate(&admin, "audit", hook("audit.example.com", service, "Fail")).await;
    let token = emu.service_account_token("arbor-system", "arbor-hierarchy");
    let robot = support::client_as(&emu, &token).await;
    let api = config_maps(&robot, "default");
    api.create(&PostParams::default(), &config_map("one", &[]))
        .await
        .expect("created");
    api.create(&PostParams::default(), &config_map("two", &[]))
        .await
        .expect("created");
    api.patch(
        "one",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "2"}})),
    )
    .await
    .expect("patched");
    api.delete("one", &DeleteParams::default())
        .await
        .expect("deleted");
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("collection deleted");
    let reviews = webhook.reviews("allow");
    let operations: Vec<(&str, &str)> = reviews
        .iter()
        .map(|r| {
            (
                r["operation"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        operations,
        vec![
            ("CREATE", "one"),
            ("CREATE", "two"),
            ("UPDATE", "one"),
            ("DELETE", "one"),
            ("DELETE", "two")
        ]
    );
    let user = &reviews[0]["userInfo"];
    assert_eq!(
        user["username"],
        "system:serviceaccount:arbor-system:arbor-hierarchy"
    );
    assert_eq!(
        user["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:arbor-system",
            "system:authenticated"
        ])
    );
    assert_eq!(reviews[2]["oldObject"]["data"]["value"], "1");
    assert_eq!(reviews[2]["object"]["data"]["value"], "2");
    assert_eq!(reviews[2]["options"]["kind"], "PatchOptions");
    assert_eq!(reviews[3]["object"], Value::Null);
    assert_eq!(reviews[3]["oldObject"]["metadata"]["name"], "one");
    assert_eq!(reviews[3]["options"]["kind"], "DeleteOptions");
    assert!(SERVICE_HOST.starts_with("hook.webhooks"));
    emu.shutdown().await;
}

#[tokio::test]
async fn webhook_configurations_themselves_are_never_admitted() {
    let webhook = TestWebhook::start().await;
    let (emu, client) = support::start().await;
    let mut everything = hook("all.example.com", url_config(&webhook, "deny"), "Fail");
    everything["rules"] = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]);
    validate(&client, "all", everything).await;
    let (code, body) = support::raw(
        &client,
        "DELETE",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/all",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    config_maps(&client, "default")
        .create(&PostParams::default(), &config_map("free", &[]))
        .await
        .expect("unguarded again");
    emu.shutdown().await;
}
