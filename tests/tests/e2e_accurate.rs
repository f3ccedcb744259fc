//! Accurate's documented workflow, followed as a user with Accurate's docs in hand would,
//! against the real arbor-hierarchy and arbor-webhook processes run with
//! `--domain accurate.cybozu.com` and a configuration file in Accurate's format
//! (`tests/fixtures/accurate/config.yaml`): a root namespace with a RoleBinding for its
//! tenants, SubNamespaces in `accurate.cybozu.com/v2` with and without `spec`, a template with
//! its instance, `propagate=create` and `update`, and `propagate-generated`.

use arbor_e2e::source::{Need, skip};
use std::collections::BTreeMap;

use arbor_e2e::eventually;
use arbor_e2e::fixture;
use arbor_e2e::system::{WAIT, start_in_domain};
use arbor_testkit::cluster::apply_yaml;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

const DOMAIN: &str = "accurate.cybozu.com";

async fn labels_of(client: &Client, name: &str) -> Option<BTreeMap<String, String>> {
    Api::<Namespace>::all(client.clone())
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|ns| ns.metadata.labels.unwrap_or_default())
}

async fn wait_label(client: &Client, namespace: &str, key: &str, value: &str) {
    eventually(
        &format!("namespace {namespace} labelled {key}={value}"),
        WAIT,
        || async {
            let labels = labels_of(client, namespace).await.unwrap_or_default();
            Ok((labels.get(key).map(String::as_str) == Some(value)).then_some(()))
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accurate_documented_examples_work_under_the_accurate_domain() {
    if skip(&[Need::ReachableWebhook]) {
        return;
    }
    let config = fixture("accurate/config.yaml");
    let system = start_in_domain(&["hierarchy", "webhook"], Some(DOMAIN), config)
        .await
        .unwrap();
    let client = system.client.clone();

    // "Setting a Namespace as a root Namespace", and the RoleBinding for its tenants.
    let root = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: tenant
  labels:
    accurate.cybozu.com/type: root
    team: foo
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  namespace: tenant
  name: admin
  annotations:
    accurate.cybozu.com/propagate: update
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: admin
subjects:
- kind: Group
  name: foo
  apiGroup: rbac.authorization.k8s.io
"#;
    apply_yaml(&client, "root.yaml", root, None).await.unwrap();

    // "Creating a sub-namespace": a SubNamespace without spec, and one with labels and
    // annotations.
    let subs = r#"
apiVersion: accurate.cybozu.com/v2
kind: SubNamespace
metadata:
  namespace: tenant
  name: tenant-dev
---
apiVersion: accurate.cybozu.com/v2
kind: SubNamespace
metadata:
  namespace: tenant
  name: tenant-prod
spec:
  labels:
    foo: bar
  annotations:
    baz: zot
"#;
    // The webhook judges SubNamespaces against its cached tree, which sees the new root a
    // moment after it is created; a refusal in that moment is retried, as a user would.
    eventually("the SubNamespaces to be admitted", WAIT, || async {
        Ok(apply_yaml(&client, "subnamespaces.yaml", subs, None)
            .await
            .ok())
    })
    .await
    .unwrap();
    for sub in ["tenant-dev", "tenant-prod"] {
        wait_label(&client, sub, "accurate.cybozu.com/parent", "tenant").await;
        wait_label(&client, sub, "team", "foo").await;
    }
    wait_label(&client, "tenant-prod", "foo", "bar").await;
    let prod = Api::<Namespace>::all(client.clone())
        .get("tenant-prod")
        .await
        .unwrap();
    assert_eq!(
        prod.metadata
            .annotations
            .unwrap_or_default()
            .get("baz")
            .map(String::as_str),
        Some("zot")
    );

    // propagate=update: the RoleBinding is copied with `from`, and follows its source.
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), "tenant-dev");
    let copy = eventually("RoleBinding admin copied into tenant-dev", WAIT, || async {
        Ok(bindings.get_opt("admin").await.ok().flatten())
    })
    .await
    .unwrap();
    assert_eq!(
        copy.metadata
            .annotations
            .unwrap_or_default()
            .get("accurate.cybozu.com/from")
            .map(String::as_str),
        Some("tenant")
    );
    let change = json!({"subjects": [{"kind": "Group", "name": "foo-admins",
        "apiGroup": "rbac.authorization.k8s.io"}]});
    Api::<RoleBinding>::namespaced(client.clone(), "tenant")
        .patch("admin", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    eventually("the RoleBinding change copied", WAIT, || async {
        let copy = bindings.get_opt("admin").await.ok().flatten();
        let subject = copy
            .and_then(|b| b.subjects)
            .and_then(|s| s.first().map(|s| s.name.clone()));
        Ok((subject.as_deref() == Some("foo-admins")).then_some(()))
    })
    .await
    .unwrap();

    // A template and its instance; a propagate=create Secret is copied once, never updated.
    let template = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: tmpl
  labels:
    accurate.cybozu.com/type: template
    team: bar
---
apiVersion: v1
kind: Secret
metadata:
  namespace: tmpl
  name: pull
  annotations:
    accurate.cybozu.com/propagate: create
data:
  token: b25l
---
apiVersion: v1
kind: Namespace
metadata:
  name: instance
  labels:
    accurate.cybozu.com/template: tmpl
"#;
    // As above: the instance is admitted once the webhook's tree holds the template.
    eventually(
        "the template and its instance to be admitted",
        WAIT,
        || async {
            Ok(apply_yaml(&client, "template.yaml", template, None)
                .await
                .ok())
        },
    )
    .await
    .unwrap();
    wait_label(&client, "instance", "team", "bar").await;
    let instance_secrets = Api::<Secret>::namespaced(client.clone(), "instance");
    eventually("Secret pull copied into instance", WAIT, || async {
        Ok(instance_secrets.get_opt("pull").await.ok().flatten())
    })
    .await
    .unwrap();

    // propagate-generated: a Secret generated by an annotated owner is propagated.
    let owner = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  namespace: tenant
  name: issuer
  annotations:
    accurate.cybozu.com/propagate-generated: update
"#;
    apply_yaml(&client, "owner.yaml", owner, None)
        .await
        .unwrap();
    let uid = Api::<ConfigMap>::namespaced(client.clone(), "tenant")
        .get("issuer")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let generated = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"namespace": "tenant", "name": "issued", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "issuer", "uid": uid,
             "controller": true}]},
        "data": {"tls.crt": "Y2VydA=="}});
    Api::<Secret>::namespaced(client.clone(), "tenant")
        .patch(
            "issued",
            &PatchParams::apply("e2e"),
            &Patch::Apply(&generated),
        )
        .await
        .unwrap();
    let dev_secrets = Api::<Secret>::namespaced(client.clone(), "tenant-dev");
    eventually(
        "the generated Secret copied into tenant-dev",
        WAIT,
        || async { Ok(dev_secrets.get_opt("issued").await.ok().flatten()) },
    )
    .await
    .unwrap();
}
