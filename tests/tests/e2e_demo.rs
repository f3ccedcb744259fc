//! `arborctl demo` end to end: every binary as a process, the example repositories over smart
//! HTTP, and kubectl with the kubeconfig the demo prints.

use std::path::Path;
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
    // The demo writes its arborctl context under the user's config directory: a home of the
    // test's own.
    let home = dir.path().join("home");
    let mut demo = ProcessSpec::new("arborctl demo", &arborctl, dir.path().join("demo.log"))
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", "")
        .env("ARBORCONFIG", "")
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

    // An object no source declares is explained by its kind alone (rows 5-8 of seeds/000).
    kubectl(
        &kubeconfig,
        &[
            "create",
            "configmap",
            "handmade",
            "-n",
            "shop",
            "--from-literal=a=b",
        ],
    )
    .unwrap();
    arborctl_needs_no_flags_after_the_demo(&home, dir.path());
    the_readme_walkthrough_runs_command_for_command(&kubeconfig, &home, dir.path());

    demo.signal("INT").unwrap();
    let status = demo.wait_exit(Duration::from_secs(60)).await.unwrap();
    assert!(status.success(), "{status}: {}", demo.log_tail());
    assert!(demo.log().contains("stopped"));
    assert!(
        kubectl(&kubeconfig, &["get", "ns", "--request-timeout=2s"]).is_err(),
        "the API server should be gone after Ctrl-C"
    );
}

/// `arborctl` run as a user would after the demo: no flag, no `ARBOR_*` variable, only the
/// environment's home (or `ARBORCONFIG`).
fn arborctl_plain(env: &[(&str, &Path)], args: &[&str]) -> arbor_e2e::Run {
    let path = arbor_e2e::binary("arborctl", "arborctl").unwrap();
    let mut command = std::process::Command::new(path);
    for (key, _) in std::env::vars() {
        if key.starts_with("ARBOR") || key == "XDG_CONFIG_HOME" {
            command.env_remove(key);
        }
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command.args(args).output().unwrap().into()
}

fn arborctl_needs_no_flags_after_the_demo(home: &Path, scratch: &Path) {
    let in_home = [("HOME", home)];
    let status = arborctl_plain(&in_home, &["status"]);
    assert!(status.success, "{}{}", status.stdout, status.stderr);
    assert!(
        status.stdout.contains("GitTrack/shop/flat-app"),
        "{}",
        status.stdout
    );
    let tree = arborctl_plain(&in_home, &["tree"]);
    assert!(tree.success, "{}{}", tree.stdout, tree.stderr);
    assert!(tree.stdout.contains("team-a-dev"), "{}", tree.stdout);
    let explain = arborctl_plain(&in_home, &["explain", "ConfigMap/shop/storefront-settings"]);
    assert!(explain.success, "{}{}", explain.stdout, explain.stderr);
    assert!(explain.stdout.contains("flat-app"), "{}", explain.stdout);
    let handmade = arborctl_plain(&in_home, &["explain", "ConfigMap/shop/handmade"]);
    assert!(handmade.success, "{}{}", handmade.stdout, handmade.stderr);
    assert!(
        handmade.stdout.contains("seeds/000 row"),
        "{}",
        handmade.stdout
    );
    let drift = arborctl_plain(&in_home, &["drift", "--timeout", "2s"]);
    assert!(drift.success, "{}{}", drift.stdout, drift.stderr);
    let contexts = arborctl_plain(&in_home, &["context", "list"]);
    assert!(
        contexts
            .stdout
            .lines()
            .any(|line| line.starts_with('*') && line.contains("arbor-demo")),
        "{}",
        contexts.stdout
    );

    // A flag still wins over the context.
    let overridden = arborctl_plain(
        &in_home,
        &["status", "--gitsync-addr", "http://127.0.0.1:1"],
    );
    assert!(!overridden.success);
    assert!(
        overridden.stderr.contains("127.0.0.1:1"),
        "{}",
        overridden.stderr
    );

    // The same config elsewhere, named by ARBORCONFIG, with a home that has none.
    let elsewhere = scratch.join("elsewhere.yaml");
    std::fs::copy(home.join(".config/arbor/config.yaml"), &elsewhere).unwrap();
    let empty_home = scratch.join("empty-home");
    std::fs::create_dir_all(&empty_home).unwrap();
    let by_variable = arborctl_plain(
        &[("HOME", &empty_home), ("ARBORCONFIG", &elsewhere)],
        &["status"],
    );
    assert!(
        by_variable.success,
        "{}{}",
        by_variable.stdout, by_variable.stderr
    );
    assert!(
        by_variable.stdout.contains("ClusterGitTrack/foo-corp"),
        "{}",
        by_variable.stdout
    );
    let no_config = arborctl_plain(&[("HOME", &empty_home)], &["status"]);
    assert!(
        !no_config.success,
        "without a context the loopback default is not the demo"
    );
}

/// The README's walk-through after `make demo`, line by line as a user types it: in a shell, in
/// a directory of their own, with the demo's kubeconfig and `arborctl` on PATH. A line whose
/// comment says `exit 1` must exit 1; every other line must succeed.
fn the_readme_walkthrough_runs_command_for_command(kubeconfig: &Path, home: &Path, scratch: &Path) {
    let readme = std::fs::read_to_string(arbor_e2e::workspace_root().join("README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .find(|block| block.starts_with("export KUBECONFIG=$PWD/.demo/kubeconfig"))
        .and_then(|block| block.split("```").next())
        .expect("the README's walk-through block");
    let cwd = scratch.join("walkthrough");
    std::fs::create_dir_all(&cwd).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for line in block.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if line.starts_with("export KUBECONFIG=") {
            // The demo ran in a directory of the test's; the kubeconfig is set below.
            continue;
        }
        let expected = if line.contains("# exit 1") { 1 } else { 0 };
        let mut command = std::process::Command::new("sh");
        for (key, _) in std::env::vars() {
            if key.starts_with("ARBOR") || key == "XDG_CONFIG_HOME" {
                command.env_remove(key);
            }
        }
        let output = command
            .arg("-c")
            .arg(line)
            .current_dir(&cwd)
            .env("HOME", home)
            .env("KUBECONFIG", kubeconfig)
            .env("PATH", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(expected),
            "README line `{line}`:\n{stdout}{stderr}"
        );
        if line.starts_with("kubectl explain") {
            assert!(stdout.contains("branch"), "`{line}`: {stdout}");
        }
        if line.starts_with("arborctl review") {
            let answer = format!("{stdout}{stderr}").to_lowercase();
            assert!(answer.contains("denied"), "`{line}`: {answer}");
        }
        ran += 1;
    }
    assert!(
        ran >= 10,
        "the walk-through ran only {ran} commands:\n{block}"
    );
}
