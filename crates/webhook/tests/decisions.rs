//! Each admission rule, on AdmissionReview JSON fixtures decoded as the HTTPS endpoint decodes
//! them, through the one decision function.

mod support;

use arbor_policy::ownership::ClusterGitTrackMode;
use arbor_policy::propagation::NamespaceState;
use arbor_webhook::rules::drift::UnreachableAnswer;
use arbor_webhook::settings::PolicySettings;
use serde_json::{Value, json};
use support::*;

fn gittrack_object(namespace: &str, source: &str, owner_kind: &str) -> Value {
    json!({
        "apiVersion": ARBOR,
        "kind": "GitTrackObject",
        "metadata": {
            "name": "configmap-settings",
            "namespace": namespace,
            "annotations": {"arbor.dev/source": source},
            "ownerReferences": [{
                "apiVersion": ARBOR, "kind": owner_kind, "name": "apps", "uid": "1", "controller": true,
            }],
        },
        "spec": {"name": "settings", "kind": "ConfigMap", "data": {}},
    })
}

fn create_gto(object: Value) -> Value {
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
    request(
        "CREATE",
        ("arbor.dev", "v1alpha1", "GitTrackObject"),
        namespace.as_deref(),
        "configmap-settings",
        GITSYNC_SA,
        Some(object),
        None,
    )
}

#[tokio::test]
async fn gittrackobject_owned_by_a_gittrack_in_another_namespace_is_denied_with_the_matrix_reason()
{
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let object = gittrack_object("team-b", "GitTrack/team-a/apps", "GitTrack");
    let verdict = decide(&policy, create_gto(object)).await;
    let decision = verdict.decision();
    assert!(!decision.allowed);
    assert_eq!(
        decision.rule,
        "seeds/002 ownership GitTrack cross-namespace"
    );
    assert!(
        decision.reason.contains("Cross namespace never allowed")
            && decision.reason.contains("matrix row \"GitTrack\""),
        "{}",
        decision.reason
    );
}

#[tokio::test]
async fn gittrackobject_owned_by_its_namespaces_gittrack_is_allowed() {
    let policy = policy(
        settings(ClusterGitTrackMode::ExcludeNamespaced),
        vec![],
        None,
    );
    let object = gittrack_object("team-a", "GitTrack/team-a/apps", "GitTrack");
    let verdict = decide(&policy, create_gto(object)).await;
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(
        verdict.decision().rule,
        "seeds/002 ownership GitTrack same-namespace"
    );
}

#[tokio::test]
async fn clustergittrackobject_owned_by_a_gittrack_is_denied() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let object = json!({
        "apiVersion": ARBOR,
        "kind": "ClusterGitTrackObject",
        "metadata": {
            "name": "clusterrole-viewer",
            "ownerReferences": [{"apiVersion": ARBOR, "kind": "GitTrack", "name": "apps", "uid": "1"}],
        },
        "spec": {"name": "viewer", "kind": "ClusterRole", "data": {}},
    });
    let verdict = decide(
        &policy,
        request(
            "UPDATE",
            ("arbor.dev", "v1alpha1", "ClusterGitTrackObject"),
            None,
            "clusterrole-viewer",
            "alice",
            Some(object.clone()),
            Some(object),
        ),
    )
    .await;
    let decision = verdict.decision();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, "seeds/002 ownership GitTrack cluster-scoped");
    assert!(
        decision
            .reason
            .starts_with("a GitTrack may not own a ClusterGitTrackObject"),
        "an ownerReference carries no namespace, so none is named: {}",
        decision.reason
    );
    assert!(
        !decision.reason.contains("in namespace"),
        "{}",
        decision.reason
    );
    assert!(
        decision
            .reason
            .contains("GitTrack can never own cluster-scoped resource"),
        "{}",
        decision.reason
    );
}

