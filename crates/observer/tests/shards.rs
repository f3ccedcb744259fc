//! Applications shared between observer replicas by shard Leases (issue 22, `--shards 2`),
//! through the running controller on arbor-kube-emu. Each replica runs with a client of its own
//! username, so the emulator's request log tells whose write each one is.
//!
//! | situation | what must hold |
//! |---|---|
//! | another replica takes an Application's shard while this one keeps running, its controller busy with another Application | no write for the Application from the moment this replica saw the shard taken; its observer stopped |
//! | a shard handed over to a new replica while a reconcile of it is between two writes | the reconcile ends without its next write, and that is no reconcile error |

mod support;

use std::time::Duration;

use anyhow::{Context as _, bail};
use arbor_api::Application;
use arbor_kube_emu::accounting::RequestRecord;
use arbor_kube_emu::faults::{Fault, FaultEffect};
use arbor_observer::AppKey;
use arbor_policy::shards::shard_of;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually};

/// Two shards between replicas; a short lease, so a hand-over takes seconds.
const SHARDED: [&str; 4] = [
    "--leader-election=true",
    "--shards=2",
    "--lease-duration=3s",
    "--lease-renew-interval=1s",
];
const LEASE_NAMESPACE: &str = "arbor-system";
/// Every Application here is `app`, each in a namespace of its own.
const APP: &str = "app";

/// Application `app`'s manifest: one ConfigMap `settings` saying `revision`.
fn manifest(revision: u32) -> serde_json::Value {
    json!([{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"},
        "data": {"revision": revision.to_string()},
    }])
}

/// Creates Applications, each in a namespace of its own, until one is in each of the two
/// shards; returns their namespaces, the one of shard 0 first.
async fn one_application_per_shard(cluster: &Cluster) -> anyhow::Result<[String; 2]> {
    let mut found: [Option<String>; 2] = [None, None];
    for index in 0..32 {
        let namespace = format!("app-{index}");
        cluster.namespace(&namespace).await?;
        let application: Application = serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": APP, "namespace": namespace},
            "spec": {"manifest": manifest(1)},
        }))?;
        let created = Api::<Application>::namespaced(cluster.client.clone(), &namespace)
            .create(&PostParams::default(), &application)
            .await?;
        let uid = created
            .metadata
            .uid
            .context("a created Application has a uid")?;
        cluster
            .wait_for_state_in(&namespace, APP, "Running")
            .await?;
        found[shard_of(&uid, 2) as usize].get_or_insert(namespace);
        if let [Some(first), Some(second)] = &found {
            return Ok([first.clone(), second.clone()]);
        }
    }
    bail!("32 Applications, all in one shard")
}

