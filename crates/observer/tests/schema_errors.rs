//! Observer schemas are validated before anything is applied: each error becomes a `Stalled`
//! condition (reason `InvalidObserverSchema`) naming the resource, the exact path and the
//! reason code, and the Application's objects are not created.

mod support;

use arbor_api::condition::{find_condition, types};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::{Cluster, nginx_manifest};

fn deployment_schema(spec: Value) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec}])
}

/// Creates an Application with `schema` and checks its Stalled condition names `expected`.
async fn assert_refused(
    cluster: &Cluster,
    name: &str,
    schema: Value,
    expected: &[&str],
) -> anyhow::Result<()> {
    let mut manifest = nginx_manifest("web");
    // Each case has its own objects, named after the case, except for the schema's target.
    manifest[1]["metadata"]["name"] = json!(name);
    cluster
        .create_application(
            name,
            json!({"manifest": manifest, "observerSchema": schema}),
        )
        .await?;
    let application = cluster.wait_for_state(name, "Failed").await?;
    let conditions = application.status.unwrap_or_default().conditions;
    let stalled = find_condition(&conditions, types::STALLED).expect("a Stalled condition");
    assert_eq!(stalled.status, "True");
    assert_eq!(stalled.reason, "InvalidObserverSchema");
    for part in expected {
        assert!(
            stalled.message.contains(part),
            "{part:?} not in {:?}",
            stalled.message
        );
    }
    assert!(
        cluster.services().get_opt(name).await?.is_none(),
        "nothing is applied with a broken schema"
    );
    Ok(())
}

#[tokio::test]
async fn each_schema_error_yields_a_stalled_condition_with_path_and_reason() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = cluster.observer(&[]).await?;

    assert_refused(
        &cluster,
        "not-in-manifest",
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "elsewhere"}}]),
        &["resource[0]", "ResourceNotInManifest"],
    )
    .await?;
    assert_refused(
        &cluster,
        "leaf-not-null",
        deployment_schema(json!({"replicas": 1})),
        &["resource[0]", ".spec.replicas", "LeafNotNull"],
    )
    .await?;
    assert_refused(
        &cluster,
        "missing-list-control",
        deployment_schema(json!({"template": {"spec": {"containers": [{"image": null}]}}})),
        &[".spec.template.spec.containers", "MissingListControl"],
    )
    .await?;
    assert_refused(
        &cluster,
        "min-above-max",
        deployment_schema(json!({"template": {"spec": {"containers": [
            {"image": null},
            {"observer_schema_list_min_length": 3, "observer_schema_list_max_length": 1}
        ]}}})),
        &[".spec.template.spec.containers", "MinAboveMax"],
    )
    .await?;
    assert_refused(
        &cluster,
        "negative-length",
        deployment_schema(json!({"template": {"spec": {"containers": [
            {"image": null},
            {"observer_schema_list_min_length": -1, "observer_schema_list_max_length": 1}
        ]}}})),
        &[".spec.template.spec.containers", "NegativeListLength"],
    )
    .await?;

    // Fixing the schema lets the Application through.
    let fixed = deployment_schema(json!({"template": {"spec": {"containers": [
        {"image": null},
        {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 1}
    ]}}}));
    cluster
        .applications()
        .patch(
            "leaf-not-null",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"observerSchema": fixed}})),
        )
        .await?;
    let application = cluster.wait_for_state("leaf-not-null", "Running").await?;
    let conditions = application.status.unwrap_or_default().conditions;
    assert!(find_condition(&conditions, types::STALLED).is_none());
    assert!(cluster.services().get_opt("leaf-not-null").await?.is_some());

    cluster.finish(observer).await
}

#[tokio::test]
async fn manifest_object_in_another_namespace_is_refused_with_its_field() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = cluster.observer(&[]).await?;
    let mut manifest = nginx_manifest("web");
    manifest[1]["metadata"]["namespace"] = json!("kube-system");
    cluster
        .create_application("escape", json!({"manifest": manifest}))
        .await?;
    let application = cluster.wait_for_state("escape", "Failed").await?;
    let conditions = application.status.unwrap_or_default().conditions;
    let stalled = find_condition(&conditions, types::STALLED).expect("a Stalled condition");
    assert_eq!(stalled.reason, "InvalidSpec");
    assert!(
        stalled
            .message
            .contains("spec.manifest[1].metadata.namespace"),
        "{}",
        stalled.message
    );
    assert!(cluster.deployments().get_opt("web").await?.is_none());
    cluster.finish(observer).await
}
