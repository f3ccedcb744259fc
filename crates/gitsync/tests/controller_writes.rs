//! Writes, counted through the emulator's request accounting: two per new object (itself and its
//! tracking object), none for a repository that did not change, one object and its tracking
//! object per changed object, and no read of single objects in any round; drift repaired at the
//! resync period without an observer and at once on `ReportDrift`; and the rest of `SyncService`.

mod controller_support;
#[path = "support/silent_server.rs"]
#[allow(dead_code)]
mod silent_server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use arbor_api::keys::SourceRef;
use arbor_gitsync::controller::registry::Declared;
use arbor_kube_emu::faults::{Fault, FaultEffect};
use arbor_policy::layout::DeclaredState;
use arbor_policy::object::{GroupKind, ObjectKey};
use arbor_proto::v1 as proto;
use arbor_testkit::client_faults::PanicOnce;
use kube::api::ListParams;
use serde_json::json;

use controller_support::*;
use silent_server::SilentServer;

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
    tamper(&cluster, "cm-2").await?;
    let answer = report(&instance, &["cm-2", "not-declared"]).await?;
    assert_eq!(answer.accepted, 1);
    assert_eq!(answer.unknown, vec![configmap_ref("foo", "not-declared")]);
    // Re-applied before the answer: no wait.
    assert_eq!(configmaps.get("cm-2").await?.data["data"]["value"], "1");
    instance.stop().await;
    Ok(())
}

/// Changes ConfigMap `foo/name` by hand, away from what git declares.
async fn tamper(cluster: &Cluster, name: &str) -> anyhow::Result<()> {
    cluster
        .edit(
            &cluster.configmaps("foo"),
            name,
            json!({"data": {"value": "tampered"}}),
        )
        .await
}

/// Has the API server hold the first `verb` request on ConfigMaps for `delay`.
fn hold_the_next(cluster: &Cluster, verb: &str, delay: Duration) {
    cluster.emu.faults().inject(
        Fault::new(FaultEffect::Stall { delay, times: 1 })
            .verbs(&[verb])
            .resources(&["configmaps"]),
    );
}

/// Reports ConfigMaps `foo/<name>` drifted, as the observer does, and returns the answer.
async fn report(instance: &Instance, names: &[&str]) -> anyhow::Result<proto::ReportDriftResponse> {
    let mut grpc = instance.grpc().await?;
    let events = names.iter().map(|name| drifted(name)).collect();
    Ok(grpc
        .report_drift(proto::ReportDriftRequest { events })
        .await?
        .into_inner())
}

/// The PATCHes of ConfigMap `foo/name` the API server answered since its accounting was last
/// reset, as their indices in its request log.
fn patches_of(cluster: &Cluster, name: &str) -> Vec<usize> {
    cluster
        .emu
        .requests()
        .snapshot()
        .iter()
        .enumerate()
        .filter(|(_, record)| {
            record.verb == "patch" && record.resource == "configmaps" && record.name == name
        })
        .map(|(index, _)| index)
        .collect()
}

/// A drift report of ConfigMap `foo/name`, as the observer sends it.
fn drifted(name: &str) -> proto::DriftEvent {
    proto::DriftEvent {
        object: Some(configmap_ref("foo", name)),
        kind: proto::DriftKind::Modified.into(),
        changed_fields: vec!["data.value".into()],
        reporter: "test".into(),
        ..Default::default()
    }
}

