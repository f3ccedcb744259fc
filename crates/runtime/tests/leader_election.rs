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
