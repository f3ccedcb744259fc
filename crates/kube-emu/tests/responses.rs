//! Answers shaped as kube-apiserver shapes them, where the kube crates' own cluster tests
//! (`make client-suite`) found the emulator's different: writes answered in the representation
//! the client asked for, objects written `kind` first, a Node's `spec.unschedulable` selectable
//! when unset, and apply bodies that leave the name of an existing object to the URL.

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, DynamicObject, ListParams, ObjectMeta, PartialObjectMetaExt, Patch, PatchParams,
    ResourceExt,
};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::{create, start};

fn from_json<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

#[tokio::test]
async fn a_metadata_client_gets_metadata_back_from_its_writes() {
    let (_emu, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(
        &pods,
        &from_json(json!({"metadata": {"name": "meta"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})),
    )
    .await;
    let patch = ObjectMeta {
        annotations: Some([("test".to_owned(), "123".to_owned())].into()),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Pod>();
    let patched = pods
        .patch_metadata("meta", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("metadata patched");
    assert_eq!(
        patched.annotations().get("test").map(String::as_str),
        Some("123")
    );
    let types = patched.types.expect("type meta");
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );
}

#[tokio::test]
async fn objects_are_written_kind_first_as_kube_apiserver_writes_them() {
    let (_emu, client) = start().await;
    let request = http::Request::get("/api/v1/namespaces/default/services/kubernetes")
        .body(Vec::new())
        .expect("a request");
    let text = client.request_text(request).await.expect("the Service");
    assert!(
        text.starts_with(r#"{"kind":"Service","apiVersion":"v1","metadata":"#),
        "{text}"
    );
    // A client decoding it as the wrong kind reports kube-apiserver's column.
    let error = serde_json::from_str::<Pod>(&text).expect_err("a Service is not a Pod");
    assert_eq!(
        error.to_string(),
        r#"invalid value: string "Service", expected Pod at line 1 column 17"#
    );
}

#[tokio::test]
async fn cordoning_a_node_takes_it_out_of_the_schedulable_selection() {
    let (_emu, client) = start().await;
    let nodes: Api<Node> = Api::all(client);
    create(&nodes, &from_json(json!({"metadata": {"name": "node-1"}}))).await;
    let schedulable = ListParams::default().fields("spec.unschedulable==false");
    let count = |list: kube::api::ObjectList<Node>| list.items.len();
    assert_eq!(count(nodes.list(&schedulable).await.expect("list")), 1);
    nodes.cordon("node-1").await.expect("cordoned");
    assert_eq!(count(nodes.list(&schedulable).await.expect("list")), 0);
    nodes.uncordon("node-1").await.expect("uncordoned");
    assert_eq!(count(nodes.list(&schedulable).await.expect("list")), 1);
}

#[tokio::test]
async fn an_apply_to_an_existing_object_may_leave_its_name_to_the_url() {
    let (_emu, client) = start().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    );
    let maps: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let apply = PatchParams::apply("client-suite");
    let partial = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
    // Creating needs the name in the body, as before.
    let refused = maps
        .patch("settings", &apply, &Patch::Apply(&partial))
        .await
        .expect_err("no name to create with");
    assert!(refused.to_string().contains("metadata.name"), "{refused}");
    let named = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": {"a": "0"}});
    maps.patch("settings", &apply, &Patch::Apply(&named))
        .await
        .expect("created by apply");
    let updated = maps
        .patch("settings", &apply, &Patch::Apply(&partial))
        .await
        .expect("an existing object is named by the URL");
    assert_eq!(updated.name_any(), "settings");
    assert_eq!(updated.data["data"]["a"], "1");
}
