//! issue #19 item 2: arborctl reaches the components with nothing but a kubeconfig, through
//! the API server's port-forward to a ready pod, verifying the server certificate for the
//! Service's DNS name and presenting the operators' certificate from the chart's Secret.
//!
//! Tested through arbor-kube-emu serving `pods/portforward` (WebSocket, as kube-apiserver and
//! the kubelet speak it) to the real controller processes, which the emulator's pods stand
//! for ([`arbor_testkit::release`]): `status` (gitsync), `tree` (hierarchy), `drift`
//! (observer) and `review` (the webhook's PolicyService). No address, TLS file or `ARBOR_*`
//! variable is given.

use std::path::Path;

use arbor_e2e::Run;
use arbor_e2e::system::start;
use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::authz::DenyRule;
use arbor_testkit::release;
use arbor_testkit::system::SYSTEM_NAMESPACE;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};

/// Runs arborctl with `args` and `ARBORCONFIG` set to `config`, off the test's runtime
/// (the emulator of some tests serves from it).
async fn arborctl(config: &Path, args: &[&str]) -> Run {
    let path = arbor_e2e::binary("arborctl", "arborctl").unwrap();
    let config = config.to_owned();
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(&path)
            .args(&args)
            .env("ARBORCONFIG", config)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
            .into()
    })
    .await
    .unwrap()
}

/// `run` failed, and its stderr says each of `expected`.
fn assert_fails_saying(run: &Run, expected: &[&str]) {
    assert!(!run.success, "succeeded: {}", run.stdout);
    for expected in expected {
        assert!(run.stderr.contains(expected), "{}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arborctl_reaches_the_controllers_through_the_port_forward_with_a_kubeconfig_alone() {
    let system = start(&["gitsync", "hierarchy", "observer", "webhook"])
        .await
        .unwrap();
    release::publish(&system).await.unwrap();
    let kubeconfig = system.kubeconfig.display().to_string();
    let no_config = Path::new("/dev/null");

    let status = arborctl(no_config, &["status", "--kubeconfig", &kubeconfig]).await;
    assert!(status.success, "{}", status.stderr);
    assert_eq!(status.stdout, "No sources.\n");
    let tree = arborctl(
        no_config,
        &["tree", "-o", "json", "--kubeconfig", &kubeconfig],
    )
    .await;
    assert!(tree.success, "{}", tree.stderr);
    serde_json::from_str::<serde_json::Value>(&tree.stdout).expect("the tree as JSON");
    let drift = arborctl(
        no_config,
        &["drift", "--timeout", "2s", "--kubeconfig", &kubeconfig],
    )
    .await;
    assert!(drift.success, "{}", drift.stderr);
    let object = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        object.path(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n",
    )
    .unwrap();
    let object_path = object.path().display().to_string();
    let review = arborctl(
        no_config,
        &["review", "-f", &object_path, "--kubeconfig", &kubeconfig],
    )
    .await;
    assert!(review.success, "{}{}", review.stdout, review.stderr);
    assert!(review.stdout.starts_with("ALLOWED"), "{}", review.stdout);

    // A context that names only the kubeconfig: plain `arborctl status`.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "current-context: cluster\ncontexts:\n  - name: cluster\n    kubeconfig: {kubeconfig}\n    arbor-namespace: {SYSTEM_NAMESPACE}\n    release: arbor\n"
        ),
    )
    .unwrap();
    let status = arborctl(&config, &["status"]).await;
    assert!(status.success, "{}", status.stderr);
    assert_eq!(status.stdout, "No sources.\n");

    // No ready pod: the error names the component, the namespace and the selector, and what
    // the pods are doing instead.
    release::set_pod_ready(&system.client, "arbor-gitsync-0", false)
        .await
        .unwrap();
    let refused = arborctl(&config, &["status"]).await;
    assert_fails_saying(
        &refused,
        &[
            "no ready pod for SyncService (arbor-gitsync) (Service arbor-gitsync) in namespace arbor-system",
            "app.kubernetes.io/component=gitsync",
            "arbor-gitsync-0 (Running, not ready)",
        ],
    );
    release::set_pod_ready(&system.client, "arbor-gitsync-0", true)
        .await
        .unwrap();

    // The server certificate is verified against the Secret's CA, for the Service's name.
    let secrets: Api<Secret> = Api::namespaced(system.client.clone(), SYSTEM_NAMESPACE);
    let mut secret = secrets.get("arbor-operator-tls").await.unwrap();
    let other_ca = arbor_testkit::pki::Authority::generate("another CA").unwrap();
    secret.data.as_mut().unwrap().insert(
        "ca.crt".into(),
        k8s_openapi::ByteString(other_ca.cert_pem().as_bytes().to_vec()),
    );
    secret.metadata.resource_version = None;
    secrets
        .replace("arbor-operator-tls", &PostParams::default(), &secret)
        .await
        .unwrap();
    let refused = arborctl(&config, &["status"]).await;
    assert_fails_saying(&refused, &["arbor-gitsync.arbor-system.svc", "unknown CA"]);

    // The Secret missing is named.
    secrets
        .delete("arbor-operator-tls", &DeleteParams::default())
        .await
        .unwrap();
    let refused = arborctl(&config, &["status"]).await;
    assert_fails_saying(
        &refused,
        &[
            "the Secret arbor-system/arbor-operator-tls with the operators' client certificate does not exist",
        ],
    );
}

/// An in-process emulator holding arbor-gitsync's Service, a ready pod and the operators'
/// Secret, no controller behind them, `deny` refusing requests; and its kubeconfig's path.
async fn release_without_controllers(deny: &str) -> (KubeEmu, tempfile::TempDir, String) {
    let emu = KubeEmu::builder()
        .deny(DenyRule::parse(deny).unwrap())
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig).unwrap();
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .unwrap();
    let nowhere = "127.0.0.1:9".parse().unwrap();
    release::publish_component(&client, "gitsync", nowhere)
        .await
        .unwrap();
    release::publish_operator_secret(&client, "-", "-", "-")
        .await
        .unwrap();
    (emu, dir, kubeconfig.display().to_string())
}

/// `arborctl status --kubeconfig` against [`release_without_controllers`] with `deny` fails
/// saying each of `expected`.
async fn status_refused_under(deny: &str, expected: &[&str]) {
    let (_emu, _dir, kubeconfig) = release_without_controllers(deny).await;
    let refused = arborctl(
        Path::new("/dev/null"),
        &["status", "--kubeconfig", &kubeconfig],
    )
    .await;
    assert_fails_saying(&refused, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_forward_rbac_forbids_names_the_permission_and_the_operator_cluster_role() {
    status_refused_under(
        "deny verb=create resource=pods/portforward",
        &[
            "RBAC forbids get and create pods/portforward in namespace arbor-system",
            "cannot create resource \"pods/portforward\"",
            "ClusterRole arbor-operator",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_operators_secret_forbidden_names_the_secret_and_the_role() {
    status_refused_under(
        "deny verb=get resource=secrets",
        &[
            "RBAC forbids get secrets \"arbor-operator-tls\" in namespace arbor-system",
            "ClusterRole arbor-operator",
        ],
    )
    .await;
}
