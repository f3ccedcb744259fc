//! Self-healing (seeds/004): an Application of a Deployment and a Service with a custom
//! observer schema; changes made by hand are healed when the schema observes the field, and
//! left alone when it does not.

mod support;

use std::time::{Duration, Instant};

use arbor_kube_emu::faults::{Fault, FaultEffect};
use arbor_observer::{AppKey, LifecycleEvent, Running};
use arbor_policy::observe::ApplicationAction;
use arbor_proto::v1::WatchDriftRequest;
use arbor_proto::v1::observer_service_client::ObserverServiceClient;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{Cluster, NAMESPACE, at, eventually, nginx_manifest, nginx_schema};

async fn running_nginx(cluster: &Cluster, name: &str) -> anyhow::Result<Running> {
    let observer = cluster.observer(&[]).await?;
    cluster
        .create_application(
            name,
            json!({"manifest": nginx_manifest(name), "observerSchema": nginx_schema(name),
                "observePeriod": "1h"}),
        )
        .await?;
    cluster.wait_for_state(name, "Running").await?;
    // The observer has listed the objects and made its first check: from here on, only our
    // edits make it look again.
    let key = AppKey::new(NAMESPACE, name);
    eventually("the observer's first check", || async {
        Ok((observer.registry.stats(&key).checks >= 1).then_some(()))
    })
    .await?;
    Ok(observer)
}

/// Waits until the observer of `key` made a check after `checks`, then returns whether the
/// controller acted since the lifecycle log had `actions` entries.
async fn checked_after(observer: &Running, key: &AppKey, checks: u64) -> anyhow::Result<()> {
    eventually("the observer to look at the edit", || async {
        Ok((observer.registry.stats(key).checks > checks).then_some(()))
    })
    .await
}

fn actions(observer: &Running, key: &AppKey) -> usize {
    observer
        .registry
        .stats(key)
        .log
        .iter()
        .filter(|event| matches!(event, LifecycleEvent::ActionStarted(_)))
        .count()
}

fn containers(image: &str, args: &[&str]) -> serde_json::Value {
    json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "image": image, "args": args}
    ]}}}})
}

#[tokio::test]
async fn observed_field_changed_by_hand_is_restored() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = running_nginx(&cluster, "web").await?;
    let mut grpc = ObserverServiceClient::connect(format!("http://{}", observer.grpc_addr)).await?;
    let mut drift = grpc
        .watch_drift(WatchDriftRequest {
            application: "web".into(),
            ..Default::default()
        })
        .await?
        .into_inner();

    let deployments = cluster.deployments();
    cluster
        .edit(
            &deployments,
            "web",
            containers("nginx:evil", &["--port=80"]),
        )
        .await?;
    eventually("the image to be restored", || async {
        let image = at(
            &deployments.get("web").await?,
            "/spec/template/spec/containers/0/image",
        );
        Ok((image == json!("nginx:1.25")).then_some(()))
    })
    .await?;

    let event = tokio::time::timeout(support::PATIENCE.timeout, drift.message())
        .await??
        .expect("a drift event");
    assert_eq!(event.object.unwrap().kind, "Deployment");
    assert!(
        event
            .changed_fields
            .iter()
            .any(|field| field == "spec.template.spec.containers[0].image"),
        "{:?}",
        event.changed_fields
    );

    // A label of the Service is observed too.
    let services = cluster.services();
    cluster
        .edit(
            &services,
            "web",
            json!({"metadata": {"labels": {"app": "hijacked"}}}),
        )
        .await?;
    eventually("the Service label to be restored", || async {
        let label = at(&services.get("web").await?, "/metadata/labels/app");
        Ok((label == json!("web")).then_some(()))
    })
    .await?;
    let key = AppKey::new(NAMESPACE, "web");
    assert!(observer.registry.stats(&key).drift_count >= 2);
    cluster.finish(observer).await
}

#[tokio::test]
async fn unobserved_field_changed_by_hand_stays() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = running_nginx(&cluster, "web").await?;
    let key = AppKey::new(NAMESPACE, "web");
    let checks = observer.registry.stats(&key).checks;
    let acted = actions(&observer, &key);

    let deployments = cluster.deployments();
    cluster
        .edit(&deployments, "web", json!({"spec": {"replicas": 3}}))
        .await?;
    checked_after(&observer, &key, checks).await?;

    assert_eq!(
        at(&deployments.get("web").await?, "/spec/replicas"),
        json!(3)
    );
    assert_eq!(
        actions(&observer, &key),
        acted,
        "the controller did not re-apply"
    );
    let application = cluster.applications().get("web").await?;
    assert_eq!(
        format!("{:?}", application.status.unwrap().state),
        "Running"
    );
    cluster.finish(observer).await
}

