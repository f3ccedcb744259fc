//! The observer lifecycle table of seeds/004, seen from the controller's log and through
//! `ObserverService` over a real gRPC connection:
//!
//! | action | observer stopped before | observer started after |
//! |---|---|---|
//! | create | no | yes |
//! | update | yes | yes |
//! | delete | yes | no |
//!
//! One exception to the table, outside these tests: a create finds no observer, unless one
//! outlived the status that recorded the last apply (a status wiped, or restored without it,
//! while the observer runs); the controller then stops that observer before the create, as
//! before an update, so that no write of it lands after the create's status (shown in
//! `healing.rs`). The tests here never leave such an observer, and [`assert_row`] holds every
//! create to the table's "no".

mod support;

use arbor_observer::{AppKey, LifecycleEvent};
use arbor_policy::observe::{ApplicationAction, observer_lifecycle};
use arbor_proto::v1::observer_service_client::ObserverServiceClient;
use arbor_proto::v1::{ApplicationSummary, GetObservationRequest, ListApplicationsRequest};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{Cluster, NAMESPACE, eventually, nginx_manifest, nginx_schema};
use tonic::transport::Channel;

/// The log entries of one action, from its start to the observer's start after it (or the
/// action's end when none follows), and what preceded the action.
fn around(
    log: &[LifecycleEvent],
    action: ApplicationAction,
) -> (Option<LifecycleEvent>, Vec<LifecycleEvent>) {
    let start = log
        .iter()
        .rposition(|event| *event == LifecycleEvent::ActionStarted(action))
        .expect("the action was logged");
    (
        start.checked_sub(1).map(|before| log[before]),
        log[start..].to_vec(),
    )
}

/// Checks the log against the policy's lifecycle table row for `action`. A create is held to
/// "not stopped before": the exception (an observer left over from a lost status, see the
/// module docs) is never set up here, so an observer stopped before a create is a failure.
fn assert_row(log: &[LifecycleEvent], action: ApplicationAction) {
    let row = observer_lifecycle(action);
    let (before, from_action) = around(log, action);
    assert_eq!(
        before == Some(LifecycleEvent::ObserverStopped),
        row.stopped_before,
        "{action:?}: stopped before? (a create stops an observer only when one outlived the \
         status' record of the last apply, which no test here sets up) log {log:?}"
    );
    let mut expected = vec![
        LifecycleEvent::ActionStarted(action),
        LifecycleEvent::ActionDone(action),
    ];
    if row.started_after {
        expected.push(LifecycleEvent::ObserverStarted);
    }
    assert_eq!(from_action, expected, "{action:?}: log {log:?}");
}

async fn summary(
    grpc: &mut ObserverServiceClient<Channel>,
    name: &str,
) -> anyhow::Result<Option<ApplicationSummary>> {
    let response = grpc
        .list_applications(ListApplicationsRequest {
            namespace: NAMESPACE.into(),
        })
        .await?
        .into_inner();
    Ok(response
        .applications
        .into_iter()
        .find(|app| app.name == name))
}

