//! The suite's "existing cluster" path (`ARBOR_E2E_KUBECONFIG`, `make e2e-cluster`) on an
//! `arbor-kube-emu` started apart, as a kind cluster would be: a system started on it installs
//! the committed CRDs, runs the controllers against its kubeconfig, and when it is dropped
//! leaves the cluster as it found it, what was there before included.
//!
//! This test brings its own API server whichever source the run uses.

use std::net::Ipv4Addr;

use arbor_e2e::eventually;
use arbor_e2e::system::{TestSystem, WAIT, bin_dir, example};
use arbor_testkit::cluster::{apply, apply_yaml, client_for, ensure_namespace};
use arbor_testkit::source::{ClusterSource, ExistingCluster};
use arbor_testkit::system::WEBHOOK_CONFIGURATION;
use arbor_testkit::{ProcessSpec, SystemConfig};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::json;

fn cluster_role(name: &str) -> serde_json::Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name},
           "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_on_an_existing_cluster_removes_what_its_test_made_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let bins = bin_dir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "e2e-cluster-admin,arbor-admin,arbor-admin,\"system:masters\"\n",
    )
    .unwrap();
    let mut emulator = ProcessSpec::new(
        "arbor-kube-emu",
        bins.join("arbor-kube-emu"),
        dir.path().join("kube-emu.log"),
    )
    .args(["--tls", "--kubeconfig-out"])
    .arg(&kubeconfig)
    .arg("--token-file")
    .arg(&tokens)
    .start()
    .unwrap();
    emulator.wait_for_line("listening on", WAIT).await.unwrap();
    let client = client_for(&kubeconfig).await.unwrap();

    // What the cluster held before the test: someone's namespace and ClusterRole.
    ensure_namespace(&client, "users-own").await.unwrap();
    apply(&client, &cluster_role("users-own-role"), None)
        .await
        .unwrap();

    let mut config = SystemConfig::new(dir.path().join("system"))
        .unwrap()
        .only(&["gitsync", "hierarchy", "webhook"]);
    config.bin_dir = bins;
    config.hierarchy_config = Some(example("hierarchy-config.yaml"));
    config.startup_timeout = WAIT;
    config.cluster = ClusterSource::Existing(ExistingCluster {
        kubeconfig: kubeconfig.clone(),
        webhook_host: Some(Ipv4Addr::LOCALHOST.into()),
    });
    let system = TestSystem::start(config, tempfile::tempdir().unwrap())
        .await
        .unwrap();
    assert!(system.emulator.is_none(), "no emulator of its own");
    assert_eq!(system.kubeconfig, kubeconfig);

    // The test's objects: a namespace tree whose SubNamespaces carry arbor-hierarchy's
    // finalizer, and a ClusterRole; the system registered its webhook.
    let tree = std::fs::read_to_string(example("tree.yaml")).unwrap();
    apply_yaml(&system.client, "tree.yaml", &tree, None)
        .await
        .unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    eventually("team-a-dev made by arbor-hierarchy", WAIT, || async {
        Ok(namespaces.get_opt("team-a-dev").await.ok().flatten())
    })
    .await
    .unwrap();
    apply(&system.client, &cluster_role("made-by-the-test"), None)
        .await
        .unwrap();
    let registrations = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    assert!(
        registrations
            .get_opt(WEBHOOK_CONFIGURATION)
            .await
            .unwrap()
            .is_some()
    );

    drop(system);

    for gone in ["team-template", "team-a", "team-a-dev", "team-a-prod"] {
        assert!(
            namespaces.get_opt(gone).await.unwrap().is_none(),
            "namespace {gone} is left"
        );
    }
    for kept in ["users-own", "arbor-system"] {
        assert!(
            namespaces.get_opt(kept).await.unwrap().is_some(),
            "namespace {kept} was deleted"
        );
    }
    let roles = Api::<ClusterRole>::all(client.clone());
    assert!(roles.get_opt("made-by-the-test").await.unwrap().is_none());
    assert!(roles.get_opt("users-own-role").await.unwrap().is_some());
    assert!(
        registrations
            .get_opt(WEBHOOK_CONFIGURATION)
            .await
            .unwrap()
            .is_none(),
        "the registration of a webhook that no longer runs is left"
    );
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(
        crds.get_opt("gittracks.arbor.dev").await.unwrap().is_some(),
        "Arbor's CRDs stay installed"
    );
}
