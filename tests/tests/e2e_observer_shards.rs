//! Applications shared between observer replicas by shard Leases (issue 22, `--shards`): three
//! arbor-observer processes with `--shards 6` against arbor-kube-emu and 300 Applications, each
//! in its own namespace.
//!
//! | step | what must hold |
//! |---|---|
//! | all three run | every shard held once, two per replica; every Application applied |
//! | a change of every Application | each applied at the new revision, once, by its shard's holder |
//! | SIGKILL one replica, change | the others take its shards over within the lease duration and apply its Applications |
//! | start it again, change | the shards spread over three again; each Application applied once |
//! | the whole run | the emulator's request log shows no write in an Application's namespace by a replica that did not hold its shard at that moment ([`arbor_e2e::shards`]) |

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use arbor_api::{Application, ApplicationState};
use arbor_e2e::eventually;
use arbor_e2e::shards::{
    LEASE_DURATION, LEASE_NAMESPACE, OBSERVER_LEASES, REPLICAS, Replica, SHARDS, replica_name,
    replica_names,
};
use arbor_e2e::system::WAIT;
use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::accounting::RequestRecord;
use arbor_policy::shards::shard_of;
use arbor_testkit::Process;
use arbor_testkit::cluster::{apply, ensure_namespace, install_crds};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const APPLICATIONS: usize = 300;
/// The replicas' names: `observer-<i>`.
const REPLICA_PREFIX: &str = "observer-";

fn namespace_of(application: usize) -> String {
    format!("app-{application:03}")
}

fn manifest(revision: u32) -> serde_json::Value {
    json!([{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings"},
        "data": {"revision": revision.to_string()},
    }])
}

fn observer(emu: &KubeEmu, dir: &Path, replica: usize) -> Process {
    let name = replica_name(REPLICA_PREFIX, replica);
    let replica = Replica {
        binary: "arbor-observer",
        name: &name,
        lease_duration: LEASE_DURATION,
    };
    replica.start(emu, dir, &OBSERVER_LEASES, &[])
}