#[tokio::test]
async fn observer_is_started_after_create_and_update_and_stopped_before_update_and_delete()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = cluster.observer(&[]).await?;
    let mut grpc = ObserverServiceClient::connect(format!("http://{}", observer.grpc_addr)).await?;
    let key = AppKey::new(NAMESPACE, "web");
    let applications = cluster.applications();

    // Create, held by a second finalizer so that the deleted Application stays visible.
    cluster
        .create_application(
            "web",
            json!({"manifest": nginx_manifest("web"), "observerSchema": nginx_schema("web")}),
        )
        .await?;
    applications
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test.arbor.dev/hold"]}})),
        )
        .await?;
    cluster.wait_for_state("web", "Running").await?;
    let after_create = eventually("the observer to run after create", || async {
        Ok(summary(&mut grpc.clone(), "web")
            .await?
            .filter(|app| app.observer_running))
    })
    .await?;
    assert_eq!(after_create.state, "Running");
    assert_eq!(after_create.objects, 2);
    let metrics = observer.registry.metrics().clone();
    assert_eq!(metrics.observers_running.get(), 1);
    assert_row(
        &observer.registry.stats(&key).log,
        ApplicationAction::Create,
    );
    let events: kube::Api<Event> = kube::Api::namespaced(cluster.client.clone(), NAMESPACE);
    eventually("an Event about the creation", || async {
        let list = events.list(&Default::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|event| {
                event.reason.as_deref() == Some("Created")
                    && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
            })
            .map(|_| ()))
    })
    .await?;

    let observation = grpc
        .get_observation(GetObservationRequest {
            namespace: NAMESPACE.into(),
            name: "web".into(),
        })
        .await?
        .into_inner();
    assert!(observation.differences.is_empty());
    let schema: serde_json::Value = serde_json::from_str(&observation.observer_schema_json)?;
    assert_eq!(schema.as_array().map(Vec::len), Some(2));

    // Update: a new image in the spec.
    let mut manifest = nginx_manifest("web");
    manifest[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    applications
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"manifest": manifest}})),
        )
        .await?;
    cluster.wait_for_state("web", "Running").await?;
    eventually("the update to be logged", || async {
        let log = observer.registry.stats(&key).log;
        Ok(log
            .ends_with(&[
                LifecycleEvent::ActionDone(ApplicationAction::Update),
                LifecycleEvent::ObserverStarted,
            ])
            .then_some(()))
    })
    .await?;
    assert_row(
        &observer.registry.stats(&key).log,
        ApplicationAction::Update,
    );
    assert!(summary(&mut grpc, "web").await?.unwrap().observer_running);

    // Delete.
    applications.delete("web", &Default::default()).await?;
    eventually("the deletion to be logged", || async {
        let log = observer.registry.stats(&key).log;
        Ok(
            (log.last() == Some(&LifecycleEvent::ActionDone(ApplicationAction::Delete)))
                .then_some(()),
        )
    })
    .await?;
    assert_row(
        &observer.registry.stats(&key).log,
        ApplicationAction::Delete,
    );
    let deleted = eventually("the deleting Application without observer", || async {
        Ok(summary(&mut grpc.clone(), "web")
            .await?
            .filter(|app| app.state == "Deleting" && !app.observer_running))
    })
    .await?;
    assert_eq!(deleted.objects, 2);
    assert_eq!(metrics.observers_running.get(), 0);
    assert!(cluster.deployments().get_opt("web").await?.is_none());
    assert!(cluster.services().get_opt("web").await?.is_none());

    // Our finalizer is gone; the test's own is released.
    let held = applications.get("web").await?;
    assert_eq!(
        held.metadata.finalizers,
        Some(vec!["test.arbor.dev/hold".to_owned()])
    );
    applications
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    eventually("the Application to be gone", || async {
        Ok(applications.get_opt("web").await?.is_none().then_some(()))
    })
    .await?;
    cluster.finish(observer).await
}

/// A burst of new Applications is reconciled at most `--max-concurrent-reconciles` at a time:
/// each reconcile in flight holds its own API server connection (with its buffers) and its
/// decoded Application, which made the observer's memory grow with the burst. With every
/// Application patch slowed, 24 new Applications and a limit of 4, no more than 4 reconciles
/// ever run at once. Before, all of them ran together.
#[tokio::test]
async fn a_burst_of_applications_is_reconciled_a_bounded_number_at_a_time() -> anyhow::Result<()> {
    use arbor_kube_emu::faults::{Fault, FaultEffect};
    use kube::Resource as _;

    let cluster = Cluster::start().await?;
    let observer = cluster.observer(&["--max-concurrent-reconciles=4"]).await?;
    let applications = format!(
        "{}/{}",
        arbor_api::Application::group(&()),
        arbor_api::Application::plural(&())
    );
    cluster.emu.faults().inject(
        Fault::new(FaultEffect::Latency(std::time::Duration::from_millis(200)))
            .verbs(&["patch"])
            .resources(&[&applications]),
    );
    for index in 0..24 {
        let name = format!("burst-{index}");
        cluster
            .create_application(&name, json!({"manifest": nginx_manifest(&name)}))
            .await?;
    }
    let in_flight = &observer.registry.metrics().reconciles_in_flight;
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        most = most.max(in_flight.get());
        let finalized = cluster
            .applications()
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|application| application.metadata.finalizers.is_some())
            .count();
        if finalized == 24 {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {finalized} of 24 Applications reconciled within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(most <= 4, "{most} reconciles ran at once; the limit is 4");
    assert!(most >= 2, "the reconciles ran one by one ({most} at most)");
    cluster.emu.faults().clear();
    cluster.finish(observer).await
}

