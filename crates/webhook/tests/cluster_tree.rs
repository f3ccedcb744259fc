//! The reflector-backed namespace tree against arbor-kube-emu: it syncs, it includes pending
//! SubNamespaces, and it follows changes.

use std::time::Duration;

use anyhow::{Context as _, Result};
use arbor_api::SubNamespace;
use arbor_kube_emu::KubeEmu;
use arbor_policy::keys::Keys;
use arbor_testkit::{Cluster, Patience, eventually};
use arbor_webhook::tree::{ClusterTree, TreeSource};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, CustomResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
/// Retries of a create wait for the CRD to be served; the tree is polled more often.
const CREATE_PATIENCE: Patience = Patience::new(WAIT, Duration::from_millis(50));
const TREE_PATIENCE: Patience = Patience::new(WAIT, Duration::from_millis(20));

async fn create_namespace(
    client: &kube::Client,
    name: &str,
    labels: serde_json::Value,
) -> Result<()> {
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("create namespace {name}"))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_syncs_includes_pending_sub_namespaces_and_follows_changes() -> Result<()> {
    let cluster = Cluster::on(KubeEmu::start().await?).await?;
    let client = cluster.client.clone();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &SubNamespace::crd())
        .await?;
    create_namespace(&client, "team", json!({"arbor.dev/type": "root"})).await?;
    create_namespace(&client, "team-dev", json!({"arbor.dev/parent": "team"})).await?;
    let sub: SubNamespace = serde_json::from_value(json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": "SubNamespace",
        "metadata": {"name": "team-qa", "namespace": "team"}, "spec": {},
    }))?;
    let subs: Api<SubNamespace> = Api::namespaced(client.clone(), "team");
    // The CRD is served shortly after it is created.
    eventually(
        "SubNamespace team-qa to be accepted",
        CREATE_PATIENCE,
        || async { anyhow::Ok(subs.create(&PostParams::default(), &sub).await.ok()) },
    )
    .await?;

    let stop = CancellationToken::new();
    let (tree, synced) = ClusterTree::start(client.clone(), Keys::default(), stop.clone());
    tokio::time::timeout(WAIT, synced).await.context("sync")??;
    let mut sub_namespaces = tree
        .tree()
        .sub_namespaces("team")
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    sub_namespaces.sort();
    assert_eq!(sub_namespaces, ["team-dev", "team-qa"]);

    create_namespace(&client, "late", json!({})).await?;
    eventually("the tree to see namespace late", TREE_PATIENCE, || async {
        anyhow::Ok(tree.tree().contains("late").then_some(()))
    })
    .await?;
    stop.cancel();
    cluster.shutdown().await;
    Ok(())
}

/// seeds/001 under "one bad object never stops a kind": a SubNamespace whose spec the Rust type
/// cannot read (stored because the CRD's schema allows it, as an older or hand-edited CRD does)
/// does not stop the webhook's SubNamespace watch; the tree still syncs and follows the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_namespace_that_does_not_decode_never_stops_the_tree() -> Result<()> {
    let cluster = Cluster::on(KubeEmu::start().await?).await?;
    let client = cluster.client.clone();
    let crd = SubNamespace::crd();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    arbor_testkit::crds::loosen_crd_schema(&client, crd.metadata.name.as_deref().unwrap_or(""))
        .await?;
    create_namespace(&client, "team", json!({"arbor.dev/type": "root"})).await?;
    for (name, spec) in [
        ("team-bad", json!({"labels": "not a map"})),
        ("team-qa", json!({})),
    ] {
        let object = json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "SubNamespace",
            "metadata": {"name": name, "namespace": "team"}, "spec": spec,
        });
        // The CRD is served shortly after it is created.
        let what = format!("SubNamespace {name} to be accepted");
        eventually(&what, CREATE_PATIENCE, || async {
            anyhow::Ok(
                arbor_testkit::cluster::apply(&client, &object, None)
                    .await
                    .ok(),
            )
        })
        .await?;
    }
    let typed: Api<SubNamespace> = Api::namespaced(client.clone(), "team");
    assert!(
        typed.list(&Default::default()).await.is_err(),
        "the bad SubNamespace must not decode as the Rust type, or this test shows nothing"
    );

    let stop = CancellationToken::new();
    let (tree, synced) = ClusterTree::start(client.clone(), Keys::default(), stop.clone());
    tokio::time::timeout(WAIT, synced).await.context("sync")??;
    assert!(
        tree.tree().sub_namespaces("team").contains(&"team-qa"),
        "the good SubNamespace is pending in the tree"
    );
    create_namespace(&client, "late", json!({})).await?;
    eventually(
        "the tree to keep following changes",
        TREE_PATIENCE,
        || async { anyhow::Ok(tree.tree().contains("late").then_some(())) },
    )
    .await?;
    stop.cancel();
    cluster.shutdown().await;
    Ok(())
}
