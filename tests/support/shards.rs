//! What the sharding end-to-end tests (`e2e_shards`, `e2e_observer_shards`) look at: who holds
//! each shard Lease, when the replicas share them evenly, and a replay of the emulator's
//! request log that ties every write to the holder of its shard at that moment.
//!
//! Each replica talks to the emulator with its own token, so the request log names the replica
//! of every request, and its Lease identity is the same name. The log is in the order the
//! server answered: a write to a shard's Lease (create, update) by a replica means it holds the
//! shard from then on, a delete that it gave the shard up. A create is recorded with the name
//! of the object it made, as kube-apiserver's audit log records it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::accounting::RequestRecord;
use arbor_testkit::ports::free_addr;
use arbor_testkit::{Process, ProcessSpec};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::eventually;

/// Replicas each sharding test runs.
pub const REPLICAS: usize = 3;
/// Shards they share: two each while all three run, three each with one killed.
pub const SHARDS: u32 = 6;
/// The replicas' lease duration: short, so a killed replica's shards move within seconds.
pub const LEASE_DURATION: Duration = Duration::from_secs(5);
/// Where the shard Leases live.
pub const LEASE_NAMESPACE: &str = "arbor-system";
/// gitsync's shard Leases as the sharding tests and the scale-out bench run them.
pub const GITSYNC_LEASES: ShardLeases<'static> = ShardLeases {
    namespace: LEASE_NAMESPACE,
    prefix: "arbor-gitsync-shard-",
    count: SHARDS,
};
/// The observer's shard Leases, the same way.
pub const OBSERVER_LEASES: ShardLeases<'static> = ShardLeases {
    namespace: LEASE_NAMESPACE,
    prefix: "arbor-observer-shard-",
    count: SHARDS,
};

/// The name of replica `replica` of a component whose replicas are `<prefix><i>` (`gitsync-`,
/// `observer-`): its Lease identity and the username of its token.
pub fn replica_name(prefix: &str, replica: usize) -> String {
    format!("{prefix}{replica}")
}

/// [`replica_name`] of each of `replicas`.
pub fn replica_names(prefix: &str, replicas: &[usize]) -> Vec<String> {
    replicas
        .iter()
        .map(|replica| replica_name(prefix, *replica))
        .collect()
}

/// One component's shard Leases: `<prefix><i>` in `namespace`, `count` of them.
#[derive(Debug, Clone, Copy)]
pub struct ShardLeases<'a> {
    pub namespace: &'a str,
    /// `arbor-gitsync-shard-`, `arbor-observer-shard-`.
    pub prefix: &'a str,
    pub count: u32,
}

/// One replica of a sharded component, as a process.
#[derive(Debug, Clone, Copy)]
pub struct Replica<'a> {
    /// The binary: `arbor-gitsync`, `arbor-observer`.
    pub binary: &'a str,
    /// Its Lease identity, and the username of its own token.
    pub name: &'a str,
    pub lease_duration: Duration,
}

impl Replica<'_> {
    /// Starts it against `emu` with `flags` beside the sharding ones; its kubeconfig, cache and
    /// log go to `dir`.
    pub fn start(
        &self,
        emu: &KubeEmu,
        dir: &Path,
        leases: &ShardLeases<'_>,
        flags: &[String],
    ) -> Process {
        let name = self.name;
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        let token = emu.token_for(name, &["system:masters"]);
        std::fs::write(&kubeconfig, emu.kubeconfig_yaml_for(&token)).unwrap();
        let binary = crate::binary(self.binary, self.binary).unwrap();
        let mut args: Vec<String> = vec![
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--admin-addr".into(),
            free_addr().unwrap().to_string(),
            "--grpc-addr".into(),
            free_addr().unwrap().to_string(),
            "--shards".into(),
            leases.count.to_string(),
            "--leader-election".into(),
            "true".into(),
            "--lease-namespace".into(),
            leases.namespace.into(),
            "--lease-identity".into(),
            name.into(),
            "--lease-duration".into(),
            format!("{}s", self.lease_duration.as_secs()),
            "--lease-renew-interval".into(),
            "300ms".into(),
        ];
        args.extend_from_slice(flags);
        ProcessSpec::new(name, binary, dir.join(format!("{name}.log")))
            .args(args)
            .env("POD_NAME", "")
            .start()
            .unwrap()
    }
}