#[tokio::test]
async fn list_within_its_bounds_stays_and_list_outside_is_healed() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = running_nginx(&cluster, "web").await?;
    let key = AppKey::new(NAMESPACE, "web");
    let deployments = cluster.deployments();
    let args = "/spec/template/spec/containers/0/args";

    // Three arguments: the schema allows one to three, and the first is unchanged.
    let checks = observer.registry.stats(&key).checks;
    let acted = actions(&observer, &key);
    let within = ["--port=80", "--a", "--b"];
    cluster
        .edit(&deployments, "web", containers("nginx:1.25", &within))
        .await?;
    checked_after(&observer, &key, checks).await?;
    assert_eq!(at(&deployments.get("web").await?, args), json!(within));
    assert_eq!(
        actions(&observer, &key),
        acted,
        "a list within its bounds is not drift"
    );

    // Four: above the maximum, so the applied list is put back.
    cluster
        .edit(
            &deployments,
            "web",
            containers("nginx:1.25", &["--port=80", "--a", "--b", "--c"]),
        )
        .await?;
    eventually("the arguments to be restored", || async {
        let current = at(&deployments.get("web").await?, args);
        Ok((current == json!(["--port=80"])).then_some(()))
    })
    .await?;

    // A second container: the containers list is bounded to exactly one.
    cluster
        .edit(
            &deployments,
            "web",
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.25", "args": ["--port=80"]},
                {"name": "miner", "image": "miner:latest"}
            ]}}}}),
        )
        .await?;
    eventually("the extra container to be removed", || async {
        let containers = at(
            &deployments.get("web").await?,
            "/spec/template/spec/containers",
        );
        Ok((containers.as_array().map(Vec::len) == Some(1)).then_some(()))
    })
    .await?;
    cluster.finish(observer).await
}

#[tokio::test]
async fn deleted_object_is_created_again() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = running_nginx(&cluster, "web").await?;
    let services = cluster.services();
    services.delete("web", &Default::default()).await?;
    eventually("the Service to be created again", || async {
        Ok(services.get_opt("web").await?.map(|_| ()))
    })
    .await?;
    cluster.finish(observer).await
}

#[tokio::test]
async fn without_a_custom_schema_every_manifest_field_is_observed() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let observer = cluster.observer(&[]).await?;
    cluster
        .create_application("plain", json!({"manifest": nginx_manifest("plain")}))
        .await?;
    cluster.wait_for_state("plain", "Running").await?;
    let deployments = cluster.deployments();
    cluster
        .edit(&deployments, "plain", json!({"spec": {"replicas": 5}}))
        .await?;
    eventually("the replicas to be restored", || async {
        let replicas = at(&deployments.get("plain").await?, "/spec/replicas");
        Ok((replicas == json!(1)).then_some(()))
    })
    .await?;
    cluster.finish(observer).await
}

/// How long the API server holds the observer's status write in the tests below.
const HELD: Duration = Duration::from_secs(3);

/// Has the API server hold the first `verb` request on `resource` for `delay`.
fn hold_the_next(cluster: &Cluster, verb: &str, resource: &str, delay: Duration) {
    cluster.emu.faults().inject(
        Fault::new(FaultEffect::Stall { delay, times: 1 })
            .verbs(&[verb])
            .resources(&[resource]),
    );
}

