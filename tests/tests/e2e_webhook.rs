//! Admission-time policy end to end: kubectl against the real `arbor-kube-emu`, which calls
//! the real `arbor-webhook` through a ValidatingWebhookConfiguration, as kube-apiserver does.
//! Each test starts its own emulator and webhook (see `arbor_e2e::webhook_env`).
//!
//! Decisions about the namespace tree depend on what the webhook's reflectors have seen, so
//! those tests first wait (bounded, with server-side dry runs that change nothing) until the
//! webhook refuses, then make the real request.

use arbor_e2e::eventually;
use arbor_e2e::source::skip;
use arbor_e2e::webhook_env;
use arbor_e2e::webhook_env::{GITSYNC_ACCOUNT, User, WAIT, WebhookEnv};
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{GetDeclaredRequest, ObjectRef};
use arbor_testkit::GitRepo;
use arbor_testkit::cluster::ensure_namespace;
use serde_json::{Value, json};

/// The words kube puts before a webhook's refusal.
const DENIED: [&str; 2] = ["admission webhook", "denied the request"];

fn yaml(object: &Value) -> String {
    // JSON is YAML: kubectl reads either from stdin.
    object.to_string()
}

/// Runs kubectl as alice, expecting it to fail; returns its stderr.
fn refused(env: &WebhookEnv, args: &[&str], stdin: Option<&Value>) -> String {
    let stdin = stdin.map(yaml);
    let run = env.kubectl(User::Alice, args, stdin.as_deref()).unwrap();
    assert!(!run.success, "kubectl {args:?} was admitted: {run:?}");
    run.stderr
}

/// Runs kubectl as alice, expecting the webhook to refuse with `reason`.
fn assert_denied(env: &WebhookEnv, args: &[&str], stdin: Option<&Value>, reason: &str) {
    let stderr = refused(env, args, stdin);
    for words in DENIED.iter().chain([&reason]) {
        assert!(stderr.contains(words), "{words:?} missing from: {stderr}");
    }
}

/// A GitTrack following a repository that is never fetched in these tests.
fn gittrack(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"repository": "https://git.example.com/apps.git", "reference": {"branch": "main"}},
    })
}

