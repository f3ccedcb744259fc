//! Custom resources checked against their CRD's structural schema as kube-apiserver checks
//! them: refusals with its wording, pruning with `fieldValidation`, defaulting and CEL rules.
//! The CRD is Arbor's own ClusterGitTrack, as the chart installs it.

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use support::{api_status, post, send, start};

const CLUSTER_GIT_TRACK_CRD: &str =
    include_str!("../../../charts/arbor/crds/clustergittracks.arbor.dev.yaml");
const PATH: &str = "/apis/arbor.dev/v1alpha1/clustergittracks";

async fn install(client: &kube::Client) {
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(CLUSTER_GIT_TRACK_CRD).expect("the chart's CRD parses");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
}

fn tracks(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("arbor.dev", "v1alpha1", "ClusterGitTrack"),
        "clustergittracks",
    );
    Api::all_with(client.clone(), &resource)
}

fn track(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "arbor.dev/v1alpha1",
        "kind": "ClusterGitTrack",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// Creates a valid track following `reference`; the stored object.
async fn create_track(client: &kube::Client, name: &str, reference: Value) -> Value {
    let (code, created) = post(
        client,
        PATH,
        track(
            name,
            json!({"repository": "file:///r", "reference": reference}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    created
}

fn causes(status: &Value) -> Vec<(String, String, String)> {
    status["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|cause| {
            let text = |key: &str| cause[key].as_str().unwrap_or_default().to_owned();
            (text("reason"), text("field"), text("message"))
        })
        .collect()
}

#[tokio::test]
async fn a_string_where_the_schema_wants_an_object_is_refused_naming_the_field() {
    let (_emu, client) = start().await;
    install(&client).await;
    let (code, status) = post(
        &client,
        PATH,
        track("x", json!({"repository": "file:///r", "reference": "main"})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "ClusterGitTrack.arbor.dev \"x\" is invalid: [spec.reference: Invalid value: \"string\": spec.reference in body must be of type object: \"string\", <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    assert_eq!(
        causes(&status)[0],
        (
            "FieldValueTypeInvalid".to_owned(),
            "spec.reference".to_owned(),
            "Invalid value: \"string\": spec.reference in body must be of type object: \"string\""
                .to_owned()
        )
    );
    assert_eq!(status["details"]["kind"], "ClusterGitTrack");
    assert_eq!(status["details"]["group"], "arbor.dev");
    let (code, _) = support::get(&client, &format!("{PATH}/x")).await;
    assert_eq!(code, 404, "nothing was stored");
}

#[tokio::test]
async fn a_missing_required_spec_and_a_value_outside_the_enum_are_refused_through_kube_rs() {
    let (_emu, client) = start().await;
    install(&client).await;
    let api = tracks(&client);
    let no_spec: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": "ClusterGitTrack", "metadata": {"name": "bare"},
    }))
    .expect("an object");
    let status = api_status(
        api.create(&PostParams::default(), &no_spec)
            .await
            .expect_err("spec is required"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "ClusterGitTrack.arbor.dev \"bare\" is invalid: spec: Required value"
    );
    let bad_policy: DynamicObject = serde_json::from_value(track(
        "policy",
        json!({"repository": "file:///r", "reference": {"branch": "main"}, "deletionPolicy": "Keep"}),
    ))
    .expect("an object");
    let status = api_status(
        api.create(&PostParams::default(), &bad_policy)
            .await
            .expect_err("Keep is outside the enum"),
    );
    assert!(
        status.message.starts_with(
            "ClusterGitTrack.arbor.dev \"policy\" is invalid: [spec.deletionPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Orphan\""
        ),
        "{}",
        status.message
    );
    let details = status.details.expect("details");
    assert_eq!(details.causes[0].reason, "FieldValueNotSupported");
    assert_eq!(details.causes[0].field, "spec.deletionPolicy");
}

#[tokio::test]
async fn defaults_are_filled_in_and_a_cel_rule_refuses_two_references() {
    let (_emu, client) = start().await;
    install(&client).await;
    let created = create_track(&client, "ok", json!({"branch": "main"})).await;
    assert_eq!(created["spec"]["deletionPolicy"], "Orphan");
    assert_eq!(created["spec"]["layout"], "Flat");
    assert_eq!(created["spec"]["prune"], true);
    assert_eq!(created["spec"]["suspend"], false);
    let (code, status) = post(
        &client,
        PATH,
        track(
            "two",
            json!({"repository": "file:///r", "reference": {"branch": "main", "tag": "v1"}}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ClusterGitTrack.arbor.dev \"two\" is invalid: spec.reference: Invalid value: \"object\": exactly one of branch, tag or commit must be set"
    );
}

async fn post_with_validation(
    client: &kube::Client,
    field_validation: &str,
    body: &Value,
) -> (u16, Vec<String>, Value) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("{PATH}?fieldValidation={field_validation}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(body).expect("serializable"),
        ))
        .expect("a valid request");
    let response = client.send(request).await.expect("the server answers");
    let warnings = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|value| value.to_str().unwrap_or_default().to_owned())
        .collect();
    let request = http::Request::builder()
        .method("GET")
        .uri(format!(
            "{PATH}/{}",
            body["metadata"]["name"].as_str().unwrap_or_default()
        ))
        .body(kube::client::Body::empty())
        .expect("a valid request");
    let code = response.status().as_u16();
    let (_, stored) = send(client, request).await;
    (code, warnings, stored)
}

#[tokio::test]
async fn unknown_fields_are_pruned_with_a_warning_refused_when_strict_and_dropped_silently_when_ignored()
 {
    let (_emu, client) = start().await;
    install(&client).await;
    let body = |name: &str| {
        track(
            name,
            json!({"repository": "file:///r", "reference": {"branch": "main"}, "branch": "main"}),
        )
    };
    let (code, warnings, stored) = post_with_validation(&client, "Warn", &body("warn")).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        vec!["299 - \"unknown field \\\"spec.branch\\\"\""]
    );
    assert!(stored["spec"].get("branch").is_none(), "{stored}");
    let (code, warnings, stored) = post_with_validation(&client, "Ignore", &body("ignore")).await;
    assert_eq!(code, 201);
    assert!(warnings.is_empty());
    assert!(stored["spec"].get("branch").is_none());
    let (code, _, _) = post_with_validation(&client, "Strict", &body("strict")).await;
    assert_eq!(code, 400);
    let (_, status) = post(
        &client,
        &format!("{PATH}?fieldValidation=Strict"),
        body("strict"),
    )
    .await;
    assert_eq!(
        status["message"],
        "ClusterGitTrack in version \"v1alpha1\" cannot be handled as a ClusterGitTrack: strict decoding error: unknown field \"spec.branch\""
    );
}

#[tokio::test]
async fn a_crd_whose_pattern_does_not_compile_is_refused() {
    let (_emu, client) = start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(("}}}}}}}]},
    });
    let (code, status) = post(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status)[0].1,
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].pattern"
    );
}

#[tokio::test]
async fn updates_are_validated_too() {
    let (_emu, client) = start().await;
    install(&client).await;
    let created = create_track(&client, "u", json!({"commit": "abc"})).await;
    let mut changed = created.clone();
    changed["spec"]["layout"] = json!("Nested");
    let (code, status) = support::raw(
        &client,
        "PUT",
        &format!("{PATH}/u"),
        "application/json",
        Some(changed),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status)[0].1, "spec.layout");
    let (code, status) = support::raw(
        &client,
        "PATCH",
        &format!("{PATH}/u"),
        "application/merge-patch+json",
        Some(json!({"spec": {"repository": 5}})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status)[0].1, "spec.repository");
}
