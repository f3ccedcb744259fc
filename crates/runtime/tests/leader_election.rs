//! Leader election against an API server: one of two candidates leads, and when it stops the
//! other takes over within the lease duration (at once when the leader released the Lease).

use std::time::Duration;

use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::faults::{Fault, FaultEffect};
use arbor_runtime::lease::{LeaderElector, LeaseConfig, Role};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

const LEASE_DURATION: Duration = Duration::from_secs(2);

fn config(identity: &str) -> LeaseConfig {
    LeaseConfig {
        name: "arbor-test".into(),
        namespace: "arbor-system".into(),
        identity: identity.into(),
        lease_duration: LEASE_DURATION,
        renew_interval: Duration::from_millis(200),
    }
}

async fn cluster() -> (KubeEmu, kube::Client) {
    let emu = KubeEmu::start().await.expect("emulator starts");
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .expect("client from the emulator's kubeconfig");
    let namespace: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "arbor-system"}
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace created");
    (emu, client)
}

/// The emulator's client configuration, for a component to build its own client from.
async fn config_of(emu: &KubeEmu) -> kube::Config {
    arbor_runtime::client::config_from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .expect("configuration from the emulator's kubeconfig")
}

async fn holder(client: &kube::Client) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), "arbor-system")
        .get("arbor-test")
        .await
        .unwrap();
    lease.spec.and_then(|s| s.holder_identity)
}

#[tokio::test]
async fn only_one_of_two_candidates_leads() {
    let (emu, client) = cluster().await;
    let mut first = LeaderElector::new(client.clone(), config("replica-a"));
    let mut second = LeaderElector::new(client.clone(), config("replica-b"));

    assert_eq!(first.try_acquire_or_renew().await.unwrap(), Role::Leader);
    assert_eq!(
        second.try_acquire_or_renew().await.unwrap(),
        Role::Follower {
            holder: Some("replica-a".into())
        }
    );
    // Renewing keeps the leader, and the follower keeps following.
    assert_eq!(first.try_acquire_or_renew().await.unwrap(), Role::Leader);
    assert!(matches!(
        second.try_acquire_or_renew().await.unwrap(),
        Role::Follower { .. }
    ));
    assert_eq!(holder(&client).await.as_deref(), Some("replica-a"));
    emu.shutdown().await;
}

#[tokio::test]
async fn follower_takes_over_within_the_lease_duration_when_the_leader_stops_renewing() {
    let (emu, client) = cluster().await;
    let mut crashed = LeaderElector::new(client.clone(), config("replica-a"));
    assert_eq!(crashed.try_acquire_or_renew().await.unwrap(), Role::Leader);
    // replica-a now stops renewing without releasing, as a killed process would.

    let shutdown = CancellationToken::new();
    let successor = LeaderElector::new(client.clone(), config("replica-b")).spawn(shutdown.clone());
    let took_over = tokio::time::timeout(LEASE_DURATION * 3, successor.acquired()).await;
    assert!(
        took_over.is_ok(),
        "replica-b did not take over an expired lease"
    );
    assert!(successor.is_leader());
    assert_eq!(holder(&client).await.as_deref(), Some("replica-b"));

    shutdown.cancel();
    successor.finished().await;
    emu.shutdown().await;
}

