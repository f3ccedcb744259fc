//! Self-healing through a running arbor-observer: the example Application is applied, an
//! observed field is edited by someone else, and the observer puts it back.

use arbor_api::{Application, ApplicationState};
use arbor_e2e::eventually;
use arbor_e2e::system::{WAIT, example, start};
use arbor_testkit::cluster::{apply_yaml, ensure_namespace};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_observed_field_is_restored() {
    let system = start(&["observer"]).await.unwrap();
    let client = system.client.clone();
    ensure_namespace(&client, "shop").await.unwrap();
    let text = std::fs::read_to_string(example("application.yaml")).unwrap();
    apply_yaml(&client, "application.yaml", &text, None)
        .await
        .unwrap();

    let applications = Api::<Application>::namespaced(client.clone(), "shop");
    eventually("the Application Running", WAIT, || async {
        let state = applications
            .get_opt("web")
            .await
            .ok()
            .flatten()
            .and_then(|application| application.status)
            .map(|status| status.state);
        Ok((state == Some(ApplicationState::Running)).then_some(()))
    })
    .await
    .unwrap();

    let deployments = Api::<Deployment>::namespaced(client.clone(), "shop");
    let replicas = |deployment: &Deployment| deployment.spec.replicas;
    assert_eq!(replicas(&deployments.get("nginx").await.unwrap()), Some(2));

    // Someone scales the Deployment by hand: replicas is an observed field.
    let edit = json!({"spec": {"replicas": 5}});
    deployments
        .patch(
            "nginx",
            &PatchParams {
                field_manager: Some("someone-else".to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&edit),
        )
        .await
        .unwrap();
    eventually("replicas restored to 2", WAIT, || async {
        let deployment = deployments.get("nginx").await.ok();
        Ok(deployment
            .filter(|deployment| replicas(deployment) == Some(2))
            .map(drop))
    })
    .await
    .unwrap();
}
