//! The Helm chart's RBAC is what the controllers need: each controller runs with the chart's
//! arguments as its own ServiceAccount against the emulator, which enforces RBAC with the
//! chart's rendered Roles, ClusterRoles and bindings; a scenario exercises all four (a
//! GitTrack synced, a namespace tree with a propagated Secret, Role and RoleBinding (the Role
//! granting what the hierarchy controller does not hold), an Application, admission
//! reviews, leader election in `arbor-system`). A missing grant fails the request that needs
//! it, so the scenario stalls; the test then names every refused request (403) and every
//! request the chart's rules do not allow.
//!
//! What the chart grants but no request used is reported, not asserted (a grant may serve a
//! path this scenario does not take, such as deleting a source): printed, and written to
//! `target/rbac-report.md`.

use arbor_e2e::rbac_env;
use arbor_e2e::source::skip;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;
use arbor_api::{Application, ApplicationState};
use arbor_e2e::eventually;
use arbor_e2e::rbac_env::{COMPONENTS, RbacEnv, Request, WAIT, describe, identity};
use arbor_testkit::GitRepo;
use arbor_testkit::cluster::{apply, apply_yaml, ensure_namespace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

/// The controllers that elect a leader (the webhook does not: every replica answers).
const ELECTING: [&str; 3] = ["gitsync", "hierarchy", "observer"];

const APPS_NAMESPACE: &str = "apps";

const REPO_FILES: [(&str, &str); 3] = [
    (
        "settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: demo\n",
    ),
    (
        "reader-role.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: reader\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [get, list]\n",
    ),
    (
        "reader-binding.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: reader\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: reader\nsubjects:\n  - kind: Group\n    name: readers\n    apiGroup: rbac.authorization.k8s.io\n",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_each_component_is_allowed_by_the_charts_rbac() {
    if skip(rbac_env::NEEDS) {
        return;
    }
    let started = std::time::Instant::now();
    let mut env = RbacEnv::start().await.unwrap();
    for component in COMPONENTS {
        env.start_component(component)
            .await
            .unwrap_or_else(|error| panic!("starting {component}: {error:#}{}", env.logs()));
        eprintln!("{:?} started {component}", started.elapsed());
    }
    let result = run_scenario(&env).await;
    let requests = env.requests().await.unwrap();
    // Enforced: what the chart does not grant was refused, whatever the scenario made of it.
    let refused: std::collections::BTreeSet<String> = requests
        .iter()
        .filter(|request| {
            request.code == 403 && request.identity.starts_with("system:serviceaccount:")
        })
        .map(describe)
        .collect();
    assert!(
        refused.is_empty(),
        "the emulator refused (403) under the chart's RBAC (identity verb group/resource namespace):\n{}{}",
        refused.into_iter().collect::<Vec<_>>().join("\n"),
        env.logs()
    );
    result.unwrap_or_else(|error| panic!("{error:#}{}", env.logs()));
    // And enforcement is on: what the chart does not grant is refused in kube-apiserver's words.
    let gitsync = env.client_as("gitsync").await.unwrap();
    let refused = Api::<Lease>::namespaced(gitsync, "kube-system")
        .get("kube-scheduler")
        .await
        .expect_err("the chart grants no Lease outside arbor-system");
    match refused {
        kube::Error::Api(status) => assert_eq!(
            status.message,
            format!(
                "leases.coordination.k8s.io \"kube-scheduler\" is forbidden: User \"{}\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"",
                identity("gitsync")
            )
        ),
        other => panic!("expected a 403, got {other:?}"),
    }

    let mut by_identity: BTreeMap<String, Vec<Request>> = BTreeMap::new();
    for request in requests {
        by_identity
            .entry(request.identity.clone())
            .or_default()
            .push(request);
    }

    let mut missing = std::collections::BTreeSet::new();
    let mut report = String::from("# Granted but never used in the end-to-end RBAC scenario\n");
    for component in COMPONENTS {
        let user = identity(component);
        let used = by_identity
            .get(&user)
            .map(Vec::as_slice)
            .unwrap_or_default();
        assert!(
            !used.is_empty(),
            "{user} made no request: the scenario did not exercise it"
        );
        let grants = env.chart.grants(&user).unwrap();
        // The judge can say no: nothing in the chart lets a component read another
        // namespace's Leases or write Leases cluster-wide.
        let foreign_lease = Request {
            verb: "update".to_owned(),
            group: "coordination.k8s.io".to_owned(),
            resource: "leases".to_owned(),
            subresource: String::new(),
            namespace: "kube-system".to_owned(),
            name: "kube-scheduler".to_owned(),
            identity: user.clone(),
            code: 200,
        };
        assert!(
            !grants.allows(&foreign_lease),
            "the chart grants {}",
            describe(&foreign_lease)
        );
        missing.extend(
            used.iter()
                .filter(|request| !grants.allows(request))
                .map(describe),
        );
        let _ = writeln!(report, "\n## arbor-{component} ({} requests)\n", used.len());
        for line in grants.unused(used) {
            let _ = writeln!(report, "- {line}");
        }
    }
    println!("{report}");
    let path = arbor_e2e::workspace_root().join("target/rbac-report.md");
    std::fs::write(&path, &report)
        .unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
    assert!(
        missing.is_empty(),
        "requests the chart's RBAC does not allow (identity verb group/resource namespace):\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Drives every component through the work it does on a cluster.
async fn run_scenario(env: &RbacEnv) -> anyhow::Result<()> {
    let client = env.client.clone();

    // Leader election: each electing controller holds its Lease in arbor-system.
    let leases = Api::<Lease>::namespaced(client.clone(), "arbor-system");
    for component in ELECTING {
        let name = format!("arbor-{component}");
        wait_for(&format!("Lease {name}"), &leases, &name, |lease: &Lease| {
            lease
                .spec
                .as_ref()
                .is_some_and(|spec| spec.holder_identity.is_some())
        })
        .await?;
    }

    // arbor-hierarchy (and arbor-webhook, which reviews each change): a root namespace from
    // a template, SubNamespaces, and a Secret propagated down the tree.
    let tree =
        std::fs::read_to_string(arbor_e2e::workspace_root().join("deploy/examples/tree.yaml"))
            .context("reading deploy/examples/tree.yaml")?;
    apply_yaml(&client, "tree.yaml", &tree, None).await?;
    let copies = Api::<Secret>::namespaced(client.clone(), "team-a-dev");
    wait_for(
        "the Secret copied into team-a-dev",
        &copies,
        "registry-credentials",
        |_| true,
    )
    .await?;

    // arbor-hierarchy copies RBAC down the tree too: a Role granting what the controller does
    // not hold (exec into Pods) and a RoleBinding to it, from team-a into its sub-namespace.
    // kube-apiserver's escalation prevention refuses both copies unless the chart lets the
    // controller grant what it does not hold.
    let roles = Api::<Role>::namespaced(client.clone(), "team-a");
    let debugger: Role = serde_json::from_value(json!({
        "metadata": {"name": "debugger", "annotations": {"arbor.dev/propagate": "update"}},
        "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
                  {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }))?;
    roles.create(&PostParams::default(), &debugger).await?;
    let debuggers: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "debuggers", "annotations": {"arbor.dev/propagate": "update"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "debugger"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a-oncall"}],
    }))?;
    Api::<RoleBinding>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &debuggers)
        .await?;
    let copied_role = wait_for(
        "the Role copied into team-a-dev",
        &Api::<Role>::namespaced(client.clone(), "team-a-dev"),
        "debugger",
        |_| true,
    )
    .await?;
    anyhow::ensure!(
        copied_role.rules == debugger.rules,
        "the copied Role grants {:?}",
        copied_role.rules
    );
    wait_for(
        "the RoleBinding copied into team-a-dev",
        &Api::<RoleBinding>::namespaced(client.clone(), "team-a-dev"),
        "debuggers",
        |binding: &RoleBinding| binding.role_ref.name == "debugger",
    )
    .await?;

    // arbor-gitsync: a GitTrack of a file:// repository with a ConfigMap, a Role and a
    // RoleBinding.
    let repo = GitRepo::init(env.dir().join("repos/app"))?;
    for (file, content) in REPO_FILES {
        repo.write(file, content)?;
    }
    repo.commit_all("The app's settings and reader role")?;
    ensure_namespace(&client, APPS_NAMESPACE).await?;
    let gittrack = json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
        "metadata": {"name": "app", "namespace": APPS_NAMESPACE},
        "spec": {"repository": repo.file_url(), "reference": {"branch": "main"},
                 "layout": "Flat", "pollInterval": "1h"},
    });
    apply(&client, &gittrack, None).await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), APPS_NAMESPACE);
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), APPS_NAMESPACE);
    wait_for("the GitTrack's ConfigMap", &config_maps, "settings", |_| {
        true
    })
    .await?;
    wait_for("the GitTrack's RoleBinding", &bindings, "reader", |_| true).await?;

    // arbor-observer: the example Application, until it runs.
    ensure_namespace(&client, "shop").await?;
    let application = std::fs::read_to_string(
        arbor_e2e::workspace_root().join("deploy/examples/application.yaml"),
    )
    .context("reading deploy/examples/application.yaml")?;
    apply_yaml(&client, "application.yaml", &application, None).await?;
    let applications = Api::<Application>::namespaced(client.clone(), "shop");
    wait_for(
        "the Application Running",
        &applications,
        "web",
        |application: &Application| {
            application
                .status
                .as_ref()
                .is_some_and(|status| status.state == ApplicationState::Running)
        },
    )
    .await?;

    // More admission reviews: one more SubNamespace, then its removal.
    let sub_namespaces = Api::<arbor_api::SubNamespace>::namespaced(client.clone(), "team-a");
    let extra: arbor_api::SubNamespace = serde_json::from_value(json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": "SubNamespace",
        "metadata": {"name": "team-a-qa", "namespace": "team-a"}, "spec": {},
    }))?;
    sub_namespaces
        .create(&PostParams::default(), &extra)
        .await?;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    wait_for("namespace team-a-qa", &namespaces, "team-a-qa", |_| true).await?;
    sub_namespaces
        .delete("team-a-qa", &DeleteParams::default())
        .await?;
    eventually("SubNamespace team-a-qa gone", WAIT, || async {
        let gone = matches!(sub_namespaces.get_opt("team-a-qa").await, Ok(None));
        Ok(gone.then_some(()))
    })
    .await?;
    Ok(())
}

/// Waits until object `name` exists and `ready` holds for it; a failed read is retried.
async fn wait_for<K>(
    what: &str,
    api: &Api<K>,
    name: &str,
    ready: impl Fn(&K) -> bool,
) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let waiting = std::time::Instant::now();
    let object = eventually(what, WAIT, || async {
        let object = api.get_opt(name).await.ok().flatten();
        Ok(object.filter(|object| ready(object)))
    })
    .await?;
    eprintln!("{what}: after {:?}", waiting.elapsed());
    Ok(object)
}
