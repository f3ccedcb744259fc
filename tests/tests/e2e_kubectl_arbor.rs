//! #17.4: `kubectl-arbor` with `kubectl-accurate`'s argument shapes, as the plugin binary,
//! against arbor-kube-emu with arbor-hierarchy and arbor-webhook (registered) running under
//! Accurate's domain. The plugin finds the domain from the served SubNamespace group (no
//! `--domain`), writes through the API server with the kubeconfig, and a write the webhook
//! refuses prints the webhook's reason.

use arbor_e2e::source::{Need, skip};
use std::path::Path;
use std::process::Output;

use arbor_e2e::eventually;
use arbor_e2e::system::{WAIT, start_in_domain};
use arbor_e2e::{binary, fixture};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};

fn plugin(kubeconfig: &Path, args: &[&str]) -> Output {
    let binary = binary("arborctl", "kubectl-arbor").unwrap();
    std::process::Command::new(binary)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .unwrap()
}

fn succeeds(kubeconfig: &Path, args: &[&str]) -> String {
    let output = plugin(kubeconfig, args);
    assert!(
        output.status.success(),
        "kubectl arbor {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn refused(kubeconfig: &Path, args: &[&str]) -> String {
    let output = plugin(kubeconfig, args);
    assert!(!output.status.success(), "kubectl arbor {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn label(client: &Client, namespace: &str, key: &str) -> Option<String> {
    Api::<Namespace>::all(client.clone())
        .get_opt(namespace)
        .await
        .ok()
        .flatten()
        .and_then(|ns| ns.metadata.labels)
        .and_then(|labels| labels.get(key).cloned())
}

async fn wait_label(client: &Client, namespace: &str, key: &str, value: Option<&str>) {
    eventually(&format!("{namespace} {key}={value:?}"), WAIT, || async {
        Ok((label(client, namespace, key).await.as_deref() == value).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_accurate_argument_shapes_work_through_the_api_server_and_the_webhook() {
    if skip(&[Need::ReachableWebhook]) {
        return;
    }
    let system = start_in_domain(
        &["hierarchy", "webhook"],
        Some("accurate.cybozu.com"),
        fixture("accurate/config.yaml"),
    )
    .await
    .unwrap();
    let client = system.client.clone();
    let kubeconfig = system.kubeconfig.clone();
    let namespaces = Api::<Namespace>::all(client.clone());
    for name in ["root", "tmpl", "plain"] {
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        namespaces.create(&Default::default(), &ns).await.unwrap();
    }

    // ns set-type, with the domain found from the cluster.
    succeeds(&kubeconfig, &["ns", "set-type", "root", "root"]);
    wait_label(&client, "root", "accurate.cybozu.com/type", Some("root")).await;
    succeeds(&kubeconfig, &["ns", "set-type", "tmpl", "template"]);

    // sub create NAME PARENT --labels --annotations; retried while the webhook's tree catches
    // up with the new root.
    eventually("sub create a", WAIT, || async {
        Ok(plugin(
            &kubeconfig,
            &["sub", "create", "a", "root", "--labels=foo=bar"],
        )
        .status
        .success()
        .then_some(()))
    })
    .await
    .unwrap();
    wait_label(&client, "a", "accurate.cybozu.com/parent", Some("root")).await;
    wait_label(&client, "a", "foo", Some("bar")).await;
    eventually("sub create b under a", WAIT, || async {
        Ok(plugin(&kubeconfig, &["sub", "create", "b", "a"])
            .status
            .success()
            .then_some(()))
    })
    .await
    .unwrap();
    wait_label(&client, "b", "accurate.cybozu.com/parent", Some("a")).await;

    // list and ns describe.
    let tree = succeeds(&kubeconfig, &["list"]);
    assert!(tree.contains("root\n  a\n    b\n"), "{tree}");
    let described = succeeds(&kubeconfig, &["ns", "describe", "a"]);
    assert!(described.contains("Parent:    root"), "{described}");
    assert!(described.contains("Children:  b"), "{described}");

    // template set / list / unset.
    succeeds(&kubeconfig, &["template", "set", "plain", "tmpl"]);
    wait_label(
        &client,
        "plain",
        "accurate.cybozu.com/template",
        Some("tmpl"),
    )
    .await;
    assert!(succeeds(&kubeconfig, &["template", "list"]).contains("tmpl"));
    succeeds(&kubeconfig, &["template", "unset", "plain"]);
    wait_label(&client, "plain", "accurate.cybozu.com/template", None).await;

    // Refusals carry the webhook's reason: a move that makes a cycle, deleting a namespace
    // that has children.
    let cycle = refused(&kubeconfig, &["sub", "move", "a", "b"]);
    assert!(cycle.contains("cycle"), "{cycle}");
    let children = refused(&kubeconfig, &["sub", "delete", "a"]);
    assert!(
        children.contains("has-children") || children.contains("children"),
        "{children}"
    );

    // sub move, cut, graft and delete.
    succeeds(&kubeconfig, &["ns", "set-type", "plain", "root"]);
    wait_label(&client, "plain", "accurate.cybozu.com/type", Some("root")).await;
    eventually("sub move b under plain", WAIT, || async {
        Ok(plugin(&kubeconfig, &["sub", "move", "b", "plain"])
            .status
            .success()
            .then_some(()))
    })
    .await
    .unwrap();
    wait_label(&client, "b", "accurate.cybozu.com/parent", Some("plain")).await;
    succeeds(&kubeconfig, &["sub", "cut", "b"]);
    wait_label(&client, "b", "accurate.cybozu.com/type", Some("root")).await;
    wait_label(&client, "b", "accurate.cybozu.com/parent", None).await;
    succeeds(&kubeconfig, &["ns", "set-type", "b", "none"]);
    eventually("sub graft b under a", WAIT, || async {
        Ok(plugin(&kubeconfig, &["sub", "graft", "b", "a"])
            .status
            .success()
            .then_some(()))
    })
    .await
    .unwrap();
    wait_label(&client, "b", "accurate.cybozu.com/parent", Some("a")).await;
    succeeds(&kubeconfig, &["sub", "delete", "b"]);
    eventually("namespace b deleted", WAIT, || async {
        Ok(namespaces
            .get_opt("b")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();

    // --help for each command.
    for command in [
        &["list"][..],
        &["ns", "set-type"],
        &["template", "set"],
        &["sub", "move"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        assert!(plugin(&kubeconfig, &args).status.success(), "{args:?}");
    }
}