#[tokio::test]
async fn a_released_lease_is_taken_over_without_waiting_for_expiry() {
    let (emu, client) = cluster().await;
    let leader_shutdown = CancellationToken::new();
    let leader =
        LeaderElector::new(client.clone(), config("replica-a")).spawn(leader_shutdown.clone());
    leader.acquired().await;

    // Graceful stop: the leader releases on shutdown.
    leader_shutdown.cancel();
    leader.finished().await;
    assert_eq!(holder(&client).await, None);

    let mut successor = LeaderElector::new(client.clone(), config("replica-b"));
    assert_eq!(
        successor.try_acquire_or_renew().await.unwrap(),
        Role::Leader
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_racing_candidate_that_loses_the_write_follows() {
    let (emu, client) = cluster().await;
    let mut first = LeaderElector::new(client.clone(), config("replica-a"));
    let mut second = LeaderElector::new(client.clone(), config("replica-b"));
    // Both see no Lease and race to create it: exactly one wins.
    let (a, b) = tokio::join!(first.try_acquire_or_renew(), second.try_acquire_or_renew());
    let leaders = [a.unwrap(), b.unwrap()]
        .into_iter()
        .filter(|role| *role == Role::Leader)
        .count();
    assert_eq!(leaders, 1);
    emu.shutdown().await;
}

/// Takes the Lease `name` over for `thief`, as another replica that judged it expired would.
async fn steal(client: &kube::Client, name: &str, thief: &str) {
    let leases = Api::<Lease>::namespaced(client.clone(), "arbor-system");
    let mut lease = leases.get(name).await.unwrap();
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some(thief.into());
    spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    spec.lease_duration_seconds = Some(60);
    leases
        .replace(name, &PostParams::default(), &lease)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_component_that_loses_its_lease_stops_and_reports_the_lost_lease() {
    use arbor_runtime::{CommonArgs, Component};
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    let (emu, client) = cluster().await;
    let cli = Cli::try_parse_from([
        "arbor-test",
        "--lease-identity=replica-a",
        "--lease-duration=2s",
        "--lease-renew-interval=200ms",
    ])
    .unwrap();
    let component = Component::with_config("gate", cli.common, config_of(&emu).await).unwrap();
    let gate = component.campaign();
    assert_eq!(
        tokio::time::timeout(LEASE_DURATION * 3, gate.acquired())
            .await
            .unwrap(),
        Ok(true)
    );
    assert_eq!(
        Api::<Lease>::namespaced(client.clone(), "arbor-system")
            .get("arbor-gate")
            .await
            .unwrap()
            .spec
            .and_then(|spec| spec.holder_identity)
            .as_deref(),
        Some("replica-a")
    );

    steal(&client, "arbor-gate", "replica-b").await;
    let outcome = tokio::time::timeout(LEASE_DURATION * 3, gate.hold())
        .await
        .expect("the loss is noticed within a renew interval or two");
    assert_eq!(outcome, Err(gate_lease()));
    assert!(
        component.shutdown().is_shutting_down(),
        "reconciling goes on after the Lease was lost"
    );
    component.shutdown().drain().await;
    // Not ours any more: the campaign leaves the thief's Lease alone.
    assert_eq!(
        holder_of(&client, "arbor-gate").await.as_deref(),
        Some("replica-b")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_component_that_is_stopped_releases_its_lease_and_reports_no_loss() {
    use arbor_runtime::{CommonArgs, Component};
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    let (emu, client) = cluster().await;
    let cli = Cli::try_parse_from(["arbor-test", "--lease-identity=replica-a"]).unwrap();
    let component = Component::with_config("gate", cli.common, config_of(&emu).await).unwrap();
    let gate = component.campaign();
    assert_eq!(gate.acquired().await, Ok(true));
    // A writer still finishing its work after the signal: the Lease must stay ours until it
    // is done, or a successor could lead beside it.
    let token = component.shutdown().token();
    let reader = client.clone();
    let holder_while_writing = component.shutdown().spawn(async move {
        token.cancelled().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        holder_of(&reader, "arbor-gate").await
    });
    component.shutdown().trigger();
    assert_eq!(gate.hold().await, Ok(()));
    component.shutdown().drain().await;
    assert_eq!(
        holder_while_writing.await.unwrap().as_deref(),
        Some("replica-a"),
        "the Lease was released while a writer was still running"
    );
    assert_eq!(holder_of(&client, "arbor-gate").await, None);
    emu.shutdown().await;
}

/// The Lease of the component `gate` the tests campaign as.
fn gate_lease() -> arbor_runtime::LostLease {
    arbor_runtime::LostLease {
        namespace: "arbor-system".into(),
        name: "arbor-gate".into(),
    }
}

async fn holder_of(client: &kube::Client, name: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "arbor-system")
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.holder_identity)
        .filter(|holder| !holder.is_empty())
}

/// `Component::run_until_stopped`, the one stop sequence of every leader-elected controller
/// (issue 22): the work runs only while this replica leads, is drained before the Lease is
/// released, keeps the Lease when it gave up a write, and a lost Lease is the answer.
mod stop_sequence {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use arbor_kube_emu::KubeEmu;
    use std::future::Future;

    use arbor_runtime::shutdown::{Drained, Shutdown};
    use arbor_runtime::{CommonArgs, Component, LostLease};
    use clap::Parser as _;
    use tokio::sync::oneshot;
    use tokio::task::JoinHandle;

    use super::{LEASE_DURATION, cluster, config_of, holder_of, steal};

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    /// A component campaigning for `arbor-system/arbor-gate` as `identity`, with a short Lease.
    async fn candidate(emu: &KubeEmu, identity: &str) -> Component {
        let identity = format!("--lease-identity={identity}");
        let cli = Cli::try_parse_from([
            "arbor-test",
            identity.as_str(),
            "--lease-duration=2s",
            "--lease-renew-interval=200ms",
        ])
        .unwrap();
        Component::with_config("gate", cli.common, config_of(emu).await).unwrap()
    }

    /// The leader `replica-a` running work that, once the stop begins, does `at_stop`; returns
    /// once the work runs, with the stop sequence's handle.
    async fn leader_running<F>(
        emu: &KubeEmu,
        at_stop: impl FnOnce(Shutdown) -> F + Send + 'static,
    ) -> (Component, JoinHandle<Result<Drained, LostLease>>)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let component = candidate(emu, "replica-a").await;
        let (started, running) = oneshot::channel();
        let shutdown = component.shutdown().clone();
        let work = async move {
            let _ = started.send(());
            shutdown.token().cancelled().await;
            at_stop(shutdown).await;
        };
        let stopping = tokio::spawn(component.run_until_stopped(component.campaign(), work));
        tokio::time::timeout(LEASE_DURATION * 3, running)
            .await
            .expect("the work starts once the replica leads")
            .unwrap();
        (component, stopping)
    }

    #[tokio::test]
    async fn the_work_is_drained_before_the_lease_is_released() {
        let (emu, client) = cluster().await;
        let (seen, holder_at_the_end) = oneshot::channel();
        let reader = client.clone();
        let (component, stopping) = leader_running(&emu, move |_| async move {
            // A write still finishing after the stop began.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = seen.send(holder_of(&reader, "arbor-gate").await);
        })
        .await;

        component.shutdown().trigger();
        assert_eq!(stopping.await.unwrap(), Ok(Drained::Completed));
        assert_eq!(
            holder_at_the_end.await.unwrap().as_deref(),
            Some("replica-a"),
            "the Lease was released while the work was still running"
        );
        assert_eq!(
            holder_of(&client, "arbor-gate").await,
            None,
            "released after"
        );
        emu.shutdown().await;
    }

    #[tokio::test]
    async fn work_that_gave_up_a_write_it_had_sent_leaves_the_lease_to_expire() {
        let (emu, client) = cluster().await;
        let (component, stopping) = leader_running(&emu, |shutdown| async move {
            shutdown.withhold_release();
        })
        .await;

        component.shutdown().trigger();
        assert_eq!(stopping.await.unwrap(), Ok(Drained::Withheld));
        assert_eq!(
            holder_of(&client, "arbor-gate").await.as_deref(),
            Some("replica-a"),
            "the Lease was released while the given-up write may still land"
        );
        emu.shutdown().await;
    }

    #[tokio::test]
    async fn a_lost_lease_stops_the_work_and_is_the_answer_once_the_work_was_drained() {
        let (emu, client) = cluster().await;
        let drained = Arc::new(AtomicBool::new(false));
        let finished = drained.clone();
        let (_component, stopping) = leader_running(&emu, move |_| async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            finished.store(true, Ordering::SeqCst);
        })
        .await;

        steal(&client, "arbor-gate", "replica-b").await;
        let outcome = tokio::time::timeout(LEASE_DURATION * 3, stopping)
            .await
            .expect("the loss stops the component within a renew interval or two")
            .unwrap();
        assert_eq!(outcome, Err(super::gate_lease()));
        assert!(
            drained.load(Ordering::SeqCst),
            "the answer came before the work was drained"
        );
        assert_eq!(
            holder_of(&client, "arbor-gate").await.as_deref(),
            Some("replica-b")
        );
        emu.shutdown().await;
    }

    #[tokio::test]
    async fn the_work_never_runs_on_a_replica_that_did_not_lead() {
        let (emu, client) = cluster().await;
        let leader = candidate(&emu, "replica-a").await;
        let leader_gate = leader.campaign();
        assert_eq!(leader_gate.acquired().await, Ok(true));

        let follower = candidate(&emu, "replica-b").await;
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let stopping = tokio::spawn(follower.run_until_stopped(follower.campaign(), async move {
            flag.store(true, Ordering::SeqCst);
        }));
        // Several renew intervals of the follower's campaign.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!stopping.is_finished(), "the follower stopped by itself");
        follower.shutdown().trigger();
        assert_eq!(stopping.await.unwrap(), Ok(Drained::Completed));
        assert!(
            !ran.load(Ordering::SeqCst),
            "the work ran without the Lease"
        );
        assert_eq!(
            holder_of(&client, "arbor-gate").await.as_deref(),
            Some("replica-a"),
            "the follower released a Lease it never held"
        );
        leader.shutdown().trigger();
        leader.shutdown().drain().await;
        emu.shutdown().await;
    }

    /// No Lease, no API server needed: the component's client is never used.
    fn without_election() -> Component {
        let cli = Cli::try_parse_from(["arbor-test", "--leader-election=false"]).unwrap();
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Component::with_config("gate", cli.common, config).unwrap()
    }

    #[tokio::test]
    async fn work_that_ends_by_itself_stops_the_component() {
        let component = without_election();
        let stopped = tokio::time::timeout(
            Duration::from_secs(5),
            component.run_until_stopped(component.campaign(), async {}),
        )
        .await
        .expect("the component stops once its work ended");
        assert_eq!(stopped, Ok(Drained::Completed));
        assert!(component.shutdown().is_shutting_down());
    }

    #[tokio::test]
    async fn a_panic_of_the_work_goes_on_once_the_stop_is_done() {
        let component = without_election();
        let (token, shutdown) = (component.shutdown().token(), component.shutdown().clone());
        let other_work_finished = Arc::new(AtomicBool::new(false));
        let finished = other_work_finished.clone();
        shutdown.spawn(async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            finished.store(true, Ordering::SeqCst);
        });
        let stopping = tokio::spawn(component.run_until_stopped(component.campaign(), async {
            panic!("the work failed");
        }));
        let joined = tokio::time::timeout(Duration::from_secs(5), stopping)
            .await
            .expect("the component stops once its work ended");
        assert!(joined.is_err_and(|join| join.is_panic()));
        assert!(
            other_work_finished.load(Ordering::SeqCst),
            "the panic went on before the other work was drained"
        );
    }
}