/// Issue 22 (review): a drift re-apply runs under its source's round lock and reads what the
/// source declares only once holding it. Here the re-apply of commit 1's cm-2 is held 3 s by
/// the API server while a round of commit 2, which changes cm-2, is asked for: the round runs
/// after the re-apply, never before it, so cm-2 ends at commit 2's value. Without the lock the
/// round applied "2" first and the held re-apply then put commit 1's "1" back until the next
/// round or drift.
#[tokio::test]
async fn a_drift_reapply_never_lands_after_the_next_commits_round() -> anyhow::Result<()> {
    let (cluster, instance, repo, source) = ten_configmaps(&[]).await?;
    let configmaps = cluster.configmaps("foo");
    tamper(&cluster, "cm-2").await?;
    repo.write("cm-2.yaml", &configmap(None, "cm-2", "2"))?;
    let next = repo.commit("change cm-2")?;
    hold_the_next(&cluster, "patch", Duration::from_secs(3));
    let faults = cluster.emu.faults();
    let mut grpc = instance.grpc().await?;
    let report = tokio::spawn(async move {
        let asked = Instant::now();
        let answer = grpc
            .report_drift(proto::ReportDriftRequest {
                events: vec![drifted("cm-2")],
            })
            .await;
        (answer, asked.elapsed())
    });
    eventually(
        "the drift re-apply to be held by the API server",
        || async { Ok((faults.fired() == vec![1]).then_some(())) },
    )
    .await?;
    cluster.synced(&instance, &source, &next).await?;
    let (answer, took) = report.await?;
    assert_eq!(answer?.into_inner().accepted, 1);
    // The held PATCH was the report's own: a report waits at most 2 s for a round, so only
    // its own held write makes it last the whole stall.
    assert!(
        took >= Duration::from_secs(3),
        "the report took {took:?}: its re-apply was not the held write"
    );
    assert_eq!(configmaps.get("cm-2").await?.data["data"]["value"], "2");
    instance.stop().await;
    Ok(())
}

/// Issue 22 (review): a drift reported while a round of its source is in progress waits for
/// the round, but not for long: after 2 s the report is answered and the correction left to a
/// round after the one in progress. Here the round's list of the ConfigMaps is held 6 s.
#[tokio::test]
async fn a_drift_report_waits_for_a_round_in_progress_a_bounded_time() -> anyhow::Result<()> {
    let (cluster, instance, _repo, source) = ten_configmaps(&[]).await?;
    let configmaps = cluster.configmaps("foo");
    tamper(&cluster, "cm-4").await?;
    hold_the_next(&cluster, "list", Duration::from_secs(6));
    let faults = cluster.emu.faults();
    instance.request_round(&source);
    eventually("the round's list to be held by the API server", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    let mut grpc = instance.grpc().await?;
    let asked = Instant::now();
    let answer = grpc
        .report_drift(proto::ReportDriftRequest {
            events: vec![drifted("cm-4")],
        })
        .await?
        .into_inner();
    let waited = asked.elapsed();
    assert_eq!(answer.accepted, 1);
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(4),
        "the report waited {waited:?} for the round in progress"
    );
    // Not written beside the round: the round (or the one after it) writes it.
    assert_eq!(
        configmaps.get("cm-4").await?.data["data"]["value"],
        "tampered"
    );
    eventually("cm-4 to be corrected by a round", || async {
        Ok((configmaps.get("cm-4").await?.data["data"]["value"] == "1").then_some(()))
    })
    .await?;
    instance.stop().await;
    Ok(())
}

/// Issue 22 (review): a reported object whose record has lost its declaration (a record
/// inconsistent with its own state, which no round makes) is skipped, logged and not counted
/// as accepted, and a full round of its source is asked for, which rebuilds the record and
/// corrects the object; the rest of the batch is still corrected (by the report, or by that
/// round if it took the lock first). It used to fail the whole batch with `Internal`; then it
/// left the object drifted until the resync period.
#[tokio::test]
async fn a_drift_report_skips_an_object_without_its_declaration_and_corrects_the_rest()
-> anyhow::Result<()> {
    let (cluster, instance, _repo, source) = ten_configmaps(&[]).await?;
    let configmaps = cluster.configmaps("foo");
    for name in ["cm-2", "cm-3"] {
        tamper(&cluster, name).await?;
    }
    let broken = ObjectKey {
        group_kind: GroupKind::new("", "ConfigMap"),
        namespace: Some("foo".into()),
        name: "cm-3".into(),
    };
    instance
        .running()
        .context()
        .registry
        .update(&source, |record| {
            let object = record.objects.get_mut(&broken).expect("cm-3 is recorded");
            object.declared = Declared::Applied {
                state: Arc::new(DeclaredState::default()),
                key: broken.clone(),
            };
        });
    let answer = report(&instance, &["cm-3", "cm-2"]).await?;
    assert_eq!(answer.accepted, 1);
    assert!(answer.unknown.is_empty(), "{:?}", answer.unknown);
    for name in ["cm-2", "cm-3"] {
        corrected(&configmaps, name).await?;
    }
    instance.stop().await;
    Ok(())
}

