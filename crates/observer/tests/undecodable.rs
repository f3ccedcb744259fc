//! Issue 16 item 12 for the observer: an Application that does not decode (its `manifest` a
//! string) sits beside a good one; the good one is observed as usual, and the bad one is
//! reported with an Event naming the field.
//!
//! The bad Application is stored through a loosened CRD
//! ([`arbor_testkit::crds::loosen_crd_schema`]): a real API server stores such objects too
//! whenever the CRD's schema allows it (an older or hand-edited CRD), and the test does not rely
//! on the emulator being lenient.

mod support;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;
use support::{Cluster, NAMESPACE, eventually, nginx_manifest, nginx_schema};

#[tokio::test]
async fn an_application_that_does_not_decode_is_reported_and_the_others_are_observed()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    arbor_testkit::crds::loosen_crd_schema(&cluster.client, "applications.arbor.dev").await?;
    let resource = ApiResource::erase::<arbor_api::Application>(&());
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), NAMESPACE, &resource);
    let broken: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "arbor.dev/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "broken", "namespace": NAMESPACE},
        "spec": {"manifest": "not a list"},
    }))?;
    dynamic.create(&PostParams::default(), &broken).await?;
    let _observer = cluster.observer(&[]).await?;
    cluster
        .create_application(
            "web",
            json!({"manifest": nginx_manifest("web"), "observerSchema": nginx_schema("web")}),
        )
        .await?;
    cluster.wait_for_state("web", "Running").await?;

    let events: Api<Event> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let note = eventually("an Undecodable event on broken", || async {
        let list = events.list(&Default::default()).await?;
        Ok(list.items.into_iter().find_map(|event| {
            (event.reason.as_deref() == Some("Undecodable")
                && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken"))
            .then_some(event.note)
            .flatten()
        }))
    })
    .await?;
    assert!(note.contains("spec.manifest"), "{note}");
    Ok(())
}