/// Changes every Application to `revision`.
async fn change_all(client: &kube::Client, revision: u32) {
    for application in 0..APPLICATIONS {
        let api = Api::<Application>::namespaced(client.clone(), &namespace_of(application));
        let patch = json!({"spec": {"manifest": manifest(revision)}});
        api.patch("app", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
}

/// Waits until every Application is Running at its generation and its ConfigMap says
/// `revision`.
async fn applied(client: &kube::Client, revision: u32, within: Duration) {
    eventually(
        &format!("every Application at revision {revision}"),
        within,
        || async {
            let applications = Api::<Application>::all(client.clone())
                .list(&Default::default())
                .await
                .unwrap();
            let revisions: BTreeMap<String, String> = Api::<ConfigMap>::all(client.clone())
                .list(&Default::default())
                .await
                .unwrap()
                .into_iter()
                .filter(|config_map| config_map.metadata.name.as_deref() == Some("settings"))
                .filter_map(|config_map| {
                    let revision = config_map.data?.get("revision")?.clone();
                    Some((config_map.metadata.namespace?, revision))
                })
                .collect();
            let done = applications
                .iter()
                .filter(|application| {
                    let namespace = application.metadata.namespace.clone().unwrap_or_default();
                    let status = application.status.clone().unwrap_or_default();
                    status.state == ApplicationState::Running
                        && status.observed_generation == application.metadata.generation
                        && revisions.get(&namespace) == Some(&revision.to_string())
                })
                .count();
            Ok((done == APPLICATIONS).then_some(()))
        },
    )
    .await
    .unwrap();
}

/// Each Application's namespace with the shard of its uid.
async fn shards_of_applications(client: &kube::Client) -> BTreeMap<String, u32> {
    let mut shards = BTreeMap::new();
    for application in 0..APPLICATIONS {
        let namespace = namespace_of(application);
        let found = Api::<Application>::namespaced(client.clone(), &namespace)
            .get("app")
            .await
            .unwrap();
        shards.insert(namespace, shard_of(&found.metadata.uid.unwrap(), SHARDS));
    }
    shards
}

/// Asserts that every Application's ConfigMap was written exactly once in `records`, by the
/// holder of its shard.
fn once_by_the_holder(
    records: &[RequestRecord],
    shards: &BTreeMap<String, u32>,
    holders: &[String],
) {
    let mut writes: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for record in records {
        if record.is_write() && record.resource == "configmaps" && record.name == "settings" {
            writes
                .entry(record.namespace.clone())
                .or_default()
                .push(&record.identity);
        }
    }
    for (namespace, shard) in shards {
        let holder = holders[*shard as usize].as_str();
        assert_eq!(
            writes.get(namespace).map(Vec::as_slice),
            Some(&[holder][..]),
            "{namespace} (shard {shard}) written once by {holder}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_three_hundred_applications_take_over_a_killed_ones_and_rebalance() {
    let emu = KubeEmu::start().await.unwrap();
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .unwrap();
    install_crds(&client, WAIT).await.unwrap();
    ensure_namespace(&client, LEASE_NAMESPACE).await.unwrap();
    let tempdir = tempfile::tempdir().unwrap();
    let dir = tempdir.path();
    for application in 0..APPLICATIONS {
        let namespace = namespace_of(application);
        ensure_namespace(&client, &namespace).await.unwrap();
        let object = json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {"manifest": manifest(1)},
        });
        apply(&client, &object, None).await.unwrap();
    }
    let shards = shards_of_applications(&client).await;

    let mut replicas: Vec<Process> = (0..REPLICAS)
        .map(|replica| observer(&emu, dir, replica))
        .collect();
    let holders = OBSERVER_LEASES
        .balanced(&client, &replica_names(REPLICA_PREFIX, &[0, 1, 2]), WAIT)
        .await;
    applied(&client, 1, WAIT).await;

    // A change of every Application: each applied once, by its shard's holder.
    let mark = emu.requests().snapshot().len();
    change_all(&client, 2).await;
    applied(&client, 2, WAIT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    once_by_the_holder(&emu.requests().snapshot()[mark..], &shards, &holders);

    // SIGKILL observer-2: the others take its shards over within about a lease duration.
    replicas[2].kill().unwrap();
    let killed = Instant::now();
    OBSERVER_LEASES
        .balanced(&client, &replica_names(REPLICA_PREFIX, &[0, 1]), WAIT)
        .await;
    let taken_over = killed.elapsed();
    change_all(&client, 3).await;
    applied(&client, 3, WAIT).await;
    let all_applied = killed.elapsed();
    println!(
        "observer-2 killed: its shards taken over in {taken_over:?}, every Application applied \
         at the new revision {all_applied:?} after the kill (lease duration {LEASE_DURATION:?})"
    );
    assert!(
        taken_over < LEASE_DURATION + Duration::from_secs(2),
        "shards taken over after {taken_over:?}"
    );

    // observer-2 comes back: three share the shards again; a change is applied once each.
    replicas[2].restart().unwrap();
    let holders = OBSERVER_LEASES
        .balanced(&client, &replica_names(REPLICA_PREFIX, &[0, 1, 2]), WAIT)
        .await;
    let mark = emu.requests().snapshot().len();
    change_all(&client, 4).await;
    applied(&client, 4, WAIT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let records = emu.requests().snapshot();
    once_by_the_holder(&records[mark..], &shards, &holders);

    let checked = OBSERVER_LEASES.no_write_without_the_shard(&records, REPLICA_PREFIX, &shards);
    assert!(checked >= 4 * APPLICATIONS, "only {checked} writes checked");
    println!("{checked} writes in the Applications' namespaces, each by its shard's holder");

    for replica in &mut replicas {
        let _ = replica.stop(Duration::from_secs(10));
    }
    emu.shutdown().await;
}