/// Waits until ConfigMap `name` holds git's value again.
async fn corrected(
    configmaps: &kube::Api<kube::api::DynamicObject>,
    name: &str,
) -> anyhow::Result<()> {
    eventually(&format!("{name} to be corrected"), || async {
        Ok((configmaps.get(name).await?.data["data"]["value"] == "1").then_some(()))
    })
    .await
}

/// Issue 22 (review): a drift re-apply whose write fails is counted as accepted and left to a
/// full round of the source, asked for at once: the object is corrected without waiting for
/// the resync period (ten minutes here, the default), as it was left before.
#[tokio::test]
async fn a_failed_drift_reapply_is_left_to_a_round_asked_for_at_once() -> anyhow::Result<()> {
    let (cluster, instance, _repo, _source) = ten_configmaps(&[]).await?;
    tamper(&cluster, "cm-2").await?;
    cluster.emu.faults().inject(
        Fault::new(FaultEffect::Status {
            code: 500,
            rate: 1.0,
            times: Some(1),
        })
        .verbs(&["patch"])
        .resources(&["configmaps"]),
    );
    let answer = report(&instance, &["cm-2"]).await?;
    assert_eq!(answer.accepted, 1);
    assert_eq!(cluster.emu.faults().fired(), [1], "the re-apply failed");
    corrected(&cluster.configmaps("foo"), "cm-2").await?;
    instance.stop().await;
    Ok(())
}

/// Issue 22 (review): a drift re-apply that cannot be made as the source's user (no client for
/// that user; here the recorded user is not a valid header value) is left to a full round of
/// the source, asked for at once, which records the user again from the source's spec.
#[tokio::test]
async fn a_drift_reapply_without_a_client_for_the_sources_user_is_left_to_a_round()
-> anyhow::Result<()> {
    let (cluster, instance, _repo, source) = ten_configmaps(&[]).await?;
    tamper(&cluster, "cm-2").await?;
    instance
        .running()
        .context()
        .registry
        .update(&source, |record| {
            record.apply_as = Some("not\na user".into());
        });
    let answer = report(&instance, &["cm-2"]).await?;
    assert_eq!(answer.accepted, 1);
    corrected(&cluster.configmaps("foo"), "cm-2").await?;
    instance.stop().await;
    Ok(())
}

