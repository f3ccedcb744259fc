//! Sources shared between gitsync replicas by shard Leases (issue 22, `--shards`): three
//! arbor-gitsync processes with `--shards 6` against arbor-kube-emu and 30 GitTracks.
//!
//! | step | what must hold |
//! |---|---|
//! | all three run | every shard held once, two per replica; every source synced, its status naming its shard and the replica that holds it |
//! | a commit | every source synced exactly once (one write of its ConfigMap), by the replica holding its shard |
//! | SIGKILL one replica, commit | the others take its shards over within the lease duration and sync its sources |
//! | start it again, commit | the shards spread over three again; every source synced exactly once |
//! | the whole run | the emulator's request log shows no write in a source's namespace by a replica that did not hold the source's shard at that moment |
//!
//! The replay of the emulator's request log that ties each write to its shard's holder is
//! [`arbor_e2e::shards`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use arbor_api::GitTrack;
use arbor_e2e::eventually;
use arbor_e2e::shards::{
    GITSYNC_LEASES, LEASE_DURATION, LEASE_NAMESPACE, REPLICAS, Replica, SHARDS, gitsync_flags,
    replica_name, replica_names,
};
use arbor_e2e::system::WAIT;
use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::accounting::RequestRecord;
use arbor_policy::shards::shard_of;
use arbor_testkit::cluster::{apply, ensure_namespace, install_crds};
use arbor_testkit::{GitRepo, Process};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;

const SOURCES: usize = 30;
/// The replicas' names: `gitsync-<i>`.
const REPLICA_PREFIX: &str = "gitsync-";

fn team(source: usize) -> String {
    format!("team-{source:02}")
}

/// Every source's ConfigMap at `revision`.
fn write_revision(repo: &GitRepo, revision: u32) -> String {
    for source in 0..SOURCES {
        let team = team(source);
        let config_map = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {team}\ndata:\n  revision: \"{revision}\"\n"
        );
        repo.write(&format!("{team}/settings.yaml"), &config_map)
            .unwrap();
    }
    repo.commit_all(&format!("revision {revision}")).unwrap()
}

fn gitsync(emu: &KubeEmu, dir: &Path, replica: usize) -> Process {
    let name = replica_name(REPLICA_PREFIX, replica);
    let flags = gitsync_flags(&dir.join(format!("cache-{name}")));
    let replica = Replica {
        binary: "arbor-gitsync",
        name: &name,
        lease_duration: LEASE_DURATION,
    };
    replica.start(emu, dir, &GITSYNC_LEASES, &flags)
}

/// Waits until every source synced `commit`, its ConfigMap says `revision` and its status
/// names the holder of its shard among `holders`; returns each source's `(shard, handledBy)`.
async fn synced(
    client: &kube::Client,
    commit: &str,
    revision: u32,
    holders: &[String],
    within: Duration,
) -> Vec<(u32, String)> {
    eventually(&format!("every source at {commit}"), within, || async {
        // Two lists a look: the replicas, not the test, should keep the server busy.
        let tracks = Api::<GitTrack>::all(client.clone())
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
        let mut handled = BTreeMap::new();
        for track in tracks {
            let namespace = track.metadata.namespace.clone().unwrap_or_default();
            let status = track.status.unwrap_or_default();
            let at_revision = revisions.get(&namespace) == Some(&revision.to_string());
            if status.observed_commit.as_deref() != Some(commit) || !at_revision {
                return Ok(None);
            }
            match (status.shard, status.handled_by) {
                (Some(shard), Some(replica)) if holders.get(shard as usize) == Some(&replica) => {
                    handled.insert(namespace, (shard, replica))
                }
                _ => return Ok(None),
            };
        }
        Ok((handled.len() == SOURCES).then(|| handled.into_values().collect()))
    })
    .await
    .unwrap()
}

/// Source index by namespace, with the shard of its uid.
async fn shards_of_sources(client: &kube::Client) -> BTreeMap<String, u32> {
    let mut shards = BTreeMap::new();
    for source in 0..SOURCES {
        let namespace = team(source);
        let track = Api::<GitTrack>::namespaced(client.clone(), &namespace)
            .get("app")
            .await
            .unwrap();
        let uid = track.metadata.uid.unwrap();
        shards.insert(namespace, shard_of(&uid, SHARDS));
    }
    shards
}

/// Writes of the ConfigMap `settings` per namespace among `records`.
fn config_map_writes(records: &[RequestRecord]) -> BTreeMap<String, usize> {
    let mut writes = BTreeMap::new();
    for record in records {
        if record.is_write() && record.resource == "configmaps" && record.name == "settings" {
            *writes.entry(record.namespace.clone()).or_default() += 1;
        }
    }
    writes
}

