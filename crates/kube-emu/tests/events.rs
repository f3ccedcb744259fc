//! Events are one storage with two views, as in kube-apiserver: an Event written through
//! `events.k8s.io/v1` is a `v1` Event (note/message, regarding/involvedObject,
//! reportingController/reportingComponent, deprecatedCount/count, ...) and the other way
//! round, with one name, uid and resourceVersion, in reads, lists, field selectors, watches,
//! updates and deletes.

mod support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as EventsV1;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use support::{PATIENCE, create, start};

fn from_json<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

fn events_v1(name: &str, regarding: &str) -> EventsV1 {
    from_json(json!({
        "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": regarding, "namespace": "default"},
        "note": format!("pulled an image for {regarding}"),
        "reason": "Pulled", "type": "Normal", "action": "Pull",
        "reportingController": "example.com/puller", "reportingInstance": "puller-1",
        "deprecatedCount": 2,
    }))
}

#[tokio::test]
async fn an_events_k8s_io_event_is_a_core_event_and_a_core_event_is_an_events_k8s_io_event() {
    let (_emu, client) = start().await;
    let new_api: Api<EventsV1> = Api::namespaced(client.clone(), "default");
    let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), "default");

    let written = create(&new_api, &events_v1("web.1", "web")).await;
    let core = core_api.get("web.1").await.expect("visible as a v1 Event");
    assert_eq!(core.message.as_deref(), Some("pulled an image for web"));
    assert_eq!(core.involved_object.name.as_deref(), Some("web"));
    assert_eq!(core.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(
        core.reporting_component.as_deref(),
        Some("example.com/puller")
    );
    assert_eq!(core.reporting_instance.as_deref(), Some("puller-1"));
    assert_eq!(core.count, Some(2));
    assert_eq!(core.reason.as_deref(), Some("Pulled"));
    assert_eq!(core.metadata.uid, written.metadata.uid);
    assert_eq!(
        core.metadata.resource_version,
        written.metadata.resource_version
    );

    // Written the old way, read the new way.
    let old_style: CoreEvent = from_json(json!({
        "metadata": {"name": "db.1"},
        "involvedObject": {"kind": "Pod", "name": "db", "namespace": "default"},
        "message": "started", "reason": "Started", "type": "Normal", "count": 1,
        "source": {"component": "kubelet"},
    }));
    create(&core_api, &old_style).await;
    let new = new_api
        .get("db.1")
        .await
        .expect("visible through events.k8s.io");
    assert_eq!(new.note.as_deref(), Some("started"));
    assert_eq!(new.regarding.and_then(|r| r.name).as_deref(), Some("db"));
    assert_eq!(new.deprecated_count, Some(1));
    assert_eq!(
        new.deprecated_source.and_then(|s| s.component).as_deref(),
        Some("kubelet")
    );

    // Both lists hold both Events; each view's field selector names its own fields.
    assert_eq!(
        new_api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        2
    );
    assert_eq!(
        core_api
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        2
    );
    let by_regarding = new_api
        .list(&ListParams::default().fields("regarding.name=web"))
        .await
        .expect("selected by regarding.name");
    assert_eq!(by_regarding.items.len(), 1);
    assert_eq!(
        by_regarding.items[0].metadata.name.as_deref(),
        Some("web.1")
    );
    let by_involved = core_api
        .list(&ListParams::default().fields("involvedObject.name=db"))
        .await
        .expect("selected by involvedObject.name");
    assert_eq!(by_involved.items.len(), 1);
    assert_eq!(by_involved.items[0].metadata.name.as_deref(), Some("db.1"));
}

#[tokio::test]
async fn changes_through_one_view_are_watched_and_read_through_the_other() {
    let (_emu, client) = start().await;
    let new_api: Api<EventsV1> = Api::namespaced(client.clone(), "default");
    let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let listed = core_api.list(&ListParams::default()).await.expect("list");
    let revision = listed.metadata.resource_version.expect("a list revision");
    let mut watch = core_api
        .watch(&WatchParams::default(), &revision)
        .await
        .expect("watch")
        .boxed();

    create(&new_api, &events_v1("web.2", "web")).await;
    // The series a recorder adds when the same Event happens again, as a merge patch of the
    // new API; the old view's count and message follow.
    let patched = new_api
        .patch(
            "web.2",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 3, "lastObservedTime": "2026-01-01T00:05:00.000000Z"},
                                 "note": "pulled again", "deprecatedCount": 3}),
            ),
        )
        .await
        .expect("patched through events.k8s.io");
    assert_eq!(patched.note.as_deref(), Some("pulled again"));

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(PATIENCE, watch.try_next())
            .await
            .expect("a watch event in time")
            .expect("the watch goes on")
            .expect("the stream is open");
        match event {
            WatchEvent::Added(event) | WatchEvent::Modified(event) => seen.push(event),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen[0].message.as_deref(), Some("pulled an image for web"));
    assert_eq!(seen[1].message.as_deref(), Some("pulled again"));
    assert_eq!(seen[1].count, Some(3));
    assert_eq!(seen[1].series.as_ref().and_then(|s| s.count), Some(3));

    // A replace through the old view keeps the new view's fields in step.
    let mut core = core_api.get("web.2").await.expect("get");
    core.message = Some("replaced".into());
    core_api
        .replace("web.2", &PostParams::default(), &core)
        .await
        .expect("replaced through v1");
    let new = new_api.get("web.2").await.expect("get");
    assert_eq!(new.note.as_deref(), Some("replaced"));
    assert_eq!(
        new.reporting_controller.as_deref(),
        Some("example.com/puller")
    );

    // Deleted through one view, gone from both.
    new_api
        .delete("web.2", &DeleteParams::default())
        .await
        .expect("deleted through events.k8s.io");
    assert!(core_api.get_opt("web.2").await.expect("get").is_none());
}