/// Issue 22 (review): a drift report whose caller gives up (here its deadline of 500 ms ends
/// while the API server holds the re-apply 3 s) does not release its source's round lock with
/// the write in flight: the correction runs to its end, and a round of the next commit, asked
/// for at once, lands after it. Before, the dropped handler released the lock, the round
/// applied "2" and the held re-apply then put "1" back.
#[tokio::test]
async fn a_drift_report_given_up_by_its_caller_still_holds_the_round_lock_until_its_write_is_done()
-> anyhow::Result<()> {
    const HELD: Duration = Duration::from_secs(3);
    let (cluster, instance, repo, source) = ten_configmaps(&[]).await?;
    let configmaps = cluster.configmaps("foo");
    tamper(&cluster, "cm-2").await?;
    repo.write("cm-2.yaml", &configmap(None, "cm-2", "2"))?;
    let next = repo.commit("change cm-2")?;
    cluster.emu.requests().reset();
    hold_the_next(&cluster, "patch", HELD);
    let faults = cluster.emu.faults();
    let mut grpc = instance.grpc().await?;
    let mut request = tonic::Request::new(proto::ReportDriftRequest {
        events: vec![drifted("cm-2")],
    });
    request.set_timeout(Duration::from_millis(500));
    let given_up = grpc.report_drift(request).await;
    assert!(given_up.is_err(), "{given_up:?}");
    eventually("the re-apply to be held by the API server", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    cluster.synced(&instance, &source, &next).await?;
    // Both writes of cm-2 answered, the held re-apply and the round's, in whichever order
    // they landed.
    eventually("the held re-apply and the round to write cm-2", || async {
        Ok((patches_of(&cluster, "cm-2").len() >= 2).then_some(()))
    })
    .await?;
    assert_eq!(configmaps.get("cm-2").await?.data["data"]["value"], "2");
    instance.stop().await;
    Ok(())
}

/// A leader (leader election on, one shard: the chart's default) that synced ConfigMap
/// `foo/cm-2`, which was then tampered with; the API server's request accounting is reset.
async fn leader_with_a_drifted_configmap() -> anyhow::Result<(Cluster, Instance)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("cm-2.yaml", &configmap(None, "cm-2", "1"))?;
    let commit = repo.commit("declared")?;
    let instance = start_instance(
        cluster.config(),
        true,
        &["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"],
    )
    .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    tamper(&cluster, "cm-2").await?;
    cluster.emu.requests().reset();
    Ok((cluster, instance))
}

/// Reports `foo/cm-2` drifted in a task of its own, once the API server holds the next `verb`
/// request on ConfigMaps for `delay`; returns when the report's request is held.
async fn report_held_at(
    cluster: &Cluster,
    instance: &Instance,
    verb: &str,
    delay: Duration,
) -> anyhow::Result<
    tokio::task::JoinHandle<Result<tonic::Response<proto::ReportDriftResponse>, tonic::Status>>,
> {
    hold_the_next(cluster, verb, delay);
    let faults = cluster.emu.faults();
    let mut grpc = instance.grpc().await?;
    let report = tokio::spawn(async move {
        grpc.report_drift(proto::ReportDriftRequest {
            events: vec![drifted("cm-2")],
        })
        .await
    });
    eventually(&format!("the report's {verb} to be held"), || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    Ok(report)
}

/// The holder of gitsync's Lease (`None` once given up), and the index of its last write in
/// the API server's request log.
async fn gitsync_lease(cluster: &Cluster) -> anyhow::Result<(Option<String>, Option<usize>)> {
    let lease = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        cluster.client.clone(),
        "arbor-system",
    )
    .get("arbor-gitsync")
    .await?;
    let holder = lease
        .spec
        .and_then(|spec| spec.holder_identity)
        .filter(|holder| !holder.is_empty());
    let last_write = cluster
        .emu
        .requests()
        .snapshot()
        .iter()
        .rposition(|record| {
            record.resource == "leases" && ["update", "patch"].contains(&record.verb.as_str())
        });
    Ok((holder, last_write))
}

/// Issue 22 (second review): a drift re-apply is work the replica's shutdown waits for. A
/// leader stopped while the API server holds a report's re-apply gives up its Lease only once
/// the re-apply was answered, so the next leader's first round never runs beside it; the
/// report is answered. Before, the re-apply ran in a task shutdown did not know of, and the
/// Lease was released under it.
#[tokio::test]
async fn a_stopping_leader_gives_up_its_lease_only_once_a_drift_reapply_in_flight_was_answered()
-> anyhow::Result<()> {
    let (cluster, instance) = leader_with_a_drifted_configmap().await?;
    let report = report_held_at(&cluster, &instance, "patch", Duration::from_secs(3)).await?;
    instance.stop().await;

    let (holder, released) = gitsync_lease(&cluster).await?;
    assert_eq!(holder, None, "the Lease was given up");
    let released = released.context("no write of the Lease")?;
    // Waited for, so that a Lease given up too early shows as the order below.
    let reapplied = eventually("the held re-apply to be answered", || async {
        Ok(patches_of(&cluster, "cm-2").first().copied())
    })
    .await?;
    assert!(
        reapplied < released,
        "the Lease was given up (request {released}) before the re-apply was answered (request {reapplied})"
    );
    assert_eq!(report.await??.into_inner().accepted, 1);
    Ok(())
}