/// A leading observer (with `flags`) whose apply of Application `app`'s Deployment the API
/// server holds for `seconds`: returns once it is held.
async fn leader_with_a_deployment_apply_held(
    flags: &[&str],
    seconds: u64,
) -> anyhow::Result<(Cluster, arbor_observer::Running)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    let mut all_flags = vec!["--leader-election=true"];
    all_flags.extend_from_slice(flags);
    let observer = cluster.observer(&all_flags).await?;
    create_with_deployment_apply_held(&cluster, "app", seconds).await?;
    Ok((cluster, observer))
}

/// Has the API server hold the next apply of a Deployment for `seconds`, creates the nginx
/// Application `name`, and returns once its Deployment's apply is held.
async fn create_with_deployment_apply_held(
    cluster: &Cluster,
    name: &str,
    seconds: u64,
) -> anyhow::Result<()> {
    use arbor_kube_emu::faults::Fault;

    let faults = cluster.emu.faults();
    faults.inject(
        Fault::held_once(std::time::Duration::from_secs(seconds))
            .verbs(&["patch"])
            .resources(&["apps/deployments"]),
    );
    cluster
        .create_application(name, json!({"manifest": nginx_manifest(name)}))
        .await?;
    eventually("the Deployment's apply to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await
}

/// Issue 22 (third review): an Application's reconcile is work the leader's shutdown waits for
/// only within the grace period (5 s here). A reconcile whose write the API server holds past
/// it is abandoned and counted, the stop returns without waiting for the write, and the Lease
/// is left to expire rather than released while the write may still land. Before, the stop
/// waited for the controller without bound (here 60 s), then released the Lease.
#[tokio::test]
async fn a_reconcile_stuck_past_the_grace_period_leaves_the_lease_to_expire() -> anyhow::Result<()>
{
    let (cluster, observer) = leader_with_a_deployment_apply_held(&[], 60).await?;
    let abandoned = observer.shutdown().abandoned_work();
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(40), observer.stop()).await;
    assert!(
        stopped.is_ok(),
        "the stop waited for the held write, past the grace period"
    );
    stopped??;

    assert_eq!(
        abandoned.get(),
        1,
        "the stuck controller, abandoned, is counted"
    );
    let lease = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        cluster.client.clone(),
        "arbor-system",
    )
    .get("arbor-observer")
    .await?;
    assert!(
        lease
            .spec
            .and_then(|spec| spec.holder_identity)
            .is_some_and(|holder| !holder.is_empty()),
        "the Lease was given up while the write may still land"
    );
    assert_eq!(
        cluster.emu.requests().count("patch", "apps/deployments"),
        0,
        "the held write was answered before the stop"
    );
    cluster.shutdown().await;
    Ok(())
}

