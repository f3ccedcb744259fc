//! seeds/001's propagation through a running arbor-hierarchy: the example tree, a Secret of
//! the template annotated propagate=update copied down, and its copies deleted with it.

use arbor_e2e::system::{WAIT, example, start};
use arbor_testkit::cluster::{apply_yaml, eventually};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

const SECRET: &str = "registry-credentials";
const COPIES: [&str; 3] = ["team-a", "team-a-dev", "team-a-prod"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_propagate_update_secret_reaches_sub_namespaces_follows_changes_and_goes_with_its_source()
{
    let system = start(&["hierarchy"]).await.unwrap();
    let client = system.client.clone();
    let tree = std::fs::read_to_string(example("tree.yaml")).unwrap();
    apply_yaml(&client, "tree.yaml", &tree, None).await.unwrap();

    // The SubNamespaces become namespaces whose parent is team-a.
    let namespaces = Api::<Namespace>::all(client.clone());
    for child in ["team-a-dev", "team-a-prod"] {
        let namespace = eventually(&format!("namespace {child}"), WAIT, || async {
            Ok(namespaces.get_opt(child).await.ok().flatten())
        })
        .await
        .unwrap();
        let labels = namespace.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("arbor.dev/parent").map(String::as_str),
            Some("team-a"),
            "{child}"
        );
    }

    // The template's Secret is copied into the instance and on down the tree.
    for namespace in COPIES {
        let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
        eventually(
            &format!("{SECRET} copied into {namespace}"),
            WAIT,
            || async { Ok(secrets.get_opt(SECRET).await.ok().flatten().map(drop)) },
        )
        .await
        .unwrap();
    }

    // propagate=update: a change of the source reaches the copies.
    let source = Api::<Secret>::namespaced(client.clone(), "team-template");
    // `data` rather than `stringData`: the change must be in the stored object as it is.
    let change = json!({"data": {"username": "dGVhbS1hLXJlbmFtZWQ="}});
    source
        .patch(SECRET, &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    let dev = Api::<Secret>::namespaced(client.clone(), "team-a-dev");
    eventually(
        "the changed Secret copied into team-a-dev",
        WAIT,
        || async {
            let copy = dev.get_opt(SECRET).await.ok().flatten();
            let username = copy
                .and_then(|secret| secret.data)
                .and_then(|data| data.get("username").map(|value| value.0.clone()));
            Ok((username.as_deref() == Some(b"team-a-renamed".as_slice())).then_some(()))
        },
    )
    .await
    .unwrap();

    // Deleting the source deletes every copy.
    source
        .delete(SECRET, &DeleteParams::default())
        .await
        .unwrap();
    for namespace in COPIES {
        let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
        eventually(
            &format!("the copy in {namespace} deleted"),
            WAIT,
            || async {
                Ok(secrets
                    .get_opt(SECRET)
                    .await
                    .ok()
                    .flatten()
                    .is_none()
                    .then_some(()))
            },
        )
        .await
        .unwrap();
    }
}