/// Issue 22 (second review): no re-apply starts once the replica stops. A report whose read of
/// the object the API server holds as the leader stops sends no write: the leader gives up its
/// Lease without waiting for the read. The report is refused with `Unavailable` naming the
/// stop (issue 22 follow-up), so that the observer reports the drift again to the next leader,
/// which corrects it at once; before, it was answered as accepted and the correction waited
/// for the next leader's rounds.
#[tokio::test]
async fn a_drift_reapply_not_yet_sent_when_the_leader_stops_is_never_sent() -> anyhow::Result<()> {
    let (cluster, instance) = leader_with_a_drifted_configmap().await?;
    let report = report_held_at(&cluster, &instance, "get", Duration::from_secs(3)).await?;
    let stopping = Instant::now();
    instance.stop().await;

    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "the stop waited {:?}, for the held read",
        stopping.elapsed()
    );
    assert_eq!(
        gitsync_lease(&cluster).await?.0,
        None,
        "the Lease was given up"
    );
    let refused = report
        .await?
        .expect_err("a report this replica stopped before correcting is refused");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("began to stop"),
        "the refusal names the stop: {}",
        refused.message()
    );
    assert_eq!(patches_of(&cluster, "cm-2"), Vec::<usize>::new());
    Ok(())
}

/// Issue 22 follow-up: one drift re-apply that panics (here the read of cm-3's live object, in
/// the re-apply's task, through arbor-testkit's `PanicOnce`) fails neither the report nor the
/// rest of its batch: the report is answered, cm-2 is corrected, and cm-3 is left to a full
/// round of its source, asked for at once (the resync period is ten minutes), the panic logged
/// and counted. Before, the whole report failed with `Internal`.
#[tokio::test]
async fn a_panicking_drift_reapply_is_left_to_a_round_and_the_rest_of_its_batch_is_corrected()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for name in ["cm-2", "cm-3"] {
        repo.write(&format!("{name}.yaml"), &configmap(None, name, "1"))?;
    }
    let commit = repo.commit("declared")?;
    let fault = PanicOnce::new("GET", "/api/v1/namespaces/foo/configmaps/cm-3");
    let instance = start_instance_around(
        cluster.config(),
        |client| fault.around(client),
        false,
        &["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"],
    )
    .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    for name in ["cm-2", "cm-3"] {
        tamper(&cluster, name).await?;
    }
    let metrics = instance.running().context().metrics.clone();
    let answer = report(&instance, &["cm-3", "cm-2"]).await?;
    assert!(fault.fired(), "the re-apply of cm-3 panicked");
    assert_eq!(answer.accepted, 2);
    assert_eq!(metrics.drift_corrections_panicked.get(), 1);
    let configmaps = cluster.configmaps("foo");
    for name in ["cm-2", "cm-3"] {
        corrected(&configmaps, name).await?;
    }
    instance.stop().await;
    Ok(())
}

/// Issue 22 (second review): stopping is bounded. A re-apply the API server does not answer
/// is waited for 10 s (`CORRECTION_STOP_PATIENCE`) once the leader stops, then given up,
/// logged and counted; since the write may still land, the Lease is not given up under it but
/// left to expire (the process exits).
#[tokio::test]
async fn a_drift_reapply_stuck_as_the_leader_stops_is_given_up_and_leaves_the_lease_to_expire()
-> anyhow::Result<()> {
    let (cluster, instance) = leader_with_a_drifted_configmap().await?;
    let metrics = instance.running().context().metrics.clone();
    let report = report_held_at(&cluster, &instance, "patch", Duration::from_secs(15)).await?;
    let stopping = Instant::now();
    instance.stop().await;

    let stopped = stopping.elapsed();
    assert!(
        stopped >= arbor_gitsync::grpc::CORRECTION_STOP_PATIENCE
            && stopped < arbor_gitsync::grpc::CORRECTION_STOP_PATIENCE + Duration::from_secs(4),
        "stopped after {stopped:?}"
    );
    assert_eq!(metrics.drift_corrections_abandoned.get(), 1);
    assert!(
        gitsync_lease(&cluster).await?.0.is_some(),
        "the Lease was given up while the re-apply may still land"
    );
    assert_eq!(report.await??.into_inner().accepted, 1);
    Ok(())
}

