//! Writes, counted through the emulator's request accounting: two per new object (itself and its
//! tracking object), none for a repository that did not change, one object and its tracking
//! object per changed object, and no read of single objects in any round; drift repaired at the
//! resync period without an observer and at once on `ReportDrift`; and the rest of `SyncService`.

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

/// Requests the emulator answered since its accounting was last reset, counted by
/// `"<verb> <resource>[/<subresource>]"` (the group left out: the kinds here are unambiguous).
fn requests(cluster: &Cluster, verbs: &[&str]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for record in cluster.emu.requests().snapshot() {
        if !verbs.contains(&record.verb.as_str()) {
            continue;
        }
        let resource = if record.subresource.is_empty() {
            record.resource
        } else {
            format!("{}/{}", record.resource, record.subresource)
        };
        // kube-rs's event recorder creates an Event, or patches the series of one it made
        // before: one write either way.
        let verb = if resource == "events" && verbs.contains(&"create") {
            "write"
        } else {
            record.verb.as_str()
        };
        *counts.entry(format!("{verb} {resource}")).or_default() += 1;
    }
    counts
}

const WRITES: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// The writes since the accounting was last reset.
fn writes(cluster: &Cluster) -> BTreeMap<String, u64> {
    requests(cluster, WRITES)
}

/// Reads of single objects (`get`) of the managed and tracking kinds since the last reset: a
/// round reads these by listing each kind once, and the tracking objects' finalizer decides
/// on its watch's copy, so there are none whatever the number of objects.
fn object_reads(cluster: &Cluster) -> BTreeMap<String, u64> {
    requests(cluster, &["get"])
        .into_iter()
        .filter(|(request, _)| {
            request.starts_with("get configmaps") || request.starts_with("get gittrackobjects")
        })
        .collect()
}

fn expected(writes: &[(&str, u64)]) -> BTreeMap<String, u64> {
    writes
        .iter()
        .map(|(request, count)| ((*request).to_owned(), *count))
        .collect()
}

/// `count` ConfigMaps in `foo`, in a repository not yet tracked, and an instance.
async fn configmaps_repo(
    count: usize,
    flags: &[&str],
) -> anyhow::Result<(Cluster, Instance, Repo, String)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for index in 0..count {
        repo.write(
            &format!("cm-{index}.yaml"),
            &configmap(None, &format!("cm-{index}"), "1"),
        )?;
    }
    let commit = repo.commit("declared")?;
    let mut all_flags = vec!["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"];
    all_flags.extend_from_slice(flags);
    let instance = cluster.instance(&all_flags).await?;
    Ok((cluster, instance, repo, commit))
}

/// Ten ConfigMaps in `foo`, synced by a GitTrack.
async fn ten_configmaps(flags: &[&str]) -> anyhow::Result<(Cluster, Instance, Repo, SourceRef)> {
    let (cluster, instance, repo, commit) = configmaps_repo(10, flags).await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    Ok((cluster, instance, repo, source))
}

/// Issue 21 item 1: a new object costs two writes, itself and its tracking object. The tracking
/// object is created whole (owner, finalizer, declaration) and its `ObjectInSync` condition is
/// written only when it says something the tracking object does not (a failure, or a return
/// from one); the source costs its finalizer, one status and one Event for the round.
#[tokio::test]
async fn an_initial_sync_writes_each_object_and_its_tracking_object_once() -> anyhow::Result<()> {
    const OBJECTS: u64 = 10;
    let (cluster, instance, repo, commit) = configmaps_repo(OBJECTS as usize, &[]).await?;
    cluster.emu.requests().reset();
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    // Whatever the round set in motion (watch events of the new tracking objects, the
    // finalizer's look at them) has happened by the end of two more rounds.
    instance.rounds(&source, 2).await;
    assert_eq!(
        writes(&cluster),
        expected(&[
            ("create gittracks", 1), // the test's
            ("patch gittracks", 1),  // gitsync's finalizer on the source
            ("patch gittracks/status", 1),
            ("write events", 1), // "Synced: 10 created"
            ("create gittrackobjects", OBJECTS),
            ("patch configmaps", OBJECTS),
        ])
    );
    assert_eq!(object_reads(&cluster), BTreeMap::new());
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_resync_of_an_unchanged_repository_makes_no_write() -> anyhow::Result<()> {
    let (cluster, instance, _repo, source) = ten_configmaps(&[]).await?;
    // Let the first rounds settle (the status after the first sync, events).
    instance.rounds(&source, 2).await;
    cluster.emu.requests().reset();
    instance.rounds(&source, 3).await;
    assert_eq!(
        writes(&cluster),
        BTreeMap::new(),
        "full rounds on an unchanged repository wrote"
    );
    assert_eq!(object_reads(&cluster), BTreeMap::new());
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

    cluster.emu.requests().reset();
    repo.write("cm-3.yaml", &configmap(None, "cm-3", "2"))?;
    let commit = repo.commit("change one")?;
    cluster.synced(&instance, &source, &commit).await?;
    instance.rounds(&source, 1).await;
    // The object, its tracking object (its new declaration), the source's status (the new
    // commit) and the round's Event.
    assert_eq!(
        writes(&cluster),
        expected(&[
            ("patch gittracks/status", 1),
            ("write events", 1), // "Synced: 1 updated"
            ("patch gittrackobjects", 1),
            ("patch configmaps", 1),
        ])
    );
    assert_eq!(object_reads(&cluster), BTreeMap::new());

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
    // condition says nothing new (a repaired object still matches git), so it costs no status
    // write, and the nine others are not touched at all.
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
                    object: Some(configmap_ref("foo", "cm-2")),
                    kind: proto::DriftKind::Modified.into(),
                    changed_fields: vec!["data.value".into()],
                    reporter: "test".into(),
                    ..Default::default()
                },
                proto::DriftEvent {
                    object: Some(configmap_ref("foo", "not-declared")),
                    kind: proto::DriftKind::Modified.into(),
                    ..Default::default()
                },
            ],
        })
        .await?
        .into_inner();
    assert_eq!(answer.accepted, 1);
    assert_eq!(answer.unknown, vec![configmap_ref("foo", "not-declared")]);
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
            object: Some(configmap_ref("foo", "cm-0")),
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
                object: Some(configmap_ref("foo", "nope"))
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
