//! `run` stopping while a reconcile's write is stuck: bounded by the grace period, and the
//! Lease left to expire rather than released under the write. In its own test binary because
//! it sends the process SIGTERM.

mod common;

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use arbor_kube_emu::faults::{Fault, FaultEffect};
use common::{Cluster, free_port, process_args, wait_for};

/// Issue 22 (third review): the leader's controller is work its shutdown waits for only within
/// the grace period (3 s here). A propagation the API server holds for 60 s as SIGTERM comes is
/// abandoned: the process stops without waiting for it and leaves its Lease to expire instead
/// of releasing it while the write may still land. Before, the stop waited for the controller
/// without bound (here 60 s), then released the Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_stuck_past_the_grace_period_as_the_leader_stops_leaves_the_lease_to_expire()
-> Result<()> {
    let cluster = Cluster::without_controller(common::ARBOR).await?;
    let dir = tempfile::tempdir()?;
    let args = process_args(&cluster, dir.path(), free_port()?, "3s")?;
    let process = tokio::spawn(arbor_hierarchy::run(args));
    let leases = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        cluster.client.clone(),
        "default",
    );
    let holder = || async {
        let lease = leases.get_opt("arbor-hierarchy").await?;
        Ok::<_, anyhow::Error>(
            lease
                .and_then(|lease| lease.spec)
                .and_then(|spec| spec.holder_identity)
                .filter(|holder| !holder.is_empty()),
        )
    };
    wait_for("the Lease to be held", || async {
        Ok(holder().await?.is_some())
    })
    .await?;
    cluster.root_with_child().await?;
    let faults = cluster.emu.faults();
    faults.inject(
        Fault::new(FaultEffect::Stall {
            delay: Duration::from_secs(60),
            times: 1,
        })
        .verbs(&["patch"])
        .resources(&["secrets"]),
    );
    cluster.emu.requests().reset();
    cluster
        .create_secret("root", "s", "v", &[("propagate", "update")])
        .await?;
    wait_for("the propagation of the Secret to be held", || async {
        Ok(faults.fired() == vec![1])
    })
    .await?;

    let pid = std::process::id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()?;
    tokio::time::timeout(Duration::from_secs(40), process)
        .await
        .context("run waited for the held write, past the grace period")???;

    ensure!(
        holder().await?.is_some(),
        "the Lease was given up while the write may still land"
    );
    ensure!(
        cluster.emu.requests().count("patch", "secrets") == 0,
        "the held write was answered before the stop"
    );
    cluster.shutdown().await;
    Ok(())
}