/// A leader (leader election on, one shard: the chart's default) with `flags`, that synced
/// ConfigMaps `foo/cm-0` … `foo/cm-2` one write at a time, then a commit changing all three:
/// returns once the API server holds the first of that round's ConfigMap writes for `delay`,
/// its request accounting reset just before.
async fn leader_with_a_round_write_held(
    flags: &[&str],
    delay: Duration,
) -> anyhow::Result<(Cluster, Instance)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    let names = ["cm-0", "cm-1", "cm-2"];
    for name in names {
        repo.write(&format!("{name}.yaml"), &configmap(None, name, "1"))?;
    }
    let commit = repo.commit("declared")?;
    let mut all_flags = vec![
        "--gittrack-mode=Enabled",
        "--clustergittrack-mode=Disabled",
        "--max-concurrent-writes=1",
    ];
    all_flags.extend_from_slice(flags);
    let instance = start_instance(cluster.config(), true, &all_flags).await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    for name in names {
        repo.write(&format!("{name}.yaml"), &configmap(None, name, "2"))?;
    }
    repo.commit("change every ConfigMap")?;
    cluster.emu.requests().reset();
    hold_the_next(&cluster, "patch", delay);
    let faults = cluster.emu.faults();
    instance.request_round(&source);
    eventually("the round's first ConfigMap write to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    Ok((cluster, instance))
}

/// The PATCHes of ConfigMaps in `foo` the API server answered since its accounting was last
/// reset, as their indices in its request log.
fn configmap_patches(cluster: &Cluster) -> Vec<usize> {
    ["cm-0", "cm-1", "cm-2"]
        .iter()
        .flat_map(|name| patches_of(cluster, name))
        .collect()
}

/// Issue 22 (third review): a round's write is work the replica's shutdown waits for, as long
/// as the grace period (`--shutdown-grace`) allows. A leader stopped while the API server holds
/// a round's write for 14 s gives up its Lease only after that write was answered. Before, the
/// stop waited 10 s for the controllers, then released the Lease under the write.
#[tokio::test]
async fn a_stopping_leader_gives_up_its_lease_only_once_a_rounds_write_in_flight_was_answered()
-> anyhow::Result<()> {
    let (cluster, instance) =
        leader_with_a_round_write_held(&["--shutdown-grace=60s"], Duration::from_secs(14)).await?;
    instance.stop().await;

    let (holder, released) = gitsync_lease(&cluster).await?;
    assert_eq!(holder, None, "the Lease was given up");
    let released = released.context("no write of the Lease")?;
    let written = eventually("the held write to be answered", || async {
        Ok(configmap_patches(&cluster).first().copied())
    })
    .await?;
    assert!(
        written < released,
        "the Lease was given up (request {released}) before the round's write was answered (request {written})"
    );
    Ok(())
}

/// Issue 22 (third review): a round's write still unanswered when the grace period runs out
/// leaves the Lease to expire: it is not given up while the write may still land, and the
/// abandoned work is logged and counted (`arbor_gitsync_shutdown_work_abandoned_total`).
#[tokio::test]
async fn a_rounds_write_stuck_past_the_grace_period_leaves_the_lease_to_expire()
-> anyhow::Result<()> {
    let (cluster, instance) =
        leader_with_a_round_write_held(&["--shutdown-grace=3s"], Duration::from_secs(40)).await?;
    let abandoned = instance.running().shutdown().abandoned_work();
    instance.stop().await;

    assert!(
        gitsync_lease(&cluster).await?.0.is_some(),
        "the Lease was given up while the round's write may still land"
    );
    assert_eq!(abandoned.get(), 1, "the round, abandoned, is counted");
    assert_eq!(configmap_patches(&cluster), Vec::<usize>::new());
    Ok(())
}