/// Holds the next write to an Application (the observer's status write after `edit`) for
/// [`HELD`] and makes a change by hand to the Deployment's observed image; returns when the
/// write is held, with the time it was seen held (at most a poll after it was).
async fn hold_the_observers_write(cluster: &Cluster) -> anyhow::Result<Instant> {
    let faults = cluster.emu.faults();
    hold_the_next(cluster, "patch", "arbor.dev/applications", HELD);
    cluster
        .edit(
            &cluster.deployments(),
            "web",
            containers("nginx:evil", &["--port=80"]),
        )
        .await?;
    eventually("the observer's status write to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    Ok(Instant::now())
}

/// The Deployment's image in the stored last observed manifest of `web`.
async fn observed_image(cluster: &Cluster) -> anyhow::Result<serde_json::Value> {
    let status = cluster
        .applications()
        .get("web")
        .await?
        .status
        .unwrap_or_default();
    Ok(status
        .last_observed_manifest
        .iter()
        .find(|object| object["kind"] == "Deployment")
        .and_then(|deployment| deployment.pointer("/spec/template/spec/containers/0/image"))
        .cloned()
        .unwrap_or_default())
}

/// The actions the controller started after the first `skip`.
fn actions_after(observer: &Running, key: &AppKey, skip: usize) -> Vec<LifecycleEvent> {
    observer
        .registry
        .stats(key)
        .log
        .into_iter()
        .filter(|event| matches!(event, LifecycleEvent::ActionStarted(_)))
        .skip(skip)
        .collect()
}

/// What a test below changes in Application `web` while its observer's write is held.
enum Change {
    /// A merge patch of the spec.
    Spec(serde_json::Value),
    /// A merge patch of the status, as someone other than the controller writes it.
    Status(serde_json::Value),
}

/// Runs `web`, holds its observer's status write after a change by hand to the Deployment
/// ([`hold_the_observers_write`]) and makes `change` meanwhile. Asserts that the action the
/// change brings starts only once the held write has been answered (the whole hold after it
/// was seen held, less a second for the poll that saw it on a busy machine), then waits until
/// `web` is Running with a new observer; returns the actions the controller started since
/// `change`.
async fn change_while_the_observers_write_is_held(
    cluster: &Cluster,
    change: Change,
) -> anyhow::Result<(Running, Vec<LifecycleEvent>)> {
    let observer = running_nginx(cluster, "web").await?;
    let key = AppKey::new(NAMESPACE, "web");
    let held_at = hold_the_observers_write(cluster).await?;
    let before = actions(&observer, &key);
    let applications = cluster.applications();
    let params = PatchParams::default();
    match change {
        Change::Spec(spec) => {
            applications
                .patch("web", &params, &Patch::Merge(json!({ "spec": spec })))
                .await?
        }
        Change::Status(status) => {
            applications
                .patch_status("web", &params, &Patch::Merge(json!({ "status": status })))
                .await?
        }
    };
    eventually("the action to start", || async {
        Ok((actions(&observer, &key) > before).then_some(()))
    })
    .await?;
    let action_started = held_at.elapsed();
    assert!(
        action_started >= HELD - Duration::from_secs(1),
        "the action started {action_started:?} after the observer's write was held {HELD:?}"
    );
    cluster.wait_for_state("web", "Running").await?;
    eventually("a new observer to start after the action", || async {
        let log = observer.registry.stats(&key).log;
        Ok((log.last() == Some(&LifecycleEvent::ObserverStarted)).then_some(()))
    })
    .await?;
    let actions = actions_after(&observer, &key, before);
    Ok((observer, actions))
}

/// Issue 22 (review): the spec replaced while the observer's status write is held by the API
/// server: the observer is stopped before the update and waited for, so its write (the old
/// spec's objects, drifted) lands first and the final status is the new spec's.
#[tokio::test]
async fn an_observer_write_in_flight_when_the_spec_is_replaced_lands_before_the_new_status()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let mut manifest = nginx_manifest("web");
    manifest[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    let (observer, actions) = change_while_the_observers_write_is_held(
        &cluster,
        Change::Spec(json!({"manifest": manifest})),
    )
    .await?;
    assert_eq!(observed_image(&cluster).await?, json!("nginx:1.26"));
    assert_eq!(
        actions,
        [LifecycleEvent::ActionStarted(ApplicationAction::Update)]
    );
    cluster.finish(observer).await
}

/// Issue 22 (review): an observer that outlived its Application's record of the last apply
/// (here the status lost its observedGeneration, as a restore without status leaves it) while
/// its status write is held by the API server. The controller creates the objects again; it
/// stops that observer first and waits for it, so the held write lands before the create writes
/// anything, and no action follows the create. Before, the observer was aborted when its
/// successor started; the API server still carried its write out, after the create's status,
/// and the controller then "healed" a drift that was already gone.
#[tokio::test]
async fn an_observer_write_in_flight_never_lands_after_the_status_of_the_next_action()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let (observer, actions) = change_while_the_observers_write_is_held(
        &cluster,
        Change::Status(json!({"observedGeneration": null})),
    )
    .await?;
    assert_eq!(
        actions,
        [LifecycleEvent::ActionStarted(ApplicationAction::Create)]
    );
    assert_eq!(observed_image(&cluster).await?, json!("nginx:1.25"));
    let application = cluster.applications().get("web").await?;
    assert_eq!(
        application.status.unwrap_or_default().observed_generation,
        application.metadata.generation
    );
    cluster.finish(observer).await
}

/// Issue 22 (review): an observer stopped while its periodic check waits for a read (here the
/// API server holds its GET of the Deployment 8 s) is not waited for: the read's answer would be
/// thrown away, so the read is dropped and the update that stopped it starts at once, with no
/// observer aborted. Before, the stop waited for the read (and the status write after it) for
/// up to 10 s, and aborted the observer when that ran out.
#[tokio::test]
async fn an_observer_stopped_while_it_reads_is_not_waited_for() -> anyhow::Result<()> {
    const HELD_READ: Duration = Duration::from_secs(8);
    let cluster = Cluster::start().await?;
    let observer = cluster.observer(&[]).await?;
    cluster
        .create_application(
            "web",
            json!({"manifest": nginx_manifest("web"), "observerSchema": nginx_schema("web"),
                "observePeriod": "1s"}),
        )
        .await?;
    cluster.wait_for_state("web", "Running").await?;
    let key = AppKey::new(NAMESPACE, "web");
    let faults = cluster.emu.faults();
    hold_the_next(&cluster, "get", "apps/deployments", HELD_READ);
    eventually("the observer's periodic read to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    let before = actions(&observer, &key);
    let mut manifest = nginx_manifest("web");
    manifest[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    let changed = Instant::now();
    cluster
        .applications()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"manifest": manifest}})),
        )
        .await?;
    eventually("the update to start", || async {
        Ok((actions(&observer, &key) > before).then_some(()))
    })
    .await?;
    let waited = changed.elapsed();
    assert!(
        waited < HELD_READ / 2,
        "the update waited {waited:?} for the stopped observer's read"
    );
    assert_eq!(observer.registry.metrics().observers_aborted.get(), 0);
    cluster.wait_for_state("web", "Running").await?;
    cluster.finish(observer).await
}
