//! A lost Lease, one behaviour for every controller: the four binaries run with leader
//! election as in a cluster, another replica takes each Lease over, and each controller that
//! leads stops and exits non-zero, saying which Lease it lost, so that its Deployment restarts
//! it as a candidate (`arbor_runtime::component` explains the choice).
//!
//! | binary | Lease | once another replica holds it |
//! |---|---|---|
//! | arbor-gitsync | `arbor-system/arbor-gitsync` | exits with status 1, naming the Lease |
//! | arbor-hierarchy | `arbor-system/arbor-hierarchy` | exits with status 1, naming the Lease |
//! | arbor-observer | `arbor-system/arbor-observer` | exits with status 1, naming the Lease |
//! | arbor-webhook | none: every replica answers admission | keeps running |
//!
//! Each Lease names its holder by host name and process id (no `POD_NAME` outside a pod),
//! never by the bare process id, which is 1 in every container.

use std::time::Duration;

use arbor_e2e::eventually;
use arbor_e2e::source::{Need, skip};
use arbor_e2e::system::{WAIT, start_electing};
use arbor_testkit::system::SYSTEM_NAMESPACE;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

/// What happens to a controller once another replica holds its Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterTheLoss {
    ExitsWithStatus1,
    /// It holds no Lease to lose.
    KeepsRunning,
}

const TABLE: [(&str, AfterTheLoss); 4] = [
    ("gitsync", AfterTheLoss::ExitsWithStatus1),
    ("hierarchy", AfterTheLoss::ExitsWithStatus1),
    ("observer", AfterTheLoss::ExitsWithStatus1),
    ("webhook", AfterTheLoss::KeepsRunning),
];

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host name")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_controller_that_loses_its_lease_stops_and_exits_non_zero() {
    if skip(&[Need::NoInstalledArbor("the arbor-system Leases")]) {
        return;
    }
    let mut system = start_electing(&["gitsync", "hierarchy", "observer", "webhook"])
        .await
        .unwrap();
    let leases = Api::<Lease>::namespaced(system.client.clone(), SYSTEM_NAMESPACE);
    let host = host_name();

    for (name, after) in TABLE {
        let lease_name = format!("arbor-{name}");
        let controller = match name {
            "gitsync" => system.gitsync.as_ref(),
            "hierarchy" => system.hierarchy.as_ref(),
            "observer" => system.observer.as_ref(),
            _ => system.webhook.as_ref(),
        }
        .unwrap();
        let pid = controller.process.pid().unwrap();
        match after {
            AfterTheLoss::ExitsWithStatus1 => {
                let expected = format!("{host}-{pid}");
                let held = eventually(&format!("{lease_name} held"), WAIT, || async {
                    // A failed read is retried, as the controller's own campaign would.
                    let holder = leases
                        .get_opt(&lease_name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|lease| lease.spec)
                        .and_then(|spec| spec.holder_identity);
                    Ok(holder.filter(|holder| !holder.is_empty()))
                })
                .await
                .unwrap();
                assert_eq!(held, expected, "{lease_name}'s holder");
                assert_ne!(held, pid.to_string());
            }
            AfterTheLoss::KeepsRunning => {
                assert!(
                    leases.get_opt(&lease_name).await.unwrap().is_none(),
                    "arbor-{name} campaigned for a Lease"
                );
            }
        }
    }

    // Another replica takes every Lease over, as one that judged them expired would.
    for (name, after) in TABLE {
        if after == AfterTheLoss::ExitsWithStatus1 {
            let lease_name = format!("arbor-{name}");
            let mut lease = leases.get(&lease_name).await.unwrap();
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.holder_identity = Some("another-replica".to_owned());
            spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
            spec.lease_duration_seconds = Some(3600);
            leases
                .replace(&lease_name, &PostParams::default(), &lease)
                .await
                .unwrap();
        }
    }

    for (name, after) in TABLE {
        let controller = match name {
            "gitsync" => system.system.gitsync.as_mut(),
            "hierarchy" => system.system.hierarchy.as_mut(),
            "observer" => system.system.observer.as_mut(),
            _ => system.system.webhook.as_mut(),
        }
        .unwrap();
        match after {
            AfterTheLoss::ExitsWithStatus1 => {
                let status = controller.process.wait_exit(WAIT).await.unwrap();
                let log = controller.process.log();
                assert_eq!(status.code(), Some(1), "arbor-{name}: {status}\n{log}");
                let said = format!("lost the Lease {SYSTEM_NAMESPACE}/arbor-{name}");
                assert!(
                    log.contains(&said),
                    "arbor-{name} did not say {said:?}:\n{log}"
                );
            }
            AfterTheLoss::KeepsRunning => {
                // Past several renew intervals of the others, which have all exited by now.
                tokio::time::sleep(Duration::from_secs(1)).await;
                controller
                    .process
                    .ensure_running("after the Leases changed hands")
                    .unwrap();
            }
        }
    }

    // Leave no Lease held by a replica that does not exist (an existing cluster is reused).
    for (name, _) in TABLE {
        let _ = leases
            .delete(&format!("arbor-{name}"), &DeleteParams::default())
            .await;
    }
}