/// Shard Leases (`--shards N`): replicas share the shards fairly, a dead replica's shards are
/// taken over within a lease duration, and a replica that comes back gets its share.
mod shards {
    use std::collections::BTreeSet;
    use std::time::{Duration, Instant};

    use arbor_runtime::shards::{ShardConfig, ShardMetrics, Shards, spawn};
    use tokio::task::JoinHandle;
    use tokio_util::sync::CancellationToken;

    use super::{LEASE_DURATION, cluster};

    const SHARDS: u32 = 6;

    fn config(identity: &str) -> ShardConfig {
        ShardConfig {
            prefix: "arbor-test".into(),
            namespace: "arbor-system".into(),
            identity: identity.into(),
            shards: SHARDS,
            lease_duration: LEASE_DURATION,
            renew_interval: Duration::from_millis(200),
        }
    }

    struct Replica {
        shards: Shards,
        task: JoinHandle<()>,
        stop: CancellationToken,
    }

    fn replica(client: &kube::Client, identity: &str) -> Replica {
        let stop = CancellationToken::new();
        let (shards, task) = spawn(
            client.clone(),
            config(identity),
            ShardMetrics::default(),
            // Never stopping: these replicas give their shards up (release) without it.
            CancellationToken::new(),
            stop.clone(),
        );
        Replica { shards, task, stop }
    }

