//! Kinds added by CustomResourceDefinitions: served at once, versions, status subresource,
//! printer columns, discovery, a kube-rs Controller, and clean-up when the CRD goes.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};
use support::{PATIENCE, TABLE_ACCEPT, api_status, clear_finalizers, create, get, get_as, start};

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    ],
                },
                {
                    "name": "v1beta1", "served": true, "storage": false,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "subresources": {"status": {}},
                },
            ],
        },
    }))
    .expect("a valid CRD")
}

fn widgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn widget(version: &str, name: &str, size: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("example.com/{version}"),
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }))
    .expect("a valid object")
}

async fn install_crd(client: &kube::Client) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .expect("CRD created")
}

#[tokio::test]
async fn a_crd_is_established_and_served_at_once() {
    let (emu, client) = start().await;
    let crd = install_crd(&client).await;
    let conditions = crd.status.and_then(|s| s.conditions).expect("conditions");
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let created = widgets(&client, "v1")
        .create(&PostParams::default(), &widget("v1", "w1", 3))
        .await
        .expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    let through_beta = widgets(&client, "v1beta1")
        .get("w1")
        .await
        .expect("served in v1beta1 too");
    assert_eq!(
        through_beta.types.expect("types").api_version,
        "example.com/v1beta1"
    );

    let legacy = kube::Discovery::new(client.clone())
        .run()
        .await
        .expect("legacy discovery");
    let aggregated = kube::Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    for discovery in [legacy, aggregated] {
        let group = discovery
            .get("example.com")
            .expect("the group is discovered");
        assert!(
            group
                .recommended_resources()
                .iter()
                .any(|(resource, capabilities)| resource.plural == "widgets"
                    && capabilities.supports_operation(kube::discovery::verbs::PATCH)
                    && capabilities
                        .subresources
                        .iter()
                        .any(|(sub, _)| sub.plural == "widgets/status" || sub.plural == "status"))
        );
        assert!(discovery.has_group("coordination.k8s.io"));
        assert!(discovery.get("").is_some(), "the core group is discovered");
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn custom_resources_keep_status_separate_and_track_generation() {
    let (emu, client) = start().await;
    install_crd(&client).await;
    let api = widgets(&client, "v1");
    create(&api, &widget("v1", "w1", 3)).await;
    let patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}, "status": {"phase": "Ignored"}})),
        )
        .await
        .expect("patched");
    assert_eq!(patched.metadata.generation, Some(2));
    assert!(patched.data.get("status").is_none());
    let with_status = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .expect("status patched");
    assert_eq!(with_status.data["status"]["phase"], "Ready");
    assert_eq!(with_status.metadata.generation, Some(2));
    emu.shutdown().await;
}

#[tokio::test]
async fn tables_show_printer_columns() {
    let (emu, client) = start().await;
    install_crd(&client).await;
    widgets(&client, "v1")
        .create(&PostParams::default(), &widget("v1", "w1", 3))
        .await
        .expect("created");
    let (code, table) = get_as(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets",
        TABLE_ACCEPT,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, vec!["Name", "Size", "Phase"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w1", 3, null]));
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");

    let (_, builtin) = get_as(&client, "/api/v1/namespaces", TABLE_ACCEPT).await;
    let first_row = &builtin["rows"][0]["cells"];
    assert_eq!(
        first_row[1], "Active",
        "namespaces show their status: {builtin}"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn deleting_a_crd_removes_its_objects_and_stops_serving_it() {
    let (emu, client) = start().await;
    install_crd(&client).await;
    let api = widgets(&client, "v1");
    create(&api, &widget("v1", "plain", 1)).await;
    let mut held = widget("v1", "held", 1);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&api, &held).await;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let terminating = crds
        .get("widgets.example.com")
        .await
        .expect("waits for its objects");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(api.get_opt("plain").await.expect("read").is_none());

    clear_finalizers(&api, "held").await;
    assert!(
        crds.get_opt("widgets.example.com")
            .await
            .expect("read")
            .is_none()
    );
    let (code, _) = get(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(code, 404, "the kind is no longer served");

    install_crd(&client).await;
    assert!(
        api.list(&Default::default())
            .await
            .expect("listed")
            .items
            .is_empty(),
        "nothing comes back"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn an_invalid_crd_is_refused() {
    let (emu, client) = start().await;
    let mut crd = widget_crd();
    crd.metadata.name = Some("gadgets.example.com".into());
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let status = api_status(crds.create(&PostParams::default(), &crd).await.unwrap_err());
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("must be spec.names.plural+\".\"+spec.group"),
        "{}",
        status.message
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_kube_rs_controller_reconciles_custom_resources() {
    let (emu, client) = start().await;
    install_crd(&client).await;
    let api = widgets(&client, "v1");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let controller = Controller::new_with(api.clone(), watcher::Config::default(), resource)
        .run(
            |widget: Arc<DynamicObject>, api: Arc<Api<DynamicObject>>| async move {
                let observed = widget.metadata.generation.unwrap_or_default();
                let status = json!({"status": {"observedGeneration": observed, "phase": "Ready"}});
                api.patch_status(
                    &widget.metadata.name.clone().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(status),
                )
                .await?;
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_millis(100)),
            Arc::new(api.clone()),
        )
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    create(&api, &widget("v1", "w1", 1)).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let current = api.get("w1").await.expect("read");
        if current.data.get("status").and_then(|s| s.get("phase")) == Some(&Value::from("Ready")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the controller never reconciled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    controller.abort();
    emu.shutdown().await;
}

#[tokio::test]
async fn watches_of_a_deleted_crd_end() {
    use kube::api::WatchParams;
    let (emu, client) = start().await;
    install_crd(&client).await;
    let events = widgets(&client, "v1")
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .expect("watching");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("deleted");
    tokio::time::timeout(PATIENCE, events.collect::<Vec<_>>())
        .await
        .expect("the watch ends with its kind");
    emu.shutdown().await;
}