/// The flags of a gitsync replica beside the sharding ones: GitTracks only, repositories on
/// the local file system, its own cache directory `cache`.
pub fn gitsync_flags(cache: &Path) -> Vec<String> {
    vec![
        "--gittrack-mode".into(),
        "Enabled".into(),
        "--clustergittrack-mode".into(),
        "Disabled".into(),
        "--allow-file-repositories".into(),
        "--cache-dir".into(),
        cache.display().to_string(),
    ]
}

impl ShardLeases<'_> {
    fn shard_of_lease(&self, name: &str) -> Option<u32> {
        name.strip_prefix(self.prefix)?.parse().ok()
    }

    /// Who holds each shard Lease now (`None`: nobody).
    pub async fn holders(&self, client: &kube::Client) -> Vec<Option<String>> {
        let leases = Api::<Lease>::namespaced(client.clone(), self.namespace)
            .list(&Default::default())
            .await
            .unwrap();
        let mut holders = vec![None; self.count as usize];
        for lease in leases {
            let name = lease.metadata.name.unwrap_or_default();
            let Some(shard) = self.shard_of_lease(&name) else {
                continue;
            };
            holders[shard as usize] = lease
                .spec
                .and_then(|spec| spec.holder_identity)
                .filter(|holder| !holder.is_empty());
        }
        holders
    }

    /// Waits until `replicas` hold every shard between them, each its even share; returns the
    /// holder of each shard.
    pub async fn balanced(
        &self,
        client: &kube::Client,
        replicas: &[String],
        within: Duration,
    ) -> Vec<String> {
        let expected: BTreeSet<String> = replicas.iter().cloned().collect();
        let share = self.count as usize / replicas.len();
        eventually("the shards balanced", within, || async {
            let holders = self.holders(client).await;
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for holder in holders.iter().flatten() {
                *counts.entry(holder.clone()).or_default() += 1;
            }
            let even = counts.keys().cloned().collect::<BTreeSet<_>>() == expected
                && counts.values().all(|count| *count == share)
                && holders.iter().all(Option::is_some);
            Ok(even.then(|| holders.into_iter().flatten().collect()))
        })
        .await
        .unwrap()
    }

    /// Replays the request log: every write by a replica (a username starting with
    /// `replicas`) in a namespace of `shards` (namespace → shard of the object it holds) must
    /// come while that replica holds the shard's Lease. Returns how many writes were checked.
    pub fn no_write_without_the_shard(
        &self,
        records: &[RequestRecord],
        replicas: &str,
        shards: &BTreeMap<String, u32>,
    ) -> usize {
        let mut holder: BTreeMap<u32, String> = BTreeMap::new();
        let mut checked = 0;
        for (at, record) in records.iter().enumerate() {
            if !record.identity.starts_with(replicas) || !record.is_write() {
                continue;
            }
            let identity = &record.identity;
            if record.namespace == self.namespace && record.resource == "leases" {
                if !(200..300).contains(&record.code) {
                    continue;
                }
                let Some(shard) = self.shard_of_lease(&record.name) else {
                    continue;
                };
                if record.verb == "delete" {
                    holder.remove(&shard);
                } else {
                    holder.insert(shard, identity.clone());
                }
                continue;
            }
            if let Some(shard) = shards.get(&record.namespace) {
                let held = holder.get(shard);
                assert!(
                    held == Some(identity),
                    "request #{at} {record:?} wrote for shard {shard}, held by {held:?}"
                );
                checked += 1;
            }
        }
        checked
    }
}
