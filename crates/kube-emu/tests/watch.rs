//! Watches as kube-rs uses them: reflectors, resuming from a resourceVersion, 410 Gone and
//! relisting, bookmarks, selectors.

mod support;

use std::time::Duration;

use arbor_kube_emu::KubeEmu;
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use support::{PATIENCE, config_map, create, start, start_with};

/// Waits (bounded) until `condition` holds.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next item of a stream, bounded.
async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
}

fn data_value(cm: &ConfigMap) -> Option<String> {
    cm.data.as_ref()?.get("value").cloned()
}

async fn reflector_follows_changes(config: watcher::Config) {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api.clone(), config)).applied_objects();
    let drain = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(PATIENCE, reader.wait_until_ready())
        .await
        .expect("ready in time")
        .expect("ready");

    create(&api, &config_map("followed", &[])).await;
    let key = reflector::ObjectRef::new("followed").within("default");
    eventually("the create", || reader.get(&key).is_some()).await;
    api.patch(
        "followed",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "2"}})),
    )
    .await
    .expect("updated");
    eventually("the update", || {
        reader.get(&key).and_then(|cm| data_value(&cm)) == Some("2".into())
    })
    .await;
    api.delete("followed", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("the delete", || reader.get(&key).is_none()).await;
    drain.abort();
    emu.shutdown().await;
}

#[tokio::test]
async fn a_reflector_follows_creates_updates_and_deletes() {
    reflector_follows_changes(watcher::Config::default()).await;
}

#[tokio::test]
async fn a_streaming_list_reflector_follows_changes() {
    reflector_follows_changes(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test]
async fn a_watch_resumes_from_a_resource_version() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = create(&api, &config_map("a", &[])).await;
    let from = first.metadata.resource_version.expect("rv");
    create(&api, &config_map("b", &[])).await;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "2"}})),
    )
    .await
    .expect("updated");
    api.delete("b", &DeleteParams::default())
        .await
        .expect("deleted");

    let mut events = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watching")
        .boxed();
    match next(&mut events).await.expect("event") {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b added, got {other:?}"),
    }
    match next(&mut events).await.expect("event") {
        WatchEvent::Modified(cm) => assert_eq!(data_value(&cm).as_deref(), Some("2")),
        other => panic!("expected a modified, got {other:?}"),
    }
    match next(&mut events).await.expect("event") {
        WatchEvent::Deleted(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b deleted, got {other:?}"),
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn a_watch_from_before_the_history_window_gets_410_gone() {
    let (emu, client) = start_with(KubeEmu::builder().history_window(4)).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = create(&api, &config_map("a", &[])).await;
    for value in 1..10 {
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": value.to_string()}})),
        )
        .await
        .expect("updated");
    }
    let from = first.metadata.resource_version.expect("rv");
    let mut events = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watching")
        .boxed();
    match next(&mut events).await.expect("event") {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn after_a_410_the_watcher_relists() {
    let (emu, client) = start_with(KubeEmu::builder().history_window(8)).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    create(&config_maps, &config_map("watched", &[])).await;
    // Short server-side timeouts make the watcher reconnect from its last resourceVersion.
    let config = watcher::Config::default().timeout(1).disable_bookmarks();
    let mut events = watcher(config_maps.clone(), config).boxed();
    let mut inits = 0;
    let mut churned = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while inits < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher did not relist"
        );
        match tokio::time::timeout(PATIENCE, events.next())
            .await
            .expect("an event in time")
        {
            Some(Ok(watcher::Event::Init)) => inits += 1,
            Some(Ok(watcher::Event::InitDone)) if !churned => {
                // Other kinds' writes push the watcher's resourceVersion out of the window.
                for index in 0..20 {
                    let secret = Secret {
                        metadata: ObjectMeta {
                            name: Some(format!("churn-{index}")),
                            ..ObjectMeta::default()
                        },
                        ..Secret::default()
                    };
                    create(&secrets, &secret).await;
                }
                churned = true;
            }
            Some(_) => {}
            None => panic!("the watcher ended"),
        }
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn bookmarks_carry_the_latest_resource_version() {
    let (emu, client) =
        start_with(KubeEmu::builder().bookmark_interval(Duration::from_millis(100))).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let start = create(&config_maps, &config_map("a", &[])).await;
    let mut events = config_maps
        .watch(
            &WatchParams::default(),
            &start.metadata.resource_version.expect("rv"),
        )
        .await
        .expect("watching")
        .boxed();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("unrelated".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    let written: u64 = create(&secrets, &secret)
        .await
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("numeric");
    loop {
        match next(&mut events).await.expect("event") {
            WatchEvent::Bookmark(bookmark) => {
                let version: u64 = bookmark.metadata.resource_version.parse().expect("numeric");
                if version >= written {
                    break;
                }
            }
            other => panic!("only bookmarks were expected, got {other:?}"),
        }
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn objects_entering_and_leaving_a_selector_are_added_and_deleted() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = create(&api, &config_map("moving", &[("app", "db")])).await;
    let params = WatchParams::default().labels("app=web").disable_bookmarks();
    let mut events = api
        .watch(&params, &created.metadata.resource_version.expect("rv"))
        .await
        .expect("watching")
        .boxed();
    let relabel = |app: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                "moving",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": app}}})),
            )
            .await
            .expect("relabelled")
        }
    };
    relabel("web").await;
    assert!(matches!(
        next(&mut events).await.expect("event"),
        WatchEvent::Added(_)
    ));
    api.patch(
        "moving",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "2"}})),
    )
    .await
    .expect("updated");
    assert!(matches!(
        next(&mut events).await.expect("event"),
        WatchEvent::Modified(_)
    ));
    relabel("other").await;
    assert!(matches!(
        next(&mut events).await.expect("event"),
        WatchEvent::Deleted(_)
    ));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_watch_ends_at_its_timeout() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let params = WatchParams::default().timeout(1).disable_bookmarks();
    let events = api.watch(&params, "0").await.expect("watching");
    let remaining: Vec<_> = tokio::time::timeout(PATIENCE, events.try_collect::<Vec<_>>())
        .await
        .expect("the watch ends by itself")
        .expect("no errors");
    assert!(remaining.is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn metadata_watches_get_partial_objects() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = create(&api, &config_map("meta", &[])).await;
    let listed = api
        .list_metadata(&Default::default())
        .await
        .expect("listed");
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("meta"));
    let mut events = api
        .watch_metadata(
            &WatchParams::default().disable_bookmarks(),
            &created.metadata.resource_version.expect("rv"),
        )
        .await
        .expect("watching")
        .boxed();
    api.patch(
        "meta",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .expect("updated");
    match next(&mut events).await.expect("event") {
        WatchEvent::Modified(partial) => {
            assert_eq!(partial.metadata.labels.expect("labels")["a"], "b");
        }
        other => panic!("expected a modification, got {other:?}"),
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let events = api
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .expect("watching");
    let collected = tokio::spawn(events.collect::<Vec<_>>());
    tokio::time::timeout(PATIENCE, emu.shutdown())
        .await
        .expect("shutdown completes");
    tokio::time::timeout(PATIENCE, collected)
        .await
        .expect("the watch ends")
        .expect("joined");
}