#[tokio::test]
async fn clustergittrack_owns_gittrackobjects_only_under_includenamespaced() {
    let object = gittrack_object("team-a", "ClusterGitTrack/platform", "ClusterGitTrack");
    let include = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    assert!(decide(&include, create_gto(object.clone())).await.allowed());
    let exclude = policy(
        settings(ClusterGitTrackMode::ExcludeNamespaced),
        vec![],
        None,
    );
    let decision = decide(&exclude, create_gto(object)).await.decision();
    assert!(!decision.allowed);
    assert_eq!(
        decision.rule,
        "seeds/002 ownership ClusterGitTrack, ExcludeNamespaced exclude-namespaced"
    );
}

#[tokio::test]
async fn tracking_objects_of_unexpected_shape_are_denied_naming_the_field() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let cases = [
        (
            "/metadata/ownerReferences",
            json!("GitTrack/apps"),
            "metadata.ownerReferences",
        ),
        (
            "/metadata/ownerReferences",
            json!([{"apiVersion": ARBOR}]),
            "metadata.ownerReferences[0].kind",
        ),
        (
            "/metadata/annotations",
            json!({"arbor.dev/source": "Deployment/x"}),
            "metadata.annotations[\"arbor.dev/source\"]",
        ),
    ];
    for (pointer, value, field) in cases {
        let mut object = gittrack_object("team-a", "GitTrack/team-a/apps", "GitTrack");
        *object.pointer_mut(pointer).unwrap() = value;
        let decision = decide(&policy, create_gto(object)).await.decision();
        assert!(!decision.allowed);
        assert_eq!(decision.rule, "arbor object-shape");
        assert!(
            decision.reason.contains(field),
            "{} lacks {field}",
            decision.reason
        );
    }
}

fn source_request(kind: &str, namespace: Option<&str>, spec: Value) -> Value {
    let mut metadata = json!({"name": "apps"});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    let object = json!({"apiVersion": ARBOR, "kind": kind, "metadata": metadata, "spec": spec});
    request(
        "CREATE",
        ("arbor.dev", "v1alpha1", kind),
        namespace,
        "apps",
        "alice",
        Some(object),
        None,
    )
}

#[tokio::test]
async fn source_specs_are_validated_field_by_field() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let valid = json!({
        "repository": "https://git.example.com/apps.git",
        "reference": {"branch": "main"},
        "subPath": "deploy",
        "auth": {"type": "Token", "secretRef": {"name": "git-token"}},
    });
    let verdict = decide(
        &policy,
        source_request("GitTrack", Some("team-a"), valid.clone()),
    )
    .await;
    assert!(verdict.allowed(), "{verdict:?}");

    let cases = [
        ("/repository", json!("not a url"), "spec.repository"),
        ("/reference", json!({}), "spec.reference"),
        ("/subPath", json!("../escape"), "spec.subPath"),
        (
            "/auth/secretRef/namespace",
            json!("other"),
            "spec.auth.secretRef.namespace",
        ),
    ];
    for (pointer, value, field) in cases {
        let mut spec = valid.clone();
        match spec.pointer_mut(pointer) {
            Some(slot) => *slot = value,
            None => spec["auth"]["secretRef"]["namespace"] = value,
        }
        let decision = decide(&policy, source_request("GitTrack", Some("team-a"), spec))
            .await
            .decision();
        assert!(!decision.allowed, "{field} accepted");
        assert_eq!(decision.rule, "arbor-api spec GitTrack");
        assert!(
            decision.reason.contains(field),
            "{} lacks {field}",
            decision.reason
        );
    }
}

/// A source stored under older, looser URL rules can still change its metadata, above all lose
/// gitsync's finalizer when it is deleted (else it stays Terminating for good), as long as its
/// spec stays as it was; a change of its spec is judged by today's rules.
#[tokio::test]
async fn an_update_that_keeps_a_spec_older_rules_accepted_is_allowed() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let spec = json!({
        "repository": "https://git.example.com:abc/apps.git",
        "reference": {"branch": "main"},
    });
    let stored = json!({
        "apiVersion": ARBOR, "kind": "GitTrack",
        "metadata": {"name": "apps", "namespace": "team-a", "finalizers": ["arbor.dev/gitsync"]},
        "spec": spec,
    });
    let mut released = stored.clone();
    released["metadata"]["finalizers"] = json!([]);
    let update = |new: Value| {
        request(
            "UPDATE",
            ("arbor.dev", "v1alpha1", "GitTrack"),
            Some("team-a"),
            "apps",
            "system:serviceaccount:arbor-system:arbor-gitsync",
            Some(new),
            Some(stored.clone()),
        )
    };
    let verdict = decide(&policy, update(released.clone())).await;
    assert!(verdict.allowed(), "{verdict:?}");
    let mut changed = released;
    changed["spec"]["reference"] = json!({"branch": "next"});
    let decision = decide(&policy, update(changed)).await.decision();
    assert!(
        !decision.allowed,
        "a changed spec is judged by today's rules"
    );
    assert!(
        decision.reason.contains("spec.repository"),
        "{}",
        decision.reason
    );
}

