//! Two instances with leader election against one cluster: only the holder of the Lease runs
//! the controllers; when it stops, the other takes over and syncs what came since.

mod controller_support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use controller_support::*;

/// The Lease `Component::campaign` takes for gitsync (the flags' default namespace).
const LEASE: (&str, &str) = ("arbor-system", "arbor-gitsync");

async fn holder(cluster: &Cluster) -> anyhow::Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE.0);
    Ok(leases
        .get_opt(LEASE.1)
        .await?
        .and_then(|lease| lease.spec)
        .and_then(|spec| spec.holder_identity))
}

/// A candidate's flags: its identity and a short Lease, so that a takeover is quick.
fn candidate(identity: &str) -> Vec<String> {
    [
        "--gittrack-mode=Enabled",
        "--clustergittrack-mode=Disabled",
        "--lease-duration=3s",
        "--lease-renew-interval=1s",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([format!("--lease-identity={identity}")])
    .collect()
}

async fn campaign(config: kube::Config, identity: &str) -> anyhow::Result<Instance> {
    let flags = candidate(identity);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    start_instance(config, true, &flags).await
}

#[tokio::test]
async fn only_the_leader_applies_and_the_other_takes_over_when_it_stops() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace(LEASE.0).await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("first.yaml", &configmap(None, "first", "1"))?;
    let first_commit = repo.commit("first")?;

    // `start_instance` returns once the instance holds the Lease.
    let leader = campaign(cluster.config(), "gitsync-a").await?;
    let config = cluster.config();
    let standby = tokio::spawn(async move { campaign(config, "gitsync-b").await });

    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&leader, &source, &first_commit).await?;
    assert!(cluster.exists(&cluster.configmaps("foo"), "first").await?);
    assert_eq!(holder(&cluster).await?.as_deref(), Some("gitsync-a"));
    assert!(
        !standby.is_finished(),
        "the second instance started its controllers without the Lease"
    );

    leader.stop().await;
    // Committed after the leader stopped: only the new leader can apply it.
    repo.write("second.yaml", &configmap(None, "second", "2"))?;
    let second_commit = repo.commit("second")?;
    let new_leader = tokio::time::timeout(PATIENCE.timeout, standby).await???;
    assert_eq!(holder(&cluster).await?.as_deref(), Some("gitsync-b"));
    cluster.synced(&new_leader, &source, &second_commit).await?;
    assert!(cluster.exists(&cluster.configmaps("foo"), "second").await?);
    new_leader.stop().await;
    Ok(())
}