/// Changes Application `app` of `namespace` to `revision`.
async fn change(cluster: &Cluster, namespace: &str, revision: u32) -> anyhow::Result<()> {
    let patch = json!({"spec": {"manifest": manifest(revision)}});
    Api::<Application>::namespaced(cluster.client.clone(), namespace)
        .patch(APP, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Who holds each shard's Lease now (`None`: no Lease yet, or nobody).
async fn shard_holders(cluster: &Cluster) -> anyhow::Result<Vec<Option<String>>> {
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let mut holders = Vec::new();
    for shard in 0..2 {
        holders.push(
            leases
                .get_opt(&format!("arbor-observer-shard-{shard}"))
                .await?
                .and_then(|lease| lease.spec?.holder_identity)
                .filter(|holder| !holder.is_empty()),
        );
    }
    Ok(holders)
}

/// Waits until the two shard Leases are held by `holders`, in either order.
async fn shards_held_by(cluster: &Cluster, holders: [&str; 2]) -> anyhow::Result<()> {
    let mut expected = holders.map(|holder| Some(holder.to_owned())).to_vec();
    expected.sort();
    eventually(&format!("the shard Leases held by {holders:?}"), || async {
        let mut held = shard_holders(cluster).await?;
        held.sort();
        Ok((held == expected).then_some(()))
    })
    .await
}

/// Waits until `replica` has listed the Leases three times after request `since` of the
/// emulator's log, and returns the place of the third list in the log. Its shard Lease manager
/// lists them once a step, one step after the other: the second list started after the first
/// was answered, so after whatever the log holds before `since`; the third started once the
/// step that read the second was done.
async fn acted_on_leases_by(
    cluster: &Cluster,
    replica: &str,
    since: usize,
) -> anyhow::Result<usize> {
    eventually(
        &format!("{replica} to list the Leases three times"),
        || async {
            let records = cluster.emu.requests().snapshot();
            let third = records
                .iter()
                .enumerate()
                .skip(since)
                .filter(|(_, record)| {
                    record.identity == replica
                        && record.verb == "list"
                        && record.resource == "leases"
                        && record.namespace == LEASE_NAMESPACE
                })
                .nth(2)
                .map(|(at, _)| at);
            Ok(third)
        },
    )
    .await
}

/// Has `holder` take shard `shard`'s Lease, as a replica does once the Lease went unrenewed
/// for a lease duration; it keeps it for an hour.
async fn take_over(cluster: &Cluster, shard: u32, holder: &str) -> anyhow::Result<()> {
    let taken = json!({"spec": {
        "holderIdentity": holder,
        "leaseDurationSeconds": 3600,
        "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now()
        ),
    }});
    Api::<Lease>::namespaced(cluster.client.clone(), LEASE_NAMESPACE)
        .patch(
            &format!("arbor-observer-shard-{shard}"),
            &PatchParams::default(),
            &Patch::Merge(&taken),
        )
        .await?;
    Ok(())
}

/// Issue 22: a write made for a shard the replica no longer holds is not made. `observer-a`
/// holds both shards and reconciles one Application at a time; the apply of Application
/// `busy` (shard 1) is held 15 s, so the controller reaches no other Application meanwhile.
/// Another replica takes shard 0, that of Application `watched`, and `observer-a` sees it
/// taken; then `watched`'s ConfigMap is changed by hand, three times. From the emulator's
/// request log, `observer-a` makes no write in `watched`'s namespace after it saw the shard
/// taken, and `watched`'s observer no longer runs. Before, the observer was stopped only by
/// the controller's reconcile of `watched` (queued behind `busy`'s), and meanwhile wrote each
/// change to `status.lastObservedManifest`.
#[tokio::test]
async fn an_observer_writes_nothing_once_its_replica_sees_the_shard_taken() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace(LEASE_NAMESPACE).await?;
    let mut flags = SHARDED.to_vec();
    flags.push("--max-concurrent-reconciles=1");
    let observer = cluster.observer_as("observer-a", &flags).await?;
    shards_held_by(&cluster, ["observer-a"; 2]).await?;
    let [watched, busy] = one_application_per_shard(&cluster).await?;
    let key = AppKey::new(&watched, APP);
    eventually("watched's observer to run", || async {
        Ok(observer.registry.is_running(&key).then_some(()))
    })
    .await?;

    let faults = cluster.emu.faults();
    faults.inject(
        Fault::held_once(Duration::from_secs(15))
            .verbs(&["patch"])
            .resources(&["configmaps"])
            .namespaces(&[busy.as_str()]),
    );
    change(&cluster, &busy, 2).await?;
    eventually("busy's apply to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;

    take_over(&cluster, 0, "observer-b").await?;
    let taken = cluster.emu.requests().snapshot().len();
    let seen_taken = acted_on_leases_by(&cluster, "observer-a", taken).await?;
    let checks = observer.registry.stats(&key).checks;
    let config_maps = cluster.api("v1", "ConfigMap", "configmaps", Some(watched.as_str()));
    for edit in 0..3 {
        cluster
            .edit(
                &config_maps,
                "settings",
                json!({"data": {"revision": format!("edited-{edit}")}}),
            )
            .await?;
        // Long enough for a running observer to see the change and write (milliseconds).
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let seen_by_the_observer = observer.registry.stats(&key).checks > checks;

    let writes: Vec<RequestRecord> = cluster.emu.requests().snapshot()[seen_taken..]
        .iter()
        .filter(|record| {
            record.identity == "observer-a" && record.is_write() && record.namespace == watched
        })
        .cloned()
        .collect();
    assert!(
        writes.is_empty(),
        "observer-a wrote for {watched} after it saw its shard taken (its observer saw the \
         edits: {seen_by_the_observer}): {writes:#?}"
    );
    assert!(
        !observer.registry.is_running(&key),
        "the observer of an Application of a shard left still runs"
    );
    faults.clear();
    cluster.finish(observer).await
}

/// Issue 22: a shard handed over is a normal end of the reconcile in flight on it, not a
/// failure. `observer-a` holds both shards; the next apply of an Application of each is held
/// 8 s; `observer-b` starts, and `observer-a` gives one shard up while that shard's reconcile
/// is between its apply and its status write. That reconcile sends no further write, ends
/// without counting in `arbor_observer_reconcile_errors` on either replica, and `observer-b`
/// finishes the Application's change. Before, the end was a `ShardLeft` error, counted, logged
/// as a warning and retried.
#[tokio::test]
async fn a_shard_handed_over_mid_reconcile_is_no_reconcile_error() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace(LEASE_NAMESPACE).await?;
    let first = cluster.observer_as("observer-a", &SHARDED).await?;
    shards_held_by(&cluster, ["observer-a"; 2]).await?;
    let applications = one_application_per_shard(&cluster).await?;

    let faults = cluster.emu.faults();
    faults.inject(
        Fault::new(FaultEffect::Stall {
            delay: Duration::from_secs(8),
            times: 2,
        })
        .verbs(&["patch"])
        .resources(&["configmaps"])
        .namespaces(&[applications[0].as_str(), applications[1].as_str()]),
    );
    for namespace in &applications {
        change(&cluster, namespace, 2).await?;
    }
    eventually("both applies to be held", || async {
        Ok((faults.fired() == vec![2]).then_some(()))
    })
    .await?;
    let errors = first.registry.metrics().reconcile_errors.get();

    let second = cluster.observer_as("observer-b", &SHARDED).await?;
    shards_held_by(&cluster, ["observer-a", "observer-b"]).await?;
    for namespace in &applications {
        // Running at its current generation: the change was applied, by one replica or the other.
        cluster.wait_for_state_in(namespace, APP, "Running").await?;
        let config_maps = cluster.api("v1", "ConfigMap", "configmaps", Some(namespace.as_str()));
        let applied = support::at(&config_maps.get("settings").await?, "/data/revision");
        assert_eq!(applied, "2", "{namespace}'s ConfigMap at the new revision");
    }
    assert_eq!(
        (
            first.registry.metrics().reconcile_errors.get() - errors,
            second.registry.metrics().reconcile_errors.get()
        ),
        (0, 0),
        "the hand-over was counted as a reconcile error"
    );

    faults.clear();
    second.stop().await?;
    cluster.finish(first).await
}