    impl Replica {
        async fn stop(self) {
            self.stop.cancel();
            self.task.await.unwrap();
        }
    }

    /// Each shard Lease's holder, by shard (`None`: released or absent).
    async fn shard_holders(client: &kube::Client) -> Vec<Option<String>> {
        let leases = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            client.clone(),
            "arbor-system",
        );
        let mut holders = Vec::new();
        for shard in 0..SHARDS {
            let holder = leases
                .get_opt(&format!("arbor-test-shard-{shard}"))
                .await
                .unwrap()
                .and_then(|lease| lease.spec)
                .and_then(|spec| spec.holder_identity)
                .filter(|holder| !holder.is_empty());
            holders.push(holder);
        }
        holders
    }

    /// Waits until the replicas hold every shard once between them, each its fair share.
    async fn balanced(replicas: &[&Replica], within: Duration) -> Vec<BTreeSet<u32>> {
        let start = Instant::now();
        loop {
            let held: Vec<BTreeSet<u32>> = replicas.iter().map(|r| r.shards.held()).collect();
            let total: usize = held.iter().map(BTreeSet::len).sum();
            let union: BTreeSet<u32> = held.iter().flatten().copied().collect();
            let fair = SHARDS as usize / replicas.len();
            if total == SHARDS as usize
                && union.len() == SHARDS as usize
                && held.iter().all(|h| h.len() == fair)
            {
                return held;
            }
            assert!(
                start.elapsed() < within,
                "not balanced within {within:?}: {held:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_share_the_shards_take_over_a_dead_ones_and_rebalance_when_it_returns() {
        let (emu, client) = cluster().await;
        let a = replica(&client, "replica-a");
        let b = replica(&client, "replica-b");
        let c = replica(&client, "replica-c");
        balanced(&[&a, &b, &c], LEASE_DURATION * 5).await;

        // c dies without giving anything up: a and b hold everything within about a lease
        // duration (plus the renew intervals it takes to see the last renewal and to write).
        c.task.abort();
        let killed = Instant::now();
        balanced(&[&a, &b], LEASE_DURATION * 3).await;
        let took = killed.elapsed();
        assert!(
            took < LEASE_DURATION + Duration::from_millis(1500),
            "took over in {took:?}"
        );

        // c comes back (a new process, a new membership): the shards spread over three again.
        let c = replica(&client, "replica-c");
        balanced(&[&a, &b, &c], LEASE_DURATION * 5).await;

        // A graceful stop gives the shards up at once: no waiting for expiry.
        c.stop().await;
        balanced(&[&a, &b], LEASE_DURATION).await;
        a.stop().await;
        b.stop().await;
        emu.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shard_with_work_in_flight_is_handed_over_only_after_the_work_ends() {
        let (emu, client) = cluster().await;
        let a = replica(&client, "replica-a");
        balanced(&[&a], LEASE_DURATION * 3).await;
        let guard = a.shards.guard(5).await.expect("a holds shard 5");

        // b appears: a gives up three shards (3, 4, 5), but keeps 5's Lease while the guard is
        // out, and works on it no more.
        let b = replica(&client, "replica-b");
        tokio::time::sleep(LEASE_DURATION).await;
        assert!(!guard.still_held(), "a still works on a shard it gives up");
        assert!(!b.shards.holds(5), "b took a shard a still writes on");
        drop(guard);
        balanced(&[&a, &b], LEASE_DURATION * 3).await;
        a.stop().await;
        b.stop().await;
        emu.shutdown().await;
    }

    /// Issue 22: work on one shard that gave up a write it had sent keeps that shard's Lease
    /// at shutdown (left to expire: the write may still land), and only that one: the
    /// replica's other shards are given up as usual, and the component's shutdown is not
    /// withheld. Before, the withholding was process-wide and kept every shard Lease.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_given_up_write_keeps_the_lease_of_its_shard_alone() {
        use arbor_runtime::shutdown::{Drained, Shutdown};
        let (emu, client) = cluster().await;
        let a = replica(&client, "replica-a");
        balanced(&[&a], LEASE_DURATION * 3).await;
        let shutdown = Shutdown::new(Duration::from_secs(5));
        let guard = a.shards.guard(2).await.expect("a holds shard 2");
        guard.withhold_release(&shutdown);
        drop(guard);
        a.stop().await;

        for (shard, holder) in shard_holders(&client).await.into_iter().enumerate() {
            let expected = (shard == 2).then(|| "replica-a".to_owned());
            assert_eq!(holder, expected, "shard {shard}");
        }
        shutdown.trigger();
        assert_eq!(shutdown.drain().await, Drained::Completed);
        emu.shutdown().await;
    }

    /// A shard whose write was given up is not handed over by rebalancing either: a replica
    /// that joins while the write may still land gets none of the withheld shards (before, the
    /// surplus above the fair share was given up to it as usual).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_withheld_shard_is_not_handed_to_a_replica_that_joins() {
        use arbor_runtime::shutdown::Shutdown;
        let (emu, client) = cluster().await;
        let a = replica(&client, "replica-a");
        balanced(&[&a], LEASE_DURATION * 3).await;
        let shutdown = Shutdown::new(Duration::from_secs(5));
        for shard in 0..SHARDS {
            let guard = a.shards.guard(shard).await.expect("a holds every shard");
            guard.withhold_release(&shutdown);
        }
        let b = replica(&client, "replica-b");
        // Long enough for b to join and a to give its surplus up, were it allowed to.
        tokio::time::sleep(LEASE_DURATION * 3).await;
        assert_eq!(b.shards.held(), BTreeSet::new());
        for (shard, holder) in shard_holders(&client).await.into_iter().enumerate() {
            assert_eq!(holder.as_deref(), Some("replica-a"), "shard {shard}");
        }
        b.stop().await;
        a.stop().await;
        emu.shutdown().await;
    }

    /// A killed replica never gives its membership Lease up: the others delete it once they
    /// have seen it unrenewed for a lease duration (with its resourceVersion as the
    /// precondition), and keep the living replicas' ones.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_replicas_membership_lease_is_deleted_and_the_living_ones_kept() {
        use k8s_openapi::api::coordination::v1::Lease;
        let (emu, client) = cluster().await;
        let a = replica(&client, "replica-a");
        let c = replica(&client, "replica-c");
        balanced(&[&a, &c], LEASE_DURATION * 5).await;
        let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "arbor-system");
        let dead = config("replica-c").member_lease();
        assert!(leases.get_opt(&dead).await.unwrap().is_some());

        c.task.abort();
        let killed = Instant::now();
        while leases.get_opt(&dead).await.unwrap().is_some() {
            assert!(
                killed.elapsed() < LEASE_DURATION * 3,
                "{dead} still there after {:?}",
                killed.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let living = config("replica-a").member_lease();
        assert!(leases.get_opt(&living).await.unwrap().is_some());
        a.stop().await;
        emu.shutdown().await;
    }
}

