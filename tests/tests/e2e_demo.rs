//! `arborctl demo` end to end: every binary as a process, the example repositories over smart
//! HTTP, and kubectl with the kubeconfig the demo prints.

use std::time::Duration;

use arbor_e2e::system::{WAIT, bin_dir, example, kubectl};
use arbor_testkit::ProcessSpec;

#[test]
fn the_examples_vet_clean() {
    for (repo, layout) in [("foo-corp", "hierarchical"), ("flat-app", "flat")] {
        let path = example(repo);
        let run = arbor_e2e::arborctl([
            "vet".as_ref(),
            path.as_os_str(),
            "--layout".as_ref(),
            layout.as_ref(),
        ])
        .unwrap();
        assert!(run.success, "{repo}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("valid"), "{repo}: {}", run.stdout);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_syncs_the_examples_and_kubectl_sees_them_until_ctrl_c() {
    let arborctl = arbor_e2e::binary("arborctl", "arborctl").unwrap();
    bin_dir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().join("demo");
    let mut demo = ProcessSpec::new("arborctl demo", &arborctl, dir.path().join("demo.log"))
        .arg("demo")
        .arg("--workdir")
        .arg(&workdir)
        .arg("--examples")
        .arg(example(""))
        .start()
        .unwrap();

    demo.wait_for_line("Arbor demo is ready.", WAIT * 3)
        .await
        .unwrap();

    let log = demo.log();
    assert!(log.contains("ClusterGitTrack/foo-corp"), "{log}");
    assert!(log.contains("GitTrack/shop/flat-app"), "{log}");
    assert!(log.contains("team-a-dev [s]"), "{log}");
    let export = log
        .lines()
        .find_map(|line| line.trim().strip_prefix("export KUBECONFIG="))
        .expect("the demo prints the kubeconfig to use");
    let kubeconfig = std::path::PathBuf::from(export);
    assert_eq!(kubeconfig, workdir.join("kubeconfig"));

    let namespaces = kubectl(&kubeconfig, &["get", "ns", "-o", "name"]).unwrap();
    for namespace in [
        "shipping-prod",
        "shipping-staging",
        "shipping-dev",
        "shop",
        "team-a",
        "team-a-dev",
        "team-a-prod",
    ] {
        assert!(
            namespaces.contains(&format!("namespace/{namespace}")),
            "{namespace}: {namespaces}"
        );
    }
    let bindings = kubectl(&kubeconfig, &["get", "rolebindings", "-A", "-o", "name"]).unwrap();
    assert_eq!(
        bindings
            .matches("rolebinding.rbac.authorization.k8s.io/pod-creators")
            .count(),
        3,
        "{bindings}"
    );
    let role = kubectl(
        &kubeconfig,
        &[
            "get",
            "role",
            "job-creator",
            "-n",
            "shipping-dev",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    )
    .unwrap();
    assert!(role.contains("arbor.dev/managed"), "{role}");
    let settings = kubectl(
        &kubeconfig,
        &[
            "get",
            "configmap",
            "storefront-settings",
            "-n",
            "shop",
            "-o",
            "jsonpath={.data.currency}",
        ],
    )
    .unwrap();
    assert_eq!(settings, "EUR");
    let copied = kubectl(
        &kubeconfig,
        &[
            "get",
            "secret",
            "registry-credentials",
            "-n",
            "team-a-prod",
            "-o",
            "name",
        ],
    )
    .unwrap();
    assert_eq!(copied.trim(), "secret/registry-credentials");
    let image = kubectl(
        &kubeconfig,
        &[
            "get",
            "deployment",
            "nginx",
            "-n",
            "shop",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
    )
    .unwrap();
    assert_eq!(image, "nginx:1.27");

    demo.signal("INT").unwrap();
    let status = demo.wait_exit(Duration::from_secs(60)).await.unwrap();
    assert!(status.success(), "{status}: {}", demo.log_tail());
    assert!(demo.log().contains("stopped"));
    assert!(
        kubectl(&kubeconfig, &["get", "ns", "--request-timeout=2s"]).is_err(),
        "the API server should be gone after Ctrl-C"
    );
}