#[tokio::test]
async fn clustergittrack_secret_reference_must_name_its_namespace() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let mut spec = json!({
        "repository": "https://git.example.com/platform.git",
        "reference": {"tag": "v1"},
        "auth": {"type": "Token", "secretRef": {"name": "git-token"}},
    });
    let decision = decide(
        &policy,
        source_request("ClusterGitTrack", None, spec.clone()),
    )
    .await
    .decision();
    assert!(!decision.allowed);
    assert!(decision.reason.contains("namespace"), "{}", decision.reason);
    spec["auth"]["secretRef"]["namespace"] = json!("arbor-system");
    let verdict = decide(&policy, source_request("ClusterGitTrack", None, spec)).await;
    assert!(verdict.allowed(), "{verdict:?}");
}

fn namespace_request(operation: &str, new: Option<Value>, old: Option<Value>) -> Value {
    let name = new
        .as_ref()
        .or(old.as_ref())
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or_default()
        .to_owned();
    request(
        operation,
        ("", "v1", "Namespace"),
        None,
        &name,
        "alice",
        new,
        old,
    )
}

#[tokio::test]
async fn deleting_a_namespace_with_sub_namespaces_is_denied_unless_cascading_is_allowed() {
    let tree = vec![root("team"), sub("team-dev", "team")];
    let delete = namespace_request("DELETE", None, Some(namespace_object(&root("team"))));
    let strict = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        tree.clone(),
        None,
    );
    let decision = decide(&strict, delete.clone()).await.decision();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, "seeds/001 tree has-children");
    assert!(decision.reason.contains("team-dev"), "{}", decision.reason);

    let mut cascading_settings = settings(ClusterGitTrackMode::IncludeNamespaced);
    cascading_settings.allow_cascading_deletion = true;
    let cascading = policy(cascading_settings, tree, None);
    assert!(decide(&cascading, delete).await.allowed());
}

#[tokio::test]
async fn a_parent_link_that_closes_a_cycle_is_denied() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        cycle_tree(),
        None,
    );
    let decision = decide(&policy, cycle_request()).await.decision();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, "seeds/001 tree cycle");
}

#[tokio::test]
async fn sub_namespace_rules_follow_the_tree() {
    let tree = vec![
        root("team"),
        sub("team-dev", "team"),
        sub("team-dev-x", "team-dev"),
    ];
    let strict = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        tree.clone(),
        None,
    );
    let sub_object = |namespace: &str, name: &str| json!({"apiVersion": ARBOR, "kind": "SubNamespace", "metadata": {"name": name, "namespace": namespace}, "spec": {}});
    let gvk = ("arbor.dev", "v1alpha1", "SubNamespace");
    let create = |namespace: &str, name: &str| {
        request(
            "CREATE",
            gvk,
            Some(namespace),
            name,
            "alice",
            Some(sub_object(namespace, name)),
            None,
        )
    };
    assert!(decide(&strict, create("team", "team-qa")).await.allowed());
    let decision = decide(&strict, create("default", "stray")).await.decision();
    assert_eq!(decision.rule, "seeds/001 tree parent-not-root-or-sub");

    let delete = request(
        "DELETE",
        gvk,
        Some("team"),
        "team-dev",
        "alice",
        None,
        Some(sub_object("team", "team-dev")),
    );
    let decision = decide(&strict, delete.clone()).await.decision();
    assert_eq!(decision.rule, "seeds/001 tree has-children");
    let mut cascading = settings(ClusterGitTrackMode::IncludeNamespaced);
    cascading.allow_cascading_deletion = true;
    assert!(
        decide(&policy(cascading, tree, None), delete)
            .await
            .allowed()
    );
}

