//! seeds/000's examples through a running arbor-gitsync: a ClusterGitTrack follows the
//! foo-corp example over smart HTTP, and the repository changes commit by commit.

use arbor_e2e::eventually;
use arbor_e2e::system::{ServedRepo, WAIT, cluster_source, example, start, sync_to};
use arbor_testkit::cluster::apply;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const QUOTA_VIEWER: &str = "cluster/quota-viewer-clusterrole.yaml";

fn quota_viewer() -> &'static str {
    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: quota-viewer\nrules:\n  - apiGroups: [\"\"]\n    resources: [resourcequotas]\n    verbs: [get, list, watch]\n"
}

async fn exists<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.expect("the API answers").is_some()
}

async fn gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, WAIT, || async {
        Ok((!exists(api, name).await).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_000_examples_create_update_delete_only_what_carries_the_label() {
    let system = start(&["gitsync"]).await.unwrap();
    let repo = ServedRepo::new("foo-corp", Some(&example("foo-corp"))).unwrap();
    let client = system.client.clone();
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    let prod_roles = Api::<Role>::namespaced(client.clone(), "shipping-prod");

    // pod-accountant exists on the cluster but not in git: never deleted or altered.
    let pod_accountant = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "pod-accountant"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    });
    apply(&client, &pod_accountant, None).await.unwrap();
    apply(
        &client,
        &json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "ClusterGitTrack",
                "metadata": {"name": "foo-corp"}, "spec": repo.source_spec("Hierarchical")}),
        None,
    )
    .await
    .unwrap();
    sync_to(
        &system,
        cluster_source("foo-corp"),
        &repo.repo.head().unwrap(),
    )
    .await
    .unwrap();
    assert!(exists(&cluster_roles, "pod-creator").await);

    // Someone adds quota-viewer to git: Arbor creates it, with the management label.
    let added = repo
        .repo
        .commit_file(QUOTA_VIEWER, quota_viewer(), "Add quota-viewer")
        .unwrap();
    sync_to(&system, cluster_source("foo-corp"), &added)
        .await
        .unwrap();
    let created = cluster_roles.get("quota-viewer").await.unwrap();
    assert_eq!(
        created
            .metadata
            .labels
            .unwrap_or_default()
            .get("arbor.dev/managed")
            .map(String::as_str),
        Some("enabled")
    );

    // secret-admin is created by someone else, without the label.
    let secret_admin = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "secret-admin", "namespace": "shipping-prod"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}],
    });
    apply(&client, &secret_admin, None).await.unwrap();

    // Someone deletes quota-viewer from git: Arbor removes it from the cluster.
    repo.repo.remove(QUOTA_VIEWER).unwrap();
    let removed = repo.repo.commit_all("Remove quota-viewer").unwrap();
    sync_to(&system, cluster_source("foo-corp"), &removed)
        .await
        .unwrap();
    gone(&cluster_roles, "quota-viewer", "quota-viewer deleted").await;

    // Neither the unlabelled Role nor the unlabelled ClusterRole was touched by that round.
    assert!(
        exists(&prod_roles, "secret-admin").await,
        "secret-admin has no label yet"
    );
    let untouched = cluster_roles.get("pod-accountant").await.unwrap();
    assert_eq!(untouched.rules.unwrap_or_default()[0].verbs, ["get"]);

    // The label is added to secret-admin: it is not declared, so Arbor deletes it.
    let label = json!({"metadata": {"labels": {"arbor.dev/managed": "enabled"}}});
    prod_roles
        .patch(
            "secret-admin",
            &PatchParams::default(),
            &Patch::Merge(&label),
        )
        .await
        .unwrap();
    sync_to(&system, cluster_source("foo-corp"), &removed)
        .await
        .unwrap();
    gone(
        &prod_roles,
        "secret-admin",
        "the labelled secret-admin deleted",
    )
    .await;
    assert!(exists(&cluster_roles, "pod-accountant").await);
}
