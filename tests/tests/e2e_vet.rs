//! `arborctl vet --kubeconfig`: a hierarchical repository that uses a kind it does not declare
//! by a CustomResourceDefinition is placed by the scope the cluster serves the kind with;
//! offline, the same repository is refused for the unknown scope.

use arbor_e2e::system::start;
use serde_json::json;

fn write(root: &std::path::Path, path: &str, object: &serde_json::Value) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, object.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vet_with_a_kubeconfig_knows_the_scope_of_every_kind_the_cluster_serves() {
    // No controller: the API server alone (an existing cluster too) answers discovery.
    let env = start(&[]).await.unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    });
    arbor_testkit::cluster::apply(&env.client, &crd, None)
        .await
        .unwrap();

    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(
        root,
        "system/repo.yaml",
        &json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "Repo", "metadata": {"name": "repo"}}),
    );
    write(
        root,
        "system/sync.yaml",
        &json!({
            "apiVersion": "nomos.dev/v1alpha1", "kind": "Sync", "metadata": {"name": "widgets"},
            "spec": {"groups": [{"group": "example.com", "kinds": [{"kind": "Widget", "versions": [{"version": "v1"}]}]}]},
        }),
    );
    write(
        root,
        "namespaces/team/namespace.yaml",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    );
    write(
        root,
        "namespaces/team/widget.yaml",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    );

    let offline = arbor_e2e::arborctl(["vet".as_ref(), root.as_os_str()]).unwrap();
    assert!(!offline.success, "{}{}", offline.stdout, offline.stderr);
    assert!(
        offline.stdout.contains("the scope of kind"),
        "{}",
        offline.stdout
    );

    let kubeconfig = &env.kubeconfig;
    let against_cluster = arbor_e2e::arborctl([
        "vet".as_ref(),
        root.as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ])
    .unwrap();
    assert!(
        against_cluster.success,
        "{}{}",
        against_cluster.stdout, against_cluster.stderr
    );
    assert!(
        against_cluster.stdout.contains("valid"),
        "{}",
        against_cluster.stdout
    );

    // For scripts: one JSON document either way, and the exit code still says which.
    let offline = arbor_e2e::arborctl([
        "vet".as_ref(),
        root.as_os_str(),
        "-o".as_ref(),
        "json".as_ref(),
    ])
    .unwrap();
    assert!(!offline.success, "{}{}", offline.stdout, offline.stderr);
    let document: serde_json::Value = serde_json::from_str(&offline.stdout).unwrap();
    assert_eq!(document["valid"], json!(false), "{document}");
    let errors = document["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|error| error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the scope of kind")
            && error["path"]
                .as_str()
                .is_some_and(|path| path.ends_with("widget.yaml"))),
        "{document}"
    );
    let against_cluster = arbor_e2e::arborctl([
        "vet".as_ref(),
        root.as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "-o".as_ref(),
        "yaml".as_ref(),
    ])
    .unwrap();
    assert!(
        against_cluster.success,
        "{}{}",
        against_cluster.stdout, against_cluster.stderr
    );
    assert!(
        against_cluster.stdout.contains("valid: true")
            && against_cluster.stdout.contains("errors: []"),
        "{}",
        against_cluster.stdout
    );
}