#[tokio::test]
async fn a_namespace_whose_labels_are_not_a_map_is_denied_naming_the_field() {
    let policy = policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        vec![],
        None,
    );
    let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": ["a"]}});
    let decision = decide(&policy, namespace_request("CREATE", Some(object), None))
        .await
        .decision();
    assert!(!decision.allowed);
    assert!(
        decision.reason.contains("metadata.labels"),
        "{}",
        decision.reason
    );
}

fn deployment(replicas: u64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "labels": {"arbor.dev/managed": "enabled"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}},
    })
}

fn edit(user: &str, old: Value, new: Option<Value>) -> Value {
    let operation = if new.is_some() { "UPDATE" } else { "DELETE" };
    request(
        operation,
        ("apps", "v1", "Deployment"),
        Some("team-a"),
        "web",
        user,
        new,
        Some(old),
    )
}

fn drift_policy(
    unreachable: UnreachableAnswer,
    declared: ScriptedDeclared,
) -> arbor_webhook::Policy {
    let mut settings = settings(ClusterGitTrackMode::IncludeNamespaced);
    settings.drift = Some(drift_settings(unreachable));
    policy(settings, vec![], Some(declared))
}

#[tokio::test]
async fn a_users_edit_of_a_declared_field_on_a_managed_object_is_denied() {
    let policy = drift_policy(
        UnreachableAnswer::Allow,
        ScriptedDeclared::declaring("web", deployment(2, "web:1")),
    );
    let live = deployment(2, "web:1");
    let decision = decide(
        &policy,
        edit("alice", live.clone(), Some(deployment(5, "web:1"))),
    )
    .await
    .decision();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, "drift declared-field-changed");
    assert!(
        decision.reason.contains("spec.replicas") && decision.reason.contains("apps/web.yaml"),
        "{}",
        decision.reason
    );

    let mut annotated = live.clone();
    annotated["metadata"]["annotations"] = json!({"note": "fine"});
    let verdict = decide(&policy, edit("alice", live.clone(), Some(annotated))).await;
    assert!(
        verdict.allowed(),
        "an undeclared field is not drift: {verdict:?}"
    );

    let decision = decide(&policy, edit("alice", live, None)).await.decision();
    assert_eq!(decision.rule, "drift declared-object-deleted");
}

#[tokio::test]
async fn arbors_service_account_may_change_managed_objects() {
    let policy = drift_policy(
        UnreachableAnswer::Deny,
        ScriptedDeclared::declaring("web", deployment(2, "web:1")),
    );
    let decision = decide(
        &policy,
        edit(
            GITSYNC_SA,
            deployment(2, "web:1"),
            Some(deployment(3, "web:2")),
        ),
    )
    .await
    .decision();
    assert!(decision.allowed);
    assert_eq!(decision.rule, "drift arbor-service-account");
}

#[tokio::test]
async fn an_edit_that_keeps_earlier_drift_is_allowed() {
    let policy = drift_policy(
        UnreachableAnswer::Allow,
        ScriptedDeclared::declaring("web", deployment(2, "web:1")),
    );
    let drifted = deployment(4, "web:1");
    let mut relabelled = drifted.clone();
    relabelled["metadata"]["labels"]["team"] = json!("a");
    assert!(
        decide(&policy, edit("alice", drifted, Some(relabelled)))
            .await
            .allowed()
    );
}

#[tokio::test]
async fn gitsync_unreachable_gives_the_configured_answer() {
    let change = edit(
        "alice",
        deployment(2, "web:1"),
        Some(deployment(9, "web:1")),
    );
    for (answer, allowed) in [
        (UnreachableAnswer::Allow, true),
        (UnreachableAnswer::Deny, false),
    ] {
        let policy = drift_policy(answer, ScriptedDeclared::default());
        let decision = decide(&policy, change.clone()).await.decision();
        assert_eq!(decision.allowed, allowed, "{answer:?}");
        assert_eq!(decision.rule, "drift gitsync-unreachable");
        assert!(
            decision.reason.contains("connection refused"),
            "{}",
            decision.reason
        );
    }
}