/// Issue 22 (third review): a reconcile starts no write once its replica stops. The leader's
/// apply of an Application's Deployment is held 8 s as it stops (grace 60 s): that write is
/// answered before the Lease is given up, and neither the Service nor the status is written
/// after it; the next leader goes on. Ending so is a normal outcome, no reconcile error
/// (`arbor_observer_reconcile_errors` counted it before).
#[tokio::test]
async fn a_reconcile_between_writes_when_the_leader_stops_sends_no_further_write()
-> anyhow::Result<()> {
    let (cluster, observer) =
        leader_with_a_deployment_apply_held(&["--shutdown-grace=60s"], 8).await?;
    cluster.emu.requests().reset();
    let metrics = observer.registry.metrics().clone();
    let errors = metrics.reconcile_errors.get();
    observer.stop().await?;
    assert_eq!(
        metrics.reconcile_errors.get(),
        errors,
        "the reconcile ended by the stop was counted as a reconcile error"
    );

    let requests = cluster.emu.requests();
    assert_eq!(
        requests.count("patch", "apps/deployments"),
        1,
        "the held write"
    );
    assert_eq!(
        (
            requests.count("patch", "services"),
            requests.count("patch", "arbor.dev/applications")
        ),
        (0, 0),
        "the Service or the status was written after the stop began"
    );
    cluster.shutdown().await;
    Ok(())
}

/// Issue 22 (review of the rounds change): an observer sends no status write once its replica
/// begins to stop. Application `watched` runs with its observer; the leader stops (grace 60 s)
/// while the API server holds the apply of another Application's Deployment for 4 s, and
/// meanwhile `watched`'s Deployment is changed by hand. The observer sees the change, but no
/// Application status is written from the start of the stop. Before, observers were stopped
/// only after the controller's in-flight reconciles, and this one wrote its status.
#[tokio::test]
async fn an_observer_sends_no_status_write_once_its_replica_stops() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    let observer = cluster
        .observer(&["--leader-election=true", "--shutdown-grace=60s"])
        .await?;
    cluster
        .create_application("watched", json!({"manifest": nginx_manifest("watched")}))
        .await?;
    cluster.wait_for_state("watched", "Running").await?;
    let key = AppKey::new(support::NAMESPACE, "watched");
    eventually("watched's observer to run", || async {
        Ok(observer.registry.is_running(&key).then_some(()))
    })
    .await?;
    create_with_deployment_apply_held(&cluster, "held", 4).await?;

    cluster.emu.requests().reset();
    observer.shutdown().trigger();
    let checks = observer.registry.stats(&key).checks;
    cluster
        .edit(
            &cluster.deployments(),
            "watched",
            json!({"spec": {"replicas": 3}}),
        )
        .await?;
    // Long enough for an observer still running to see the change and write (milliseconds),
    // well inside the held write.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let seen_while_stopping = observer.registry.stats(&key).checks > checks;
    observer.wait().await?;

    let requests = cluster.emu.requests();
    assert_eq!(
        requests.count("patch", "arbor.dev/applications"),
        0,
        "an Application status was written after the stop began (observer saw the change: \
         {seen_while_stopping})"
    );
    cluster.shutdown().await;
    Ok(())
}

/// Issue 22 (review of the rounds change): a leader that loses its Lease while a reconcile's
/// write is held past the grace period (2 s) still ends with the lost Lease as its error, so
/// the binary exits non-zero. Before, the drain gave up on the controller's task, the loss
/// it carried was never read, and `wait` answered `Ok`.
#[tokio::test]
async fn a_lost_lease_is_an_error_even_when_the_drain_gives_up_on_the_controller()
-> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;

    let (cluster, observer) = leader_with_a_deployment_apply_held(
        &[
            "--shutdown-grace=2s",
            "--lease-duration=3s",
            "--lease-renew-interval=1s",
        ],
        20,
    )
    .await?;
    let leases = kube::Api::<Lease>::namespaced(cluster.client.clone(), "arbor-system");
    let taken = json!({"spec": {
        "holderIdentity": "another-replica",
        "leaseDurationSeconds": 3600,
        "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now()
        ),
    }});
    leases
        .patch(
            "arbor-observer",
            &PatchParams::default(),
            &Patch::Merge(&taken),
        )
        .await?;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(15), observer.wait()).await;
    let outcome =
        ended.map_err(|_| anyhow::anyhow!("the leader did not stop on the lost Lease"))?;
    assert!(
        matches!(outcome, Err(arbor_observer::Error::LostLease(_))),
        "the lost Lease was not reported: {outcome:?}"
    );
    cluster.shutdown().await;
    Ok(())
}
