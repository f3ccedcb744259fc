//! Request accounting: exact counts of what a test's client did, in process and over HTTP.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::config_map;

#[tokio::test]
async fn counts_match_the_calls_exactly() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    emu.requests().reset();
    support::create(&api, &config_map("a", &[])).await;
    support::create(&api, &config_map("b", &[])).await;
    api.get("a").await.expect("get");
    api.list(&Default::default()).await.expect("list");
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .expect("patch");
    api.delete("b", &DeleteParams::default())
        .await
        .expect("delete");
    api.get("b").await.expect_err("gone");
    let requests = emu.requests();
    assert_eq!(requests.writes(), 4);
    assert_eq!(requests.total(), 7);
    assert_eq!(requests.count("create", "configmaps"), 2);
    assert_eq!(requests.count("get", "configmaps"), 2);
    assert_eq!(requests.count("patch", "configmaps"), 1);
    let records = requests.snapshot();
    let last = records.last().expect("records");
    assert_eq!(
        (
            last.verb.as_str(),
            last.name.as_str(),
            last.namespace.as_str(),
            last.identity.as_str(),
            last.code
        ),
        ("get", "b", "default", "system:admin", 404)
    );
    let verbs: Vec<&str> = records.iter().map(|r| r.verb.as_str()).collect();
    assert_eq!(
        verbs,
        vec!["create", "create", "get", "list", "patch", "delete", "get"]
    );
    let (code, report) = support::get(&client, "/__emu/requests").await;
    assert_eq!(code, 200);
    assert_eq!(
        (report["writes"].as_u64(), report["total"].as_u64()),
        (Some(4), Some(7))
    );
    assert_eq!(report["records"][4]["verb"], "patch");
    let (code, _) = support::raw(
        &client,
        "DELETE",
        "/__emu/requests",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!((requests.writes(), requests.total()), (0, 0));
    emu.shutdown().await;
}

#[tokio::test]
async fn reads_alone_make_no_writes() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    support::create(&api, &config_map("a", &[])).await;
    emu.requests().reset();
    for _ in 0..3 {
        api.get("a").await.expect("get");
    }
    assert_eq!(emu.requests().writes(), 0);
    let counts = emu.requests().counts();
    let (key, count) = counts.iter().next().expect("one key");
    assert_eq!(
        (key.verb.as_str(), key.resource.as_str(), *count),
        ("get", "configmaps", 3)
    );
    emu.shutdown().await;
}

/// A create names its object in the record, as kube-apiserver's audit log does (its objectRef
/// takes the name from the object sent), so a replay can tie a create to what it made; a
/// generated name is not known from the request and stays empty.
#[tokio::test]
async fn a_create_is_recorded_with_the_name_of_the_object_it_sent() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    emu.requests().reset();
    support::create(&api, &config_map("named", &[])).await;
    let generated: ConfigMap = serde_json::from_value(json!({
        "metadata": {"generateName": "gen-"},
    }))
    .expect("a ConfigMap");
    api.create(&Default::default(), &generated)
        .await
        .expect("create");
    let names: Vec<(String, String)> = emu
        .requests()
        .snapshot()
        .into_iter()
        .map(|record| (record.verb, record.name))
        .collect();
    assert_eq!(
        names,
        [
            ("create".to_owned(), "named".to_owned()),
            ("create".to_owned(), String::new())
        ]
    );
    emu.shutdown().await;
}