/// A leader whose renewals stop getting through (`effect` on its Lease requests) and a
/// follower that then waits for the Lease to expire: the leader must have stepped down first,
/// so no moment has two leaders.
async fn leader_steps_down_before_a_follower_takes_over(effect: FaultEffect) {
    let (emu, client) = cluster().await;
    let leader_client = arbor_runtime::client::from_kubeconfig_yaml(
        &emu.kubeconfig_yaml_for(&emu.token_for("replica-a", &["system:masters"])),
    )
    .await
    .expect("the leader's client");
    let leader_shutdown = CancellationToken::new();
    let leader =
        LeaderElector::new(leader_client, config("replica-a")).spawn(leader_shutdown.clone());
    tokio::time::timeout(LEASE_DURATION * 3, leader.acquired())
        .await
        .expect("replica-a leads");

    emu.faults().inject(
        Fault::new(effect)
            .resources(&["coordination.k8s.io/leases"])
            .identities(&["replica-a"]),
    );
    let follower_shutdown = CancellationToken::new();
    let follower =
        LeaderElector::new(client.clone(), config("replica-b")).spawn(follower_shutdown.clone());
    let first = tokio::time::timeout(LEASE_DURATION * 5, async {
        tokio::select! {
            biased;
            () = leader.lost() => "the leader stepped down",
            () = follower.acquired() => "the follower took over",
        }
    })
    .await
    .expect("the follower takes the unrenewed Lease over in time");
    assert_eq!(first, "the leader stepped down");
    tokio::time::timeout(LEASE_DURATION * 5, follower.acquired())
        .await
        .expect("the follower takes over once the Lease expired");

    emu.faults().clear();
    leader_shutdown.cancel();
    follower_shutdown.cancel();
    leader.finished().await;
    follower.finished().await;
    emu.shutdown().await;
}

#[tokio::test]
async fn a_leader_whose_renewals_fail_steps_down_before_its_lease_can_expire() {
    leader_steps_down_before_a_follower_takes_over(FaultEffect::Status {
        code: 500,
        rate: 1.0,
        times: None,
    })
    .await;
}

#[tokio::test]
async fn a_leader_whose_renewal_is_never_answered_steps_down_before_its_lease_can_expire() {
    leader_steps_down_before_a_follower_takes_over(FaultEffect::Stall {
        delay: Duration::from_secs(600),
        times: 1000,
    })
    .await;
}
