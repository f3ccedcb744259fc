//! Patches and server-side apply through the server: the four patch types, apply creating,
//! field-manager conflicts resolved with force, and ownership recorded for ordinary writes.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{api_status, create, raw_bytes, start};

fn managers(object: &ConfigMap) -> Vec<(String, String)> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|entry| {
            (
                entry.manager.clone().unwrap_or_default(),
                entry.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn apply_creates_a_missing_object_and_records_its_manager() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let applied = api
        .patch(
            "applied",
            &PatchParams::apply("arbor-gitsync"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}})),
        )
        .await
        .expect("applied");
    assert!(applied.metadata.uid.is_some());
    assert_eq!(
        managers(&applied),
        vec![("arbor-gitsync".to_owned(), "Apply".to_owned())]
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn an_apply_conflict_is_reported_and_resolved_with_force() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let manifest = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"key": value}});
    api.patch(
        "shared",
        &PatchParams::apply("first"),
        &Patch::Apply(manifest("one")),
    )
    .await
    .expect("first apply");
    let status = api_status(
        api.patch(
            "shared",
            &PatchParams::apply("second"),
            &Patch::Apply(manifest("two")),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert!(
        status.message.contains("conflict with \"first\""),
        "{}",
        status.message
    );
    assert!(status.message.contains(".data.key"), "{}", status.message);
    let forced = api
        .patch(
            "shared",
            &PatchParams::apply("second").force(),
            &Patch::Apply(manifest("two")),
        )
        .await
        .expect("forced apply");
    assert_eq!(forced.data.expect("data")["key"], "two");
    emu.shutdown().await;
}

#[tokio::test]
async fn updates_record_ownership_under_the_field_manager() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let params = PostParams {
        field_manager: Some("arbor-hierarchy".into()),
        ..PostParams::default()
    };
    let created = api
        .create(
            &params,
            &serde_json::from_value(json!({"metadata": {"name": "owned"}, "data": {"a": "1"}}))
                .expect("valid"),
        )
        .await
        .expect("created");
    assert_eq!(
        managers(&created),
        vec![("arbor-hierarchy".to_owned(), "Update".to_owned())]
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn merge_json_and_strategic_patches_apply() {
    let (emu, client) = start().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}, {"name": "sidecar", "image": "envoy:1"}]},
            },
        },
    });
    create(
        &deployments,
        &serde_json::from_value(deployment).expect("valid"),
    )
    .await;
    let strategic = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}});
    let patched = deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(strategic))
        .await
        .expect("strategic merge");
    let containers = patched.spec.template.spec.expect("pod spec").containers;
    assert_eq!(containers.len(), 2, "containers merge by name");
    assert_eq!(containers[0].image.as_deref(), Some("nginx:2"));

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(
        &config_maps,
        &serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"a": "1"}}))
            .expect("valid"),
    )
    .await;
    let json_patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/data/b", "value": "2"}]))
            .expect("valid");
    let patched = config_maps
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::<()>::Json(json_patch),
        )
        .await
        .expect("json patch");
    assert_eq!(patched.data.expect("data")["b"], "2");

    let failing_test =
        serde_json::to_vec(&json!([{"op": "test", "path": "/data/a", "value": "nope"}]))
            .expect("json");
    let (code, status) = raw_bytes(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm",
        "application/json-patch+json",
        failing_test,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let (code, _) = raw_bytes(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm",
        "text/plain",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 415);
    let (code, _) = raw_bytes(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/absent",
        "application/merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 404, "only apply creates");
    emu.shutdown().await;
}

#[tokio::test]
async fn a_patch_carrying_a_stale_resource_version_conflicts() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = create(
        &api,
        &serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"a": "1"}}))
            .expect("valid"),
    )
    .await;
    api.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "2"}})),
    )
    .await
    .expect("patched");
    let stale = json!({"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"a": "3"}});
    let status = api_status(
        api.patch("cm", &PatchParams::default(), &Patch::Merge(stale))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    emu.shutdown().await;
}

#[tokio::test]
async fn repeating_an_identical_apply_writes_nothing() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "steady", "labels": {"a": "b"}}, "data": {"key": "v"}});
    let first = api
        .patch(
            "steady",
            &PatchParams::apply("arbor-gitsync"),
            &Patch::Apply(&manifest),
        )
        .await
        .expect("applied");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = api
        .patch(
            "steady",
            &PatchParams::apply("arbor-gitsync"),
            &Patch::Apply(&manifest),
        )
        .await
        .expect("applied again");
    assert_eq!(
        first.metadata.resource_version, second.metadata.resource_version,
        "a no-op apply must not produce a new resourceVersion (watchers would see a change)"
    );
    let update = api
        .patch(
            "steady",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": "v"}})),
        )
        .await
        .expect("merge patched");
    assert_eq!(
        first.metadata.resource_version,
        update.metadata.resource_version
    );
    emu.shutdown().await;
}
