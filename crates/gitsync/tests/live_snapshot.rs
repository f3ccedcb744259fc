//! A round's snapshot of the live objects: each kind listed in pages, every object kept
//! without its managedFields.

use std::collections::BTreeMap;

use arbor_gitsync::apply::Discovery;
use arbor_gitsync::controller::live_objects::Snapshot;
use arbor_kube_emu::KubeEmu;
use arbor_policy::object::{GroupVersionKind, ObjectKey};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// More than two pages of the snapshot's list size.
const OBJECTS: usize = 1_100;

#[tokio::test]
async fn a_kind_is_listed_in_pages_and_kept_without_managed_fields() -> anyhow::Result<()> {
    let emu = KubeEmu::start().await?;
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}}))?,
        )
        .await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    for index in 0..OBJECTS {
        let name = format!("cm-{index}");
        // Server-side apply, so each object carries managedFields.
        config_maps
            .patch(
                &name,
                &PatchParams::apply("bench"),
                &Patch::Apply(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "team"},
                    "data": {"value": index.to_string()},
                })),
            )
            .await?;
    }
    let discovery = Discovery::new(client);
    let gvk = GroupVersionKind::from_api_version("v1", "ConfigMap");
    let served = discovery.served(&gvk).await?;
    emu.requests().reset();

    let snapshot =
        Snapshot::read(&discovery, &BTreeMap::from([(gvk, served)]), Some("team")).await?;

    assert_eq!(snapshot.iter().count(), OBJECTS);
    let lists = emu
        .requests()
        .snapshot()
        .into_iter()
        .filter(|record| record.verb == "list" && record.resource == "configmaps")
        .count();
    assert_eq!(
        lists,
        OBJECTS.div_ceil(500),
        "one list request per page of 500"
    );
    let key = ObjectKey::of(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm-7", "namespace": "team"},
    }))
    .map_err(|missing| anyhow::anyhow!("{missing:?}"))?;
    let live = snapshot.get(&key).expect("cm-7 is in the snapshot");
    assert_eq!(live["data"]["value"], "7");
    assert!(live["metadata"].get("managedFields").is_none());
    Ok(())
}