/// Asserts that every source was written exactly once in `records`, and that its status names
/// the shard of its uid and the replica holding that shard.
fn exactly_once_by_the_holder(
    records: &[RequestRecord],
    handled: &[(u32, String)],
    shards: &BTreeMap<String, u32>,
    holders: &[String],
) {
    let writes = config_map_writes(records);
    for (source, (shard, replica)) in handled.iter().enumerate() {
        let namespace = team(source);
        assert_eq!(writes.get(&namespace), Some(&1), "{namespace}: {writes:?}");
        assert_eq!(
            Some(shard),
            shards.get(&namespace),
            "{namespace}'s status.shard"
        );
        assert_eq!(
            replica, &holders[*shard as usize],
            "{namespace} is handled by the holder of shard {shard}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_thirty_sources_take_over_a_killed_ones_and_rebalance() {
    let emu = KubeEmu::start().await.unwrap();
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .unwrap();
    install_crds(&client, WAIT).await.unwrap();
    ensure_namespace(&client, LEASE_NAMESPACE).await.unwrap();
    let tempdir = tempfile::tempdir().unwrap();
    let dir = tempdir.path();
    let repo = GitRepo::init(dir.join("repo")).unwrap();
    let first = write_revision(&repo, 1);
    for source in 0..SOURCES {
        let namespace = team(source);
        ensure_namespace(&client, &namespace).await.unwrap();
        let track = json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "GitTrack",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {
                "repository": repo.file_url(),
                "reference": {"branch": "main"},
                "subPath": namespace,
                "layout": "Flat",
                "pollInterval": "1s",
            },
        });
        apply(&client, &track, None).await.unwrap();
    }
    let shards = shards_of_sources(&client).await;

    let mut replicas: Vec<Process> = (0..REPLICAS)
        .map(|replica| gitsync(&emu, dir, replica))
        .collect();
    let holders = GITSYNC_LEASES
        .balanced(&client, &replica_names(REPLICA_PREFIX, &[0, 1, 2]), WAIT)
        .await;
    let handled = synced(&client, &first, 1, &holders, WAIT).await;
    for (source, (shard, replica)) in handled.iter().enumerate() {
        assert_eq!(Some(shard), shards.get(&team(source)));
        assert_eq!(replica, &holders[*shard as usize]);
    }

    // A commit: each source synced once, by its shard's holder.
    let mark = emu.requests().snapshot().len();
    let second = write_revision(&repo, 2);
    let handled = synced(&client, &second, 2, &holders, WAIT).await;
    // Polls that find nothing new write nothing: wait a few, then count.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let records = emu.requests().snapshot();
    exactly_once_by_the_holder(&records[mark..], &handled, &shards, &holders);

    // SIGKILL gitsync-2: its shards go to the others within the lease duration (plus the
    // renew intervals in which the others see its last renewal and write theirs).
    let killed_shards: Vec<u32> = (0..SHARDS)
        .filter(|shard| holders[*shard as usize] == replica_name(REPLICA_PREFIX, 2))
        .collect();
    replicas[2].kill().unwrap();
    let killed = Instant::now();
    let third = write_revision(&repo, 3);
    let holders = GITSYNC_LEASES
        .balanced(&client, &replica_names(REPLICA_PREFIX, &[0, 1]), WAIT)
        .await;
    let taken_over = killed.elapsed();
    let handled = synced(&client, &third, 3, &holders, WAIT).await;
    let all_synced = killed.elapsed();
    println!(
        "gitsync-2 killed: its shards {killed_shards:?} taken over in {taken_over:?}, every \
         source synced at the new commit {all_synced:?} after the kill (lease duration \
         {LEASE_DURATION:?})"
    );
    assert!(
        taken_over < LEASE_DURATION + Duration::from_secs(2),
        "shards taken over after {taken_over:?}"
    );
    for (source, (shard, replica)) in handled.iter().enumerate() {
        assert_ne!(
            replica,
            &replica_name(REPLICA_PREFIX, 2),
            "{} still names gitsync-2",
            team(source)
        );
        assert_eq!(replica, &holders[*shard as usize]);
    }

    // gitsync-2 comes back: the shards spread over three again, and a commit is synced once
    // per source by the new holders.
    replicas[2].restart().unwrap();
    let holders = GITSYNC_LEASES
        .balanced(&client, &replica_names(REPLICA_PREFIX, &[0, 1, 2]), WAIT)
        .await;
    let mark = emu.requests().snapshot().len();
    let fourth = write_revision(&repo, 4);
    let handled = synced(&client, &fourth, 4, &holders, WAIT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let records = emu.requests().snapshot();
    exactly_once_by_the_holder(&records[mark..], &handled, &shards, &holders);

    let checked = GITSYNC_LEASES.no_write_without_the_shard(&records, REPLICA_PREFIX, &shards);
    assert!(checked >= 4 * SOURCES, "only {checked} writes checked");
    println!("{checked} writes in the sources' namespaces, each by its shard's holder");

    for replica in &mut replicas {
        let _ = replica.stop(Duration::from_secs(10));
    }
    emu.shutdown().await;
}