#[tokio::test]
async fn objects_without_the_management_label_are_not_guarded() {
    let policy = drift_policy(UnreachableAnswer::Deny, ScriptedDeclared::default());
    let mut unmanaged = deployment(2, "web:1");
    unmanaged["metadata"]["labels"] = json!({});
    let mut scaled = unmanaged.clone();
    scaled["spec"]["replicas"] = json!(7);
    let verdict = decide(&policy, edit("alice", unmanaged, Some(scaled))).await;
    assert!(verdict.allowed());
    assert!(verdict.checks.is_empty(), "{verdict:?}");
}

#[tokio::test]
async fn a_sub_namespace_name_breaking_a_naming_policy_of_the_hierarchy_config_is_denied() {
    use clap::Parser;
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "namingPolicies:\n  - root: '^team-(?P<team>[a-z]+)$'\n    match: '^${team}-[a-z]+$'\n",
    )
    .unwrap();
    let args = arbor_webhook::Args::try_parse_from([
        "arbor-webhook",
        "--webhook-cert",
        "tls.crt",
        "--webhook-key",
        "tls.key",
        "--hierarchy-config",
        config.path().to_str().unwrap(),
    ])
    .unwrap();
    let policy = policy(args.settings().unwrap(), vec![root("team-blue")], None);
    let create = |name: &str| {
        request(
            "CREATE",
            ("arbor.dev", "v1alpha1", "SubNamespace"),
            Some("team-blue"),
            name,
            "alice",
            Some(
                json!({"apiVersion": ARBOR, "kind": "SubNamespace", "metadata": {"name": name, "namespace": "team-blue"}, "spec": {}}),
            ),
            None,
        )
    };
    assert!(decide(&policy, create("blue-web")).await.allowed());
    let decision = decide(&policy, create("web")).await.decision();
    assert!(!decision.allowed);
    assert_eq!(decision.rule, "seeds/001 tree naming-policy");
    for quoted in ["web", "^team-(?P<team>[a-z]+)$", "^blue-[a-z]+$"] {
        assert!(
            decision.reason.contains(quoted),
            "{quoted}: {}",
            decision.reason
        );
    }
}

/// #17.1: the SubNamespace kind follows the key domain. Under `accurate.cybozu.com` the tree
/// rules judge `accurate.cybozu.com/v2` SubNamespaces (spec optional, as Accurate documents
/// them), and an `arbor.dev` SubNamespace is not a tree object there.
#[tokio::test]
async fn sub_namespace_rules_follow_the_domain_group() {
    let keys = arbor_policy::keys::Keys::for_domain("accurate.cybozu.com").unwrap();
    let settings = PolicySettings::new(
        settings(ClusterGitTrackMode::IncludeNamespaced).scope,
        keys.clone(),
    );
    let tree = vec![
        NamespaceState::new("team").with_label(&keys.type_label, "root"),
        NamespaceState::new("plain"),
    ];
    let accurate = policy(settings, tree, None);
    let create = |group: &str, version: &str, namespace: &str| {
        let object = json!({"apiVersion": format!("{group}/{version}"), "kind": "SubNamespace",
            "metadata": {"name": "child", "namespace": namespace}});
        request(
            "CREATE",
            (group, version, "SubNamespace"),
            Some(namespace),
            "child",
            "alice",
            Some(object),
            None,
        )
    };
    assert!(
        decide(&accurate, create("accurate.cybozu.com", "v2", "team"))
            .await
            .allowed()
    );
    let decision = decide(&accurate, create("accurate.cybozu.com", "v2", "plain"))
        .await
        .decision();
    assert_eq!(decision.rule, "seeds/001 tree parent-not-root-or-sub");
    assert!(
        decide(&accurate, create("arbor.dev", "v1alpha1", "plain"))
            .await
            .allowed()
    );
}
