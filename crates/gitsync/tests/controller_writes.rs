//! Writes: none for a repository that did not change, one per changed object, drift repaired at
//! the resync period without an observer and at once on `ReportDrift`; and the rest of
//! `SyncService`.

mod controller_support;

use std::collections::BTreeMap;

use arbor_api::keys::SourceRef;
use arbor_proto::v1 as proto;
use kube::api::ListParams;
use serde_json::json;

use controller_support::*;

/// The resourceVersion of every object in `api`, by name.
async fn versions(
    api: &kube::Api<kube::api::DynamicObject>,
) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|object| {
            (
                object.metadata.name.unwrap_or_default(),
                object.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect())
}

/// Ten ConfigMaps in `foo`, synced by a GitTrack.
async fn ten_configmaps(flags: &[&str]) -> anyhow::Result<(Cluster, Instance, Repo, SourceRef)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for index in 0..10 {
        repo.write(
            &format!("cm-{index}.yaml"),
            &configmap(None, &format!("cm-{index}"), "1"),
        )?;
    }
    let commit = repo.commit("ten")?;
    let mut all_flags = vec!["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"];
    all_flags.extend_from_slice(flags);
    let instance = cluster.instance(&all_flags).await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    Ok((cluster, instance, repo, source))
}

#[tokio::test]
async fn a_resync_of_an_unchanged_repository_makes_no_write() -> anyhow::Result<()> {
    let (cluster, instance, _repo, source) = ten_configmaps(&[]).await?;
    // Let the first rounds settle (the status after the first sync, events).
    instance.rounds(&source, 2).await;
    let before = cluster.emu.resource_version();
    instance.rounds(&source, 3).await;
    assert_eq!(
        cluster.emu.resource_version(),
        before,
        "full rounds on an unchanged repository wrote"
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn one_changed_object_is_exactly_one_object_write() -> anyhow::Result<()> {
    let (cluster, instance, repo, source) = ten_configmaps(&[]).await?;
    instance.rounds(&source, 2).await;
    let configmaps = cluster.configmaps("foo");
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("foo"),
    );
    let objects_before = versions(&configmaps).await?;
    let tracking_before = versions(&tracking).await?;

    repo.write("cm-3.yaml", &configmap(None, "cm-3", "2"))?;
    let commit = repo.commit("change one")?;
    cluster.synced(&instance, &source, &commit).await?;
    instance.rounds(&source, 1).await;

    let changed =
        |before: &BTreeMap<String, String>, after: &BTreeMap<String, String>| -> Vec<String> {
            after
                .iter()
                .filter(|(name, version)| before.get(*name) != Some(version))
                .map(|(name, _)| name.clone())
                .collect()
        };
    assert_eq!(
        changed(&objects_before, &versions(&configmaps).await?),
        ["cm-3"]
    );
    // The tracking object of cm-3 changes once, for its new declaration; its ObjectInSync
    // condition stays True with the same message (a repaired object still matches git), so
    // it costs no status write, and the nine others are not touched at all.
    assert_eq!(
        changed(&tracking_before, &versions(&tracking).await?),
        ["configmap.cm-3"]
    );
    assert_eq!(configmaps.get("cm-3").await?.data["data"]["value"], "2");
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn drift_is_repaired_at_the_resync_period_without_an_observer() -> anyhow::Result<()> {
    let (cluster, instance, _repo, _source) = ten_configmaps(&["--resync-period=1s"]).await?;
    let configmaps = cluster.configmaps("foo");
    cluster
        .edit(&configmaps, "cm-5", json!({"data": {"value": "tampered"}}))
        .await?;
    // No request: the GitTrack's own requeue at the resync period finds and repairs it.
    eventually("cm-5 to be repaired by the resync", || async {
        Ok((configmaps.get("cm-5").await?.data["data"]["value"] == "1").then_some(()))
    })
    .await?;
    instance.stop().await;
    Ok(())
}

fn object(name: &str) -> proto::ObjectRef {
    proto::ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "foo".into(),
        name: name.into(),
    }
}

#[tokio::test]
async fn report_drift_reapplies_the_object_at_once() -> anyhow::Result<()> {
    let (cluster, instance, _repo, _source) = ten_configmaps(&[]).await?;
    let configmaps = cluster.configmaps("foo");
    cluster
        .edit(&configmaps, "cm-2", json!({"data": {"value": "tampered"}}))
        .await?;
    let mut grpc = instance.grpc().await?;
    let answer = grpc
        .report_drift(proto::ReportDriftRequest {
            events: vec![
                proto::DriftEvent {
                    object: Some(object("cm-2")),
                    kind: proto::DriftKind::Modified.into(),
                    changed_fields: vec!["data.value".into()],
                    reporter: "test".into(),
                    ..Default::default()
                },
                proto::DriftEvent {
                    object: Some(object("not-declared")),
                    kind: proto::DriftKind::Modified.into(),
                    ..Default::default()
                },
            ],
        })
        .await?
        .into_inner();
    assert_eq!(answer.accepted, 1);
    assert_eq!(answer.unknown, vec![object("not-declared")]);
    // Re-applied before the answer: no wait.
    assert_eq!(configmaps.get("cm-2").await?.data["data"]["value"], "1");
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn sync_service_reports_status_managed_objects_declarations_and_triggers_rounds()
-> anyhow::Result<()> {
    let (cluster, instance, repo, source) = ten_configmaps(&[]).await?;
    let mut grpc = instance.grpc().await?;
    let source_ref = proto::SourceRef {
        kind: proto::SourceKind::GitTrack.into(),
        namespace: "foo".into(),
        name: "apps".into(),
    };

    let status = grpc
        .get_status(proto::GetStatusRequest {
            source: Some(source_ref.clone()),
        })
        .await?
        .into_inner();
    let counters = status.sources[0].counters.unwrap();
    assert_eq!(
        (counters.discovered, counters.applied, counters.in_sync),
        (10, 10, 10)
    );
    assert_eq!(status.sources[0].reference, "branch:main");

    let managed = grpc
        .list_managed(proto::ListManagedRequest {
            source: Some(source_ref.clone()),
            state: proto::ManagedState::InSync.into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(managed.objects.len(), 10);
    assert!(
        managed
            .objects
            .iter()
            .any(|object| object.file == "cm-0.yaml")
    );

    let declared = grpc
        .get_declared(proto::GetDeclaredRequest {
            object: Some(object("cm-0")),
        })
        .await?
        .into_inner();
    assert!(declared.declared);
    let json: serde_json::Value = serde_json::from_str(&declared.object_json)?;
    assert_eq!(json["metadata"]["labels"][LABEL], "enabled");
    assert_eq!(
        json["metadata"]["annotations"]["arbor.dev/source"],
        "GitTrack/foo/apps"
    );
    assert!(
        !grpc
            .get_declared(proto::GetDeclaredRequest {
                object: Some(object("nope"))
            })
            .await?
            .into_inner()
            .declared
    );

    repo.write("cm-10.yaml", &configmap(None, "cm-10", "1"))?;
    let commit = repo.commit("eleven")?;
    let triggered = eventually("TriggerSync to sync the new commit", || async {
        let mut grpc = instance.grpc().await?;
        let answer = grpc
            .trigger_sync(proto::TriggerSyncRequest {
                source: Some(source_ref.clone()),
                wait: true,
            })
            .await?
            .into_inner();
        let synced = answer.completed
            && answer
                .status
                .as_ref()
                .is_some_and(|status| status.observed_commit == commit);
        Ok(synced.then_some(answer))
    })
    .await?;
    assert_eq!(triggered.status.unwrap().counters.unwrap().discovered, 11);
    assert!(cluster.exists(&cluster.configmaps("foo"), "cm-10").await?);
    let _ = source;
    instance.stop().await;
    Ok(())
}
