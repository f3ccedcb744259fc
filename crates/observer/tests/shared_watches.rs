//! Observers share one watch per kind and namespace: each subscriber hears about its own
//! object only, a late subscriber gets the current state first, and the watch ends with its
//! last subscriber.

mod support;

use std::time::Duration;

use arbor_observer::resolve::Resolver;
use arbor_observer::shared_watch::{ObjectEvent, SharedWatches};
use arbor_policy::observe::ResourceId;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use support::{Cluster, NAMESPACE, PATIENCE};
use tokio::sync::mpsc::UnboundedReceiver;

fn config_map_id(namespace: &str, name: &str) -> ResourceId {
    ResourceId {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

async fn create_config_map(client: &kube::Client, namespace: &str, name: &str, mode: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let object: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace}, "data": {"mode": mode},
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

async fn next(events: &mut UnboundedReceiver<ObjectEvent>) -> ObjectEvent {
    tokio::time::timeout(PATIENCE.timeout, events.recv())
        .await
        .expect("an event in time")
        .expect("the subscription is open")
}

fn mode(event: &ObjectEvent) -> Option<String> {
    let object = match event {
        ObjectEvent::Listed(object) => object.as_deref(),
        ObjectEvent::Applied(object) => Some(&**object),
        ObjectEvent::Deleted => None,
    }?;
    object["data"]["mode"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn one_watch_per_kind_and_namespace_tells_each_subscriber_its_own_object() {
    let cluster = Cluster::start().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
        )
        .await
        .unwrap();
    let watches = SharedWatches::new(Resolver::new(cluster.client.clone()));

    let (first, mut first_events) = watches
        .subscribe(&config_map_id(NAMESPACE, "first"))
        .await
        .unwrap();
    let (second, mut second_events) = watches
        .subscribe(&config_map_id(NAMESPACE, "second"))
        .await
        .unwrap();
    let (elsewhere, _elsewhere_events) = watches
        .subscribe(&config_map_id("other", "first"))
        .await
        .unwrap();
    assert_eq!(watches.watch_count(), 2, "one watch per kind and namespace");

    // Neither exists yet: the initial list says so.
    assert!(matches!(
        next(&mut first_events).await,
        ObjectEvent::Listed(None)
    ));
    assert!(matches!(
        next(&mut second_events).await,
        ObjectEvent::Listed(None)
    ));

    create_config_map(&cluster.client, NAMESPACE, "first", "a").await;
    let applied = next(&mut first_events).await;
    assert!(matches!(applied, ObjectEvent::Applied(_)));
    assert_eq!(mode(&applied).as_deref(), Some("a"));
    let applied_object = match &applied {
        ObjectEvent::Applied(object) => object.clone(),
        _ => unreachable!(),
    };
    assert!(
        applied_object["metadata"].get("managedFields").is_none(),
        "kept objects carry no managedFields"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        second_events.try_recv().is_err(),
        "a subscriber hears nothing of other objects"
    );

    // A late subscriber gets the current state before anything else.
    let (late, mut late_events) = watches
        .subscribe(&config_map_id(NAMESPACE, "first"))
        .await
        .unwrap();
    assert_eq!(watches.watch_count(), 2);
    let listed = next(&mut late_events).await;
    assert!(matches!(listed, ObjectEvent::Listed(Some(_))));
    assert_eq!(mode(&listed).as_deref(), Some("a"));

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    config_maps
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    assert!(matches!(
        next(&mut first_events).await,
        ObjectEvent::Deleted
    ));
    assert!(matches!(next(&mut late_events).await, ObjectEvent::Deleted));

    drop(elsewhere);
    assert_eq!(
        watches.watch_count(),
        1,
        "the watch ends with its last subscriber"
    );
    drop((first, second, late));
    assert_eq!(watches.watch_count(), 0);
}
