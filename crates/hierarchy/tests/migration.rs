//! Migration in place (#17.3): a cluster that Accurate (or Innu, Accurate under its own
//! domain) managed, built by hand as Accurate leaves it, is taken over by arbor-hierarchy with
//! zero writes where nothing differs, and the SubNamespaces Accurate was deleting are finished
//! (Accurate's finalizer removed after the same clean-up rule).

mod common;

use anyhow::{Result, ensure};
use common::{Cluster, wait_for};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// The field manager Accurate writes with.
const ACCURATE_MANAGER: &str = "accurate-controller";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accurate_cluster_is_taken_over_with_zero_writes_and_deletions_are_finished() -> Result<()>
{
    takeover(common::ACCURATE).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn innu_cluster_is_taken_over_with_zero_writes_and_deletions_are_finished() -> Result<()> {
    takeover(common::INNU).await
}

async fn takeover(domain: &str) -> Result<()> {
    let mut cluster = Cluster::without_controller(domain).await?;
    let finalizer = format!("{domain}/finalizer");
    let as_accurate = PatchParams::apply(ACCURATE_MANAGER).force();

    // The root, labelled by its owner.
    cluster
        .create_namespace("root", &[("type", "root"), ("team", "blue")])
        .await?;
    // Sub-namespaces as Accurate makes them: created with parent and created-by, then the
    // propagated labels applied by accurate-controller.
    for name in ["team-a", "old"] {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name, "labels": {cluster.key("parent"): "root",
                                     "app.kubernetes.io/created-by": "accurate", "team": "blue"}}});
        cluster
            .namespaces()
            .patch(name, &as_accurate, &Patch::Apply(&namespace))
            .await?;
        let sub = json!({"apiVersion": cluster.sub_api.api_version(), "kind": "SubNamespace",
            "metadata": {"namespace": "root", "name": name, "finalizers": [finalizer]}});
        cluster
            .sub_namespaces("root")
            .create(&PostParams::default(), &serde_json::from_value(sub)?)
            .await?;
        let status = json!({"apiVersion": cluster.sub_api.api_version(), "kind": "SubNamespace",
            "metadata": {"namespace": "root", "name": name}, "status": {"observedGeneration": 1}});
        cluster
            .sub_namespaces("root")
            .patch_status(name, &as_accurate, &Patch::Apply(&status))
            .await?;
    }
    // A propagated Secret and the copy Accurate made of it.
    cluster
        .create_secret("root", "pull", "token", &[("propagate", "update")])
        .await?;
    let copy = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "pull", "namespace": "team-a",
            "labels": {"app.kubernetes.io/created-by": "accurate"},
            "annotations": {cluster.key("propagate"): "update", cluster.key("from"): "root"}},
        "data": {"value": common::base64("token")}});
    cluster
        .secrets("team-a")
        .patch("pull", &as_accurate, &Patch::Apply(&copy))
        .await?;
    // Accurate was deleting SubNamespace old when it stopped: its finalizer holds it.
    cluster
        .sub_namespaces("root")
        .delete("old", &DeleteParams::default())
        .await?;

    cluster.emu.requests().reset();
    cluster.start_controller().await?;
    wait_for("SubNamespace root/old to be finished", || async {
        Ok(cluster
            .sub_namespaces("root")
            .get_opt("old")
            .await?
            .is_none())
    })
    .await?;
    cluster.wait_namespace_gone("old").await?;
    wait_for("the controller to forget namespace old", || async {
        Ok(!cluster
            .controller()
            .index()
            .namespace_names()
            .contains(&"old".to_owned()))
    })
    .await?;
    cluster.settle().await?;

    let unexpected: Vec<String> = cluster
        .emu
        .requests()
        .report()
        .records
        .iter()
        .filter(|r| r.is_write())
        // Finishing the deletion Accurate left (its finalizer, the namespace) is expected, and
        // so is what happens in that namespace before it goes.
        .filter(|r| r.name != "old" && r.namespace != "old")
        // Events are the controller's own bookkeeping; access reviews write nothing.
        .filter(|r| r.resource != "events" && r.resource != "selfsubjectaccessreviews")
        .map(|r| format!("{} {} {}/{}", r.verb, r.resource, r.namespace, r.name))
        .collect();
    ensure!(
        unexpected.is_empty(),
        "taking over wrote what did not differ: {unexpected:?}"
    );
    // The takeover keeps everything as it was.
    ensure!(cluster.secret_value("team-a", "pull").await?.as_deref() == Some("token"));
    ensure!(cluster.namespace_label("team-a", "team").await?.as_deref() == Some("blue"));
    let sub = cluster.sub_namespaces("root").get("team-a").await?;
    ensure!(
        sub.metadata.finalizers.unwrap_or_default() == [finalizer.clone()],
        "a live SubNamespace keeps Accurate's finalizer, which Arbor honours"
    );

    // What Accurate propagated goes when its source goes, like Arbor's own.
    cluster.label_namespace("root", &[("team", None)]).await?;
    cluster.wait_namespace_label("team-a", "team", None).await?;
    ensure!(
        cluster
            .namespace_label("team-a", "app.kubernetes.io/created-by")
            .await?
            .as_deref()
            == Some("accurate"),
        "the created-by record stays"
    );
    cluster.shutdown().await;
    Ok(())
}
