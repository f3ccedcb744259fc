//! A controller killed (SIGKILL) in the middle of a sync and started again converges: every
//! declared object exists once, managed, with one GitTrackObject each; nothing is lost or
//! duplicated.

use arbor_api::GitTrackObject;
use arbor_e2e::eventually;
use arbor_e2e::system::{ServedRepo, WAIT, namespaced_source, start, sync_to};
use arbor_testkit::cluster::{apply, ensure_namespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

const NAMESPACE: &str = "bulk";
const OBJECTS: usize = 40;

fn config_map(index: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{index:02}\n  namespace: {NAMESPACE}\ndata:\n  index: \"{index}\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitsync_killed_mid_sync_converges_after_restart_with_nothing_lost_or_duplicated() {
    let mut system = start(&["gitsync"]).await.unwrap();
    let client = system.client.clone();
    let repo = ServedRepo::new("bulk", None).unwrap();
    for index in 0..OBJECTS {
        repo.repo
            .write(&format!("settings/{index:02}.yaml"), &config_map(index))
            .unwrap();
    }
    let head = repo.repo.commit_all("Forty ConfigMaps").unwrap();
    ensure_namespace(&client, NAMESPACE).await.unwrap();
    apply(
        &client,
        &json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": "bulk", "namespace": NAMESPACE},
                "spec": repo.source_spec("Flat")}),
        None,
    )
    .await
    .unwrap();

    // Kill the controller as soon as the sync has started writing.
    let objects = Api::<GitTrackObject>::namespaced(client.clone(), NAMESPACE);
    eventually("the sync to start writing", WAIT, || async {
        let written = objects
            .list(&ListParams::default())
            .await
            .map(|list| list.items.len());
        Ok(written.ok().filter(|written| *written > 0))
    })
    .await
    .unwrap();
    let gitsync = system.system.gitsync.as_mut().unwrap();
    gitsync.process.kill().unwrap();
    gitsync.restart().await.unwrap();

    sync_to(&system, namespaced_source(NAMESPACE, "bulk"), &head)
        .await
        .unwrap();
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
    let managed = ListParams::default().labels("arbor.dev/managed=enabled");
    let synced = eventually("every ConfigMap applied", WAIT, || async {
        let list = config_maps.list(&managed).await.ok();
        Ok(list.filter(|list| list.items.len() >= OBJECTS))
    })
    .await
    .unwrap();
    let mut names: Vec<String> = synced
        .items
        .iter()
        .filter_map(|cm| cm.metadata.name.clone())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), OBJECTS, "{names:?}");
    assert_eq!(synced.items.len(), OBJECTS);
    for config_map in &synced.items {
        let name = config_map.metadata.name.as_deref().unwrap_or_default();
        let index: usize = name.trim_start_matches("settings-").parse().unwrap();
        let data = config_map.data.clone().unwrap_or_default();
        assert_eq!(data.get("index"), Some(&index.to_string()), "{name}");
    }
    let tracked = objects.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        tracked.items.len(),
        OBJECTS,
        "one GitTrackObject per declared object"
    );
}