/// A tracking object of `kind` owned (by ownerReference and source annotation) by `source`
/// (`GitTrack/<namespace>/<name>` or `ClusterGitTrack/<name>`) with uid `owner_uid`.
fn tracking_object(kind: &str, namespace: Option<&str>, source: &str, owner_uid: &str) -> Value {
    let (owner_kind, owner_name) = source
        .split_once('/')
        .map(|(kind, rest)| (kind, rest.rsplit('/').next().unwrap_or(rest)))
        .expect("a source reference has a kind");
    let mut object = json!({
        "apiVersion": "arbor.dev/v1alpha1", "kind": kind,
        "metadata": {
            "name": "configmap-settings",
            "annotations": {"arbor.dev/source": source},
            "ownerReferences": [{
                "apiVersion": "arbor.dev/v1alpha1", "kind": owner_kind, "name": owner_name,
                "uid": owner_uid, "controller": true,
            }],
        },
        "spec": {"name": "settings", "kind": "ConfigMap", "data": {"data": {"color": "blue"}}},
    });
    if let Some(namespace) = namespace {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object
}

/// Creates `object` as alice and returns its uid.
fn create(env: &WebhookEnv, object: &Value) -> String {
    env.kubectl_ok(User::Alice, &["create", "-f", "-"], Some(&yaml(object)))
        .unwrap();
    let kind = object["kind"].as_str().unwrap();
    let name = object["metadata"]["name"].as_str().unwrap();
    let mut args = vec!["get", kind, name, "-o", "jsonpath={.metadata.uid}"];
    if let Some(namespace) = object["metadata"]["namespace"].as_str() {
        args.extend(["-n", namespace]);
    }
    env.kubectl_ok(User::Admin, &args, None).unwrap()
}

/// Creates `object` as alice, expecting the webhook to refuse with `reason` and nothing to be
/// stored.
fn assert_create_denied(env: &WebhookEnv, object: &Value, reason: &str) {
    assert_denied(env, &["create", "-f", "-"], Some(object), reason);
    let metadata = &object["metadata"];
    assert!(!stored(
        env,
        object["kind"].as_str().unwrap(),
        metadata["namespace"].as_str(),
        metadata["name"].as_str().unwrap(),
    ));
}

/// Whether the admin can read `kind` `name` (in `namespace`).
fn stored(env: &WebhookEnv, kind: &str, namespace: Option<&str>, name: &str) -> bool {
    let mut args = vec!["get", kind, name, "--ignore-not-found", "-o", "name"];
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    !env.kubectl_ok(User::Admin, &args, None)
        .unwrap()
        .trim()
        .is_empty()
}

async fn env_with_webhook(flags: &[&str], namespaces: &[Value]) -> WebhookEnv {
    let mut env = WebhookEnv::start().await.unwrap();
    for namespace in namespaces {
        arbor_testkit::cluster::apply(&env.client, namespace, None)
            .await
            .unwrap();
    }
    env.start_webhook(flags, &[]).await.unwrap();
    env
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gittrackobject_owned_by_a_gittrack_in_another_namespace_is_refused_with_the_matrix_reason()
 {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let env = env_with_webhook(
        &["--gittrack-mode", "Enabled"],
        &[
            namespace("team-a", json!({})),
            namespace("team-b", json!({})),
        ],
    )
    .await;
    let owner_uid = create(&env, &gittrack("team-a", "apps"));

    let claim = tracking_object(
        "GitTrackObject",
        Some("team-b"),
        "GitTrack/team-a/apps",
        &owner_uid,
    );
    assert_create_denied(&env, &claim, "Cross namespace never allowed");

    // The same object in the GitTrack's own namespace is the matrix's Y.
    let own = tracking_object(
        "GitTrackObject",
        Some("team-a"),
        "GitTrack/team-a/apps",
        &owner_uid,
    );
    create(&env, &own);
    assert!(stored(
        &env,
        "gittrackobject",
        Some("team-a"),
        "configmap-settings"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clustergittrackobject_owned_by_a_gittrack_is_refused() {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let env = env_with_webhook(
        &["--gittrack-mode", "Enabled"],
        &[namespace("team-a", json!({}))],
    )
    .await;
    let gittrack_uid = create(&env, &gittrack("team-a", "apps"));
    let claim = tracking_object(
        "ClusterGitTrackObject",
        None,
        "GitTrack/team-a/apps",
        &gittrack_uid,
    );
    assert_create_denied(
        &env,
        &claim,
        "GitTrack can never own cluster-scoped resource",
    );

    // A ClusterGitTrack may always own one.
    let mut platform = gittrack("", "platform");
    platform["kind"] = json!("ClusterGitTrack");
    platform["metadata"] = json!({"name": "platform"});
    let platform_uid = create(&env, &platform);
    let owned = tracking_object(
        "ClusterGitTrackObject",
        None,
        "ClusterGitTrack/platform",
        &platform_uid,
    );
    create(&env, &owned);
    assert!(stored(
        &env,
        "clustergittrackobject",
        None,
        "configmap-settings"
    ));
}

/// seeds/002's "never" rows do not depend on the installation's mode: with
/// `--gittrack-mode Disabled` (the default) the running webhook refuses both, and the
/// mode-dependent row (a ClusterGitTrack's namespaced objects) still follows the mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_rows_are_refused_with_gittrack_mode_disabled() {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let env = env_with_webhook(
        &[
            "--gittrack-mode",
            "Disabled",
            "--clustergittrack-mode",
            "ExcludeNamespaced",
        ],
        &[
            namespace("team-a", json!({})),
            namespace("team-b", json!({})),
        ],
    )
    .await;
    let owner_uid = create(&env, &gittrack("team-a", "apps"));
    let cross = tracking_object(
        "GitTrackObject",
        Some("team-b"),
        "GitTrack/team-a/apps",
        &owner_uid,
    );
    assert_create_denied(&env, &cross, "Cross namespace never allowed");
    // The claim by uid alone: no annotation names team-a, the ownerReference's uid does.
    let mut by_uid = cross.clone();
    by_uid["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    by_uid["metadata"]["name"] = json!("configmap-by-uid");
    // The webhook locates the owner from its GitTrack reflector: wait until it has seen
    // team-a's GitTrack (a dry run stores nothing), then the real create is refused.
    let file = env.dir().join("by-uid.yaml");
    std::fs::write(&file, yaml(&by_uid)).unwrap();
    let file = file.to_str().unwrap();
    env.until_refused(
        User::Alice,
        &["create", "-f", file, "--dry-run=server"],
        "Cross namespace never allowed",
    )
    .await
    .unwrap();
    assert_create_denied(&env, &by_uid, "Cross namespace never allowed");
    let cluster_scoped = tracking_object(
        "ClusterGitTrackObject",
        None,
        "GitTrack/team-a/apps",
        &owner_uid,
    );
    assert_create_denied(
        &env,
        &cluster_scoped,
        "GitTrack can never own cluster-scoped resource",
    );
    let mut platform = gittrack("", "platform");
    platform["kind"] = json!("ClusterGitTrack");
    platform["metadata"] = json!({"name": "platform"});
    let platform_uid = create(&env, &platform);
    let namespaced = tracking_object(
        "GitTrackObject",
        Some("team-b"),
        "ClusterGitTrack/platform",
        &platform_uid,
    );
    assert_create_denied(&env, &namespaced, "ExcludeNamespaced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_with_sub_namespaces_is_refused_unless_cascading_deletion_is_allowed()
{
    if skip(webhook_env::NEEDS) {
        return;
    }
    let mut env = env_with_webhook(
        &[],
        &[
            namespace("org", json!({"arbor.dev/type": "root"})),
            namespace("org-team", json!({"arbor.dev/parent": "org"})),
        ],
    )
    .await;
    env.until_refused(
        User::Alice,
        &["delete", "namespace", "org", "--dry-run=server"],
        "still has sub-namespaces",
    )
    .await
    .unwrap();
    assert_denied(
        &env,
        &["delete", "namespace", "org", "--wait=false"],
        None,
        "namespace org still has sub-namespaces: org-team",
    );
    assert!(stored(&env, "namespace", None, "org"));

    // The same installation, restarted to allow cascading deletion.
    env.kill_webhook().unwrap();
    env.start_webhook(&["--allow-cascading-deletion", "true"], &[])
        .await
        .unwrap();
    // Removing the root role is refused whatever the cascading setting: once it is, this
    // webhook's tree knows org-team, so the delete below is judged on the flag alone.
    env.until_refused(
        User::Alice,
        &[
            "label",
            "namespace",
            "org",
            "arbor.dev/type-",
            "--dry-run=server",
        ],
        "cannot stop being a root while it has sub-namespaces",
    )
    .await
    .unwrap();
    env.kubectl_ok(
        User::Alice,
        &["delete", "namespace", "org", "--wait=false"],
        None,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_link_that_closes_a_cycle_is_refused() {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let env = env_with_webhook(
        &[],
        &[
            namespace("org", json!({"arbor.dev/type": "root"})),
            namespace("b", json!({"arbor.dev/parent": "org"})),
        ],
    )
    .await;
    // a's parent is b: admitted as soon as the webhook's tree knows b.
    let a = yaml(&namespace("a", json!({"arbor.dev/parent": "b"})));
    let created = eventually("namespace a admitted", WAIT, || {
        let run = env.kubectl(User::Alice, &["create", "-f", "-"], Some(&a));
        async move { Ok(run.ok().filter(|run| run.success).map(drop)) }
    })
    .await;
    assert!(created.is_ok(), "{created:?}{}", env.logs());

    // Then b's parent becomes a.
    let relabel = [
        "label",
        "namespace",
        "b",
        "arbor.dev/parent=a",
        "--overwrite",
    ];
    let dry_run: Vec<&str> = relabel
        .iter()
        .copied()
        .chain(["--dry-run=server"])
        .collect();
    env.until_refused(User::Alice, &dry_run, "would close the cycle")
        .await
        .unwrap();
    assert_denied(&env, &relabel, None, "would close the cycle");
    let parent = env
        .kubectl_ok(
            User::Admin,
            &[
                "get",
                "namespace",
                "b",
                "-o",
                r"jsonpath={.metadata.labels.arbor\.dev/parent}",
            ],
            None,
        )
        .unwrap();
    assert_eq!(parent, "org");
}

/// Waits until arbor-gitsync at `address` declares ConfigMap `team/settings`.
async fn wait_declared(env: &WebhookEnv, address: &str) {
    let channel = arbor_runtime::grpc::connect_lazy(address, None).unwrap();
    let client = SyncServiceClient::new(channel);
    let declared = eventually(
        "arbor-gitsync to declare ConfigMap team/settings",
        WAIT,
        || {
            let mut client = client.clone();
            async move {
                let request = GetDeclaredRequest {
                    object: Some(ObjectRef {
                        group: String::new(),
                        version: "v1".to_owned(),
                        kind: "ConfigMap".to_owned(),
                        namespace: "team".to_owned(),
                        name: "settings".to_owned(),
                    }),
                };
                Ok(client
                    .get_declared(request)
                    .await
                    .ok()
                    .filter(|answer| answer.get_ref().declared)
                    .map(drop))
            }
        },
    )
    .await;
    assert!(declared.is_ok(), "{declared:?}{}", env.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_drift_prevention_a_person_cannot_change_a_declared_field_but_arbor_can() {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let mut env = WebhookEnv::start().await.unwrap();
    ensure_namespace(&env.client, "team").await.unwrap();
    let repo = GitRepo::init(env.dir().join("repos/team")).unwrap();
    repo.commit_file(
        "settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: team\ndata:\n  color: blue\n",
        "Declare settings",
    )
    .unwrap();
    let gitsync = env.start_gitsync().await.unwrap();
    env.start_webhook(
        &[
            "--gittrack-mode",
            "Enabled",
            "--prevent-drift",
            "true",
            "--arbor-service-accounts",
            GITSYNC_ACCOUNT,
            "--gitsync-addr",
            &gitsync,
        ],
        &["configmaps"],
    )
    .await
    .unwrap();
    let mut source = gittrack("team", "team");
    source["spec"]["repository"] = json!(repo.file_url());
    env.kubectl_ok(User::Admin, &["create", "-f", "-"], Some(&yaml(&source)))
        .unwrap();
    wait_declared(&env, &gitsync).await;

    let color = || {
        env.kubectl_ok(
            User::Admin,
            &[
                "get",
                "configmap",
                "settings",
                "-n",
                "team",
                "-o",
                "jsonpath={.data.color}",
            ],
            None,
        )
        .unwrap()
    };
    assert_eq!(color(), "blue");
    let recolor = [
        "patch",
        "configmap",
        "settings",
        "-n",
        "team",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"color":"red"}}"#,
    ];
    assert_denied(&env, &recolor, None, "this change makes it differ from git");
    assert_eq!(color(), "blue");

    // What git does not declare stays alice's to change.
    env.kubectl_ok(
        User::Alice,
        &[
            "label",
            "configmap",
            "settings",
            "-n",
            "team",
            "owner=alice",
        ],
        None,
    )
    .unwrap();

    // Arbor's own service account makes the same change.
    env.kubectl_ok(User::Gitsync, &recolor, None).unwrap();
    assert_eq!(color(), "red");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_webhook_down_failure_policy_fail_refuses_the_write() {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let mut env = env_with_webhook(
        &["--gittrack-mode", "Enabled"],
        &[namespace("team-a", json!({}))],
    )
    .await;
    let owner_uid = create(&env, &gittrack("team-a", "apps"));
    env.kill_webhook().unwrap();

    let object = tracking_object(
        "GitTrackObject",
        Some("team-a"),
        "GitTrack/team-a/apps",
        &owner_uid,
    );
    let stderr = refused(&env, &["create", "-f", "-"], Some(&object));
    assert!(
        stderr.contains("failed calling webhook \"validate.arbor.dev\""),
        "{stderr}"
    );
    assert!(!stored(
        &env,
        "gittrackobject",
        Some("team-a"),
        "configmap-settings"
    ));
}

/// `arborctl review` asks the running webhook's PolicyService what admission would answer:
/// exit 1 with the rule for a change the webhook refuses, 0 for one it admits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arborctl_review_gives_the_webhooks_decision_before_the_change_is_made() {
    if skip(webhook_env::NEEDS) {
        return;
    }
    let env = env_with_webhook(
        &[],
        &[
            namespace("org", json!({"arbor.dev/type": "root"})),
            namespace("b", json!({"arbor.dev/parent": "org"})),
            namespace("a", json!({"arbor.dev/parent": "b"})),
        ],
    )
    .await;
    let write = |name: &str, object: &Value| {
        let path = env.dir().join(name);
        std::fs::write(&path, yaml(object)).unwrap();
        path
    };
    let old = write(
        "b.yaml",
        &namespace("b", json!({"arbor.dev/parent": "org"})),
    );
    let cycle = write(
        "b-cycle.yaml",
        &namespace("b", json!({"arbor.dev/parent": "a"})),
    );
    let review = |file: &std::path::Path, old: &std::path::Path| {
        arbor_e2e::arborctl([
            "review".as_ref(),
            "-f".as_ref(),
            file.as_os_str(),
            "--operation".as_ref(),
            "update".as_ref(),
            "--old".as_ref(),
            old.as_os_str(),
            "--as".as_ref(),
            "alice".as_ref(),
            "--policy-addr".as_ref(),
            env.policy_addr().unwrap().as_ref(),
        ])
        .unwrap()
    };
    // The webhook's tree fills from its watch: wait until it knows a.
    let denied = eventually("the review refuses the cycle", WAIT, || {
        let run = review(&cycle, &old);
        async move { Ok(run.stdout.contains("would close the cycle").then_some(run)) }
    })
    .await
    .unwrap();
    assert!(!denied.success);
    assert!(denied.stdout.starts_with("DENIED by "), "{}", denied.stdout);

    let allowed = review(&old, &old);
    assert!(allowed.success, "{}{}", allowed.stdout, allowed.stderr);
    assert!(allowed.stdout.starts_with("ALLOWED"), "{}", allowed.stdout);

    let unreachable = arbor_e2e::arborctl([
        "review",
        "-f",
        cycle.to_str().unwrap(),
        "--policy-addr",
        "http://127.0.0.1:1",
    ])
    .unwrap();
    assert!(!unreachable.success);
    assert!(
        unreachable.stderr.contains("PolicyService"),
        "{}",
        unreachable.stderr
    );
}