/// Issue 22 follow-up: a round's git fetch is raced against the stop. A leader whose round is
/// fetching from a server that takes the connection and never answers (the fetch's own
/// deadline is two minutes) stops at once: the fetch is given up, no work is abandoned and the
/// Lease is handed over, not left to expire. Before, the stop waited the whole grace period
/// (8 s here) for the fetch, then abandoned it and left the Lease to expire.
#[tokio::test]
async fn a_round_fetching_when_the_leader_stops_gives_its_fetch_up_at_once() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let silent = SilentServer::start();
    let instance = start_instance(
        cluster.config(),
        true,
        &[
            "--gittrack-mode=Enabled",
            "--clustergittrack-mode=Disabled",
            "--shutdown-grace=8s",
        ],
    )
    .await?;
    let abandoned = instance.running().shutdown().abandoned_work();
    cluster
        .create_gittrack_of(
            "foo",
            "silent",
            &format!("http://127.0.0.1:{}/apps.git", silent.port()),
        )
        .await?;
    eventually("the round's fetch to reach the git server", || async {
        Ok((silent.accepted() > 0).then_some(()))
    })
    .await?;
    let stopping = Instant::now();
    instance.stop().await;

    let stopped = stopping.elapsed();
    assert!(
        stopped < Duration::from_secs(4),
        "the stop waited {stopped:?} for the fetch"
    );
    assert_eq!(abandoned.get(), 0, "no work was abandoned");
    assert_eq!(
        gitsync_lease(&cluster).await?.0,
        None,
        "the Lease was given up"
    );
    Ok(())
}

/// Issue 22 (third review): a round starts no write once its replica stops. The round is held
/// in its first of three ConfigMap writes (one write at a time) as the leader stops: that write
/// is answered, the other two are never sent, and the Lease is then given up; the next
/// leader's first round applies them. The write is held 8 s so that, even on a loaded machine,
/// the stop begins while it is held.
#[tokio::test]
async fn a_round_between_writes_when_the_leader_stops_sends_no_further_write() -> anyhow::Result<()>
{
    let (cluster, instance) = leader_with_a_round_write_held(&[], Duration::from_secs(8)).await?;
    instance.stop().await;

    assert_eq!(
        gitsync_lease(&cluster).await?.0,
        None,
        "the Lease was given up"
    );
    assert_eq!(
        configmap_patches(&cluster).len(),
        1,
        "only the held write was made: {:?}",
        writes(&cluster)
    );
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

/// Issue 21 item 1: one slow write keeps only its own slot of the write window. Two writes at
/// once; the API server holds the first ConfigMap apply for 20 s. The other nine objects are
/// written while it is held: nine ConfigMaps exist and the held one does not. When the window
/// also counted finished objects waiting to be recorded in the plan's order, the held object
/// kept the window full and no more than two others were written before it.
#[tokio::test]
async fn a_held_write_does_not_hold_back_the_rest_of_the_round() -> anyhow::Result<()> {
    let (cluster, instance, repo, commit) =
        configmaps_repo(10, &["--max-concurrent-writes=2"]).await?;
    hold_the_next(&cluster, "patch", Duration::from_secs(20));
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    let configmaps = cluster.configmaps("foo");
    let written = eventually(
        "nine of the ten ConfigMaps written while one is held",
        || async {
            let written = configmaps.list(&ListParams::default()).await?.items.len();
            Ok((written >= 9).then_some(written))
        },
    )
    .await?;
    assert_eq!(
        written, 9,
        "the held ConfigMap is written after the other nine"
    );
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert_eq!(
        (status.objects_applied, status.objects_in_sync),
        (10, 10),
        "{status:?}"
    );
    assert_eq!(
        configmaps.list(&ListParams::default()).await?.items.len(),
        10
    );
    instance.stop().await;
    Ok(())
}
