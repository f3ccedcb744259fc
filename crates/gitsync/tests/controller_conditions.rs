//! The `ObjectInSync` condition of tracking objects: absent while nothing went wrong, it follows
//! the live object through drift and repair, and names an existing object that lacks the
//! management label.

mod controller_support;

use arbor_api::GitTrackObject;
use arbor_api::condition::{ConditionStatus, find_condition, reasons, types};
use arbor_api::keys::SourceRef;
use arbor_kube_emu::faults::Fault;
use kube::Api;
use serde_json::json;

use controller_support::*;

/// Polls until the `ObjectInSync` condition of the GitTrackObject `name` in `foo` has
/// `status` and `reason`, asking `instance` for a round of `source` between looks; returns
/// the condition's message.
async fn condition_becomes(
    cluster: &Cluster,
    instance: &Instance,
    source: &SourceRef,
    name: &str,
    (status, reason): (ConditionStatus, &str),
) -> anyhow::Result<String> {
    let api: Api<GitTrackObject> = Api::namespaced(cluster.client.clone(), "foo");
    eventually(
        &format!("{name} to be ObjectInSync {status:?} {reason}"),
        || async {
            let conditions = api
                .get_opt(name)
                .await?
                .and_then(|object| object.status)
                .map(|status| status.conditions)
                .unwrap_or_default();
            if let Some(condition) = find_condition(&conditions, types::OBJECT_IN_SYNC)
                && ConditionStatus::parse(&condition.status) == status
                && condition.reason == reason
            {
                return Ok(Some(condition.message.clone()));
            }
            instance.request_round(source);
            instance.rounds(source, 1).await;
            Ok(None)
        },
    )
    .await
}

/// A GitTrack `apps` in `foo` declaring the ConfigMap `name`, synced by a new instance.
async fn synced_configmap(
    cluster: &Cluster,
    name: &str,
    value: &str,
) -> anyhow::Result<(Instance, Repo, SourceRef)> {
    let repo = Repo::new()?;
    repo.write(&format!("{name}.yaml"), &configmap(None, name, value))?;
    let commit = repo.commit("declare it")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    Ok((instance, repo, source))
}

#[tokio::test]
async fn a_drifted_object_is_out_of_sync_until_it_is_repaired() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let (instance, _repo, source) = synced_configmap(&cluster, "settings", "1").await?;
    // A tracking object created for an object applied as declared carries no condition: it
    // reads as in sync, and a new object costs no status write.
    instance.rounds(&source, 1).await;
    let tracking: Api<GitTrackObject> = Api::namespaced(cluster.client.clone(), "foo");
    let stored = tracking.get("configmap.settings").await?.status;
    assert!(
        stored
            .as_ref()
            .and_then(|status| find_condition(&status.conditions, types::OBJECT_IN_SYNC))
            .is_none(),
        "{stored:?}"
    );
    let in_sync = (ConditionStatus::True, reasons::IN_SYNC);

    let configmaps = cluster.configmaps("foo");
    cluster
        .edit(
            &configmaps,
            "settings",
            json!({"data": {"value": "tampered"}}),
        )
        .await?;
    // The repair cannot be written while the fault lasts: the object stays drifted.
    cluster.emu.faults().inject(
        Fault::status(500)
            .verbs(&["patch"])
            .resources(&["configmaps"]),
    );
    let drifted = (ConditionStatus::False, reasons::DRIFTED);
    let message =
        condition_becomes(&cluster, &instance, &source, "configmap.settings", drifted).await?;
    assert!(message.contains("update failed"), "{message}");
    assert_eq!(
        configmaps.get("settings").await?.data["data"]["value"],
        "tampered"
    );

    cluster.emu.faults().clear();
    condition_becomes(&cluster, &instance, &source, "configmap.settings", in_sync).await?;
    assert_eq!(configmaps.get("settings").await?.data["data"]["value"], "1");
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_existing_object_without_the_management_label_is_reported_unmanaged()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let configmaps = cluster.configmaps("foo");
    cluster
        .create(
            &configmaps,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "handmade", "namespace": "foo"},
                "data": {"value": "by hand"},
            }),
        )
        .await?;
    let (instance, _repo, source) = synced_configmap(&cluster, "handmade", "from git").await?;

    let unmanaged = (ConditionStatus::False, reasons::UNMANAGED);
    let message = condition_becomes(
        &cluster,
        &instance,
        &source,
        "configmap.handmade",
        unmanaged,
    )
    .await?;
    assert!(
        message.contains("without the management label"),
        "{message}"
    );
    assert_eq!(
        configmaps.get("handmade").await?.data["data"]["value"],
        "by hand",
        "Arbor never updates an object it does not manage"
    );
    instance.stop().await;
    Ok(())
}
