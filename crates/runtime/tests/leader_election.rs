//! Leader election against an API server: one of two candidates leads, and when it stops the
//! other takes over within the lease duration (at once when the leader released the Lease).

use std::time::Duration;

use arbor_kube_emu::KubeEmu;
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
    use arbor_runtime::{CommonArgs, Component, LostLease};
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
    let component = Component::with_client("gate", cli.common, client.clone()).unwrap();
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
    assert_eq!(
        outcome,
        Err(LostLease {
            namespace: "arbor-system".into(),
            name: "arbor-gate".into()
        })
    );
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
    let component = Component::with_client("gate", cli.common, client.clone()).unwrap();
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

async fn holder_of(client: &kube::Client, name: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "arbor-system")
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.holder_identity)
        .filter(|holder| !holder.is_empty())
}
