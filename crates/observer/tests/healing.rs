//! Self-healing (seeds/004): an Application of a Deployment and a Service with a custom
//! observer schema; changes made by hand are healed when the schema observes the field, and
//! left alone when it does not.

mod support;

use arbor_observer::{AppKey, LifecycleEvent, Running};
use arbor_proto::v1::WatchDriftRequest;
use arbor_proto::v1::observer_service_client::ObserverServiceClient;
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
