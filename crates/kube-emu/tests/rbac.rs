//! RBAC enforced (`KubeEmu::builder().rbac(true)`), driven with kube-rs: each kind of rule
//! and subject decides as kube-apiserver's RBAC authorizer does, bindings take effect as soon
//! as they are stored, refusals carry kube-apiserver's Forbidden wording, and access reviews
//! and impersonation ask the same authorizer.

mod support;

use arbor_kube_emu::KubeEmu;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use support::api_status;

/// An emulator with RBAC on, its admin's client, and namespaces `team` and `other`.
async fn start() -> (KubeEmu, kube::Client) {
    let (emu, admin) = support::start_with(KubeEmu::builder().rbac(true)).await;
    for namespace in ["team", "other"] {
        let (code, body) = support::post(
            &admin,
            "/api/v1/namespaces",
            json!({"metadata": {"name": namespace}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
    }
    (emu, admin)
}

/// Creates `object` at `path` as the admin.
async fn admin_create(admin: &kube::Client, path: &str, object: Value) {
    let (code, body) = support::post(admin, path, object).await;
    assert_eq!(code, 201, "creating at {path}: {body}");
}

async fn cluster_role(admin: &kube::Client, name: &str, rules: Value) {
    admin_create(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": name}, "rules": rules}),
    )
    .await;
}

async fn role(admin: &kube::Client, namespace: &str, name: &str, rules: Value) {
    admin_create(
        admin,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles"),
        json!({"metadata": {"name": name}, "rules": rules}),
    )
    .await;
}

/// Binds `role_kind`/`role_name` to `subjects`: a RoleBinding in `namespace`, or a
/// ClusterRoleBinding when `namespace` is `None`.
async fn bind(
    admin: &kube::Client,
    namespace: Option<&str>,
    name: &str,
    role_kind: &str,
    role_name: &str,
    subjects: Value,
) {
    let path = match namespace {
        Some(namespace) => {
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings")
        }
        None => "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_owned(),
    };
    admin_create(
        admin,
        &path,
        json!({"metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
               "subjects": subjects}),
    )
    .await;
}

fn user(name: &str) -> Value {
    json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}])
}

/// A client acting as `name` in `groups`.
async fn client_for(emu: &KubeEmu, name: &str, groups: &[&str]) -> kube::Client {
    support::client_as(emu, &emu.token_for(name, groups)).await
}

/// What a SelfSubjectAccessReview of `attributes` says for `client`.
async fn can_i(client: &kube::Client, attributes: Value) -> Value {
    let key = if attributes.get("path").is_some() {
        "nonResourceAttributes"
    } else {
        "resourceAttributes"
    };
    let (code, body) = support::post(
        client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {key: attributes}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    body["status"].clone()
}

async fn allowed(client: &kube::Client, attributes: Value) -> bool {
    can_i(client, attributes.clone()).await["allowed"] == true
}

async fn create_config_map(admin: &kube::Client, namespace: &str, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    support::create(&api, &support::config_map(name, &[])).await;
}

#[tokio::test]
async fn a_role_binding_grants_its_role_in_its_namespace_only_from_the_moment_it_is_stored() {
    let (emu, admin) = start().await;
    create_config_map(&admin, "team", "settings").await;
    create_config_map(&admin, "other", "settings").await;
    let alice = client_for(&emu, "alice", &[]).await;
    let in_team: Api<ConfigMap> = Api::namespaced(alice.clone(), "team");
    let status = api_status(in_team.get("settings").await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "configmaps \"settings\" is forbidden: User \"alice\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );

    role(
        &admin,
        "team",
        "reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
    )
    .await;
    bind(
        &admin,
        Some("team"),
        "reader",
        "Role",
        "reader",
        user("alice"),
    )
    .await;
    in_team.get("settings").await.expect("granted in team");
    in_team
        .list(&ListParams::default())
        .await
        .expect("list granted");
    let in_other: Api<ConfigMap> = Api::namespaced(alice.clone(), "other");
    let status = api_status(in_other.get("settings").await.unwrap_err());
    assert!(
        status.message.ends_with("in the namespace \"other\""),
        "{}",
        status.message
    );
    // Across namespaces is a cluster-scoped list: a RoleBinding never reaches it.
    let everywhere: Api<ConfigMap> = Api::all(alice.clone());
    let status = api_status(everywhere.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        status.message,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope"
    );
    let details = status.details.expect("details");
    assert_eq!(
        (details.kind.as_str(), details.name.as_str()),
        ("configmaps", "")
    );
    // Verbs the Role does not name stay refused.
    let status = api_status(
        in_team
            .create(&PostParams::default(), &support::config_map("new", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
}

#[tokio::test]
async fn a_cluster_role_bound_in_a_namespace_applies_there_and_cluster_wide_when_cluster_bound() {
    let (emu, admin) = start().await;
    cluster_role(
        &admin,
        "deployment-reader",
        json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    bind(
        &admin,
        Some("team"),
        "bob-reads",
        "ClusterRole",
        "deployment-reader",
        user("bob"),
    )
    .await;
    bind(
        &admin,
        None,
        "carol-reads",
        "ClusterRole",
        "deployment-reader",
        user("carol"),
    )
    .await;
    let bob = client_for(&emu, "bob", &[]).await;
    let carol = client_for(&emu, "carol", &[]).await;
    let list = |namespace: &str| json!({"verb": "list", "group": "apps", "resource": "deployments", "namespace": namespace});
    assert!(allowed(&bob, list("team")).await);
    assert!(!allowed(&bob, list("other")).await);
    assert!(!allowed(&bob, list("")).await);
    assert!(allowed(&carol, list("other")).await);
    assert!(allowed(&carol, list("")).await);
    // The API group is part of the rule.
    assert!(
        !allowed(
            &carol,
            json!({"verb": "list", "group": "extensions", "resource": "deployments", "namespace": "team"})
        )
        .await
    );
    let review = can_i(&carol, list("team")).await;
    assert_eq!(
        review["reason"],
        "RBAC: allowed by ClusterRoleBinding \"carol-reads\" of ClusterRole \"deployment-reader\" to User \"carol\""
    );
    let review = can_i(&bob, list("team")).await;
    assert_eq!(
        review["reason"],
        "RBAC: allowed by RoleBinding \"bob-reads/team\" of ClusterRole \"deployment-reader\" to User \"bob\""
    );
}

#[tokio::test]
async fn subresources_need_their_own_entry_or_star_slash_and_star_matches_everything() {
    let (emu, admin) = start().await;
    cluster_role(
        &admin,
        "status-writer",
        json!([
            {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["update", "patch"]},
            {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["get"]},
            {"apiGroups": ["example.com"], "resources": ["*"], "verbs": ["*"]},
        ]),
    )
    .await;
    bind(
        &admin,
        None,
        "dana",
        "ClusterRole",
        "status-writer",
        user("dana"),
    )
    .await;
    let dana = client_for(&emu, "dana", &[]).await;
    let ask = |verb: &str, resource: &str, subresource: &str| {
        json!({"verb": verb, "group": "apps", "resource": resource, "subresource": subresource,
               "namespace": "team", "name": "web"})
    };
    assert!(allowed(&dana, ask("update", "deployments", "status")).await);
    assert!(!allowed(&dana, ask("update", "deployments", "")).await);
    assert!(!allowed(&dana, ask("update", "replicasets", "status")).await);
    assert!(allowed(&dana, ask("get", "deployments", "scale")).await);
    assert!(allowed(&dana, ask("get", "statefulsets", "scale")).await);
    assert!(!allowed(&dana, ask("get", "statefulsets", "")).await);
    assert!(
        allowed(
            &dana,
            json!({"verb": "deletecollection", "group": "example.com", "resource": "gadgets",
                   "subresource": "status", "namespace": "team"})
        )
        .await
    );
    // Through a real request: the status of a Deployment, refused on the main resource.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    admin_create(
        &admin,
        "/apis/apps/v1/namespaces/team/deployments",
        deployment,
    )
    .await;
    let patch = json!({"status": {"observedGeneration": 1}});
    let (code, body) = support::raw(
        &dana,
        "PATCH",
        "/apis/apps/v1/namespaces/team/deployments/web/status",
        "application/merge-patch+json",
        Some(patch.clone()),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = support::raw(
        &dana,
        "PATCH",
        "/apis/apps/v1/namespaces/team/deployments/web",
        "application/merge-patch+json",
        Some(patch),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "deployments.apps \"web\" is forbidden: User \"dana\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"team\""
    );
    assert_eq!(body["details"]["group"], "apps");
}

#[tokio::test]
async fn resource_names_allow_the_named_object_and_never_a_create_or_a_plain_list() {
    let (emu, admin) = start().await;
    create_config_map(&admin, "team", "settings").await;
    create_config_map(&admin, "team", "secrets-too").await;
    role(
        &admin,
        "team",
        "settings-only",
        json!([{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["settings"], "verbs": ["get", "list", "watch", "create"]}]),
    )
    .await;
    bind(
        &admin,
        Some("team"),
        "erin",
        "Role",
        "settings-only",
        user("erin"),
    )
    .await;
    let erin = client_for(&emu, "erin", &[]).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(erin.clone(), "team");
    config_maps.get("settings").await.expect("the named object");
    let status = api_status(config_maps.get("secrets-too").await.unwrap_err());
    assert_eq!(status.code, 403);
    let status = api_status(config_maps.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        status.message,
        "configmaps is forbidden: User \"erin\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    // A list pinned to the name by field selector is a request for that object.
    let pinned = config_maps
        .list(&ListParams::default().fields("metadata.name=settings"))
        .await
        .expect("a list of the named object");
    assert_eq!(pinned.items.len(), 1);
    let status = api_status(
        config_maps
            .create(
                &PostParams::default(),
                &support::config_map("settings", &[]),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403, "a create has no name to match");
}

#[tokio::test]
async fn group_and_service_account_subjects_match_as_in_kubernetes() {
    let (emu, admin) = start().await;
    cluster_role(
        &admin,
        "secret-reader",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
    )
    .await;
    let ask = json!({"verb": "get", "resource": "secrets", "namespace": "team", "name": "s"});
    let in_team = support::client_as(&emu, &emu.service_account_token("team", "robot")).await;
    let in_other = support::client_as(&emu, &emu.service_account_token("other", "robot")).await;
    let ops = client_for(&emu, "frank", &["ops"]).await;
    let nobody = client_for(&emu, "grace", &[]).await;

    // ServiceAccount subject without a namespace: the RoleBinding's namespace.
    bind(
        &admin,
        Some("team"),
        "robot",
        "ClusterRole",
        "secret-reader",
        json!([{"kind": "ServiceAccount", "name": "robot"}]),
    )
    .await;
    assert!(allowed(&in_team, ask.clone()).await);
    assert!(!allowed(&in_other, ask.clone()).await);

    // Group of one namespace's service accounts.
    bind(
        &admin,
        Some("other"),
        "other-accounts",
        "ClusterRole",
        "secret-reader",
        json!([{"kind": "Group", "name": "system:serviceaccounts:other"}]),
    )
    .await;
    let in_other_namespace =
        json!({"verb": "get", "resource": "secrets", "namespace": "other", "name": "s"});
    assert!(allowed(&in_other, in_other_namespace.clone()).await);
    assert!(!allowed(&in_team, in_other_namespace.clone()).await);

    // A group the token carries.
    assert!(!allowed(&ops, ask.clone()).await);
    bind(
        &admin,
        None,
        "ops",
        "ClusterRole",
        "secret-reader",
        json!([{"kind": "Group", "name": "ops"}]),
    )
    .await;
    assert!(allowed(&ops, ask.clone()).await);
    assert!(!allowed(&nobody, ask.clone()).await);

    // Every service account, then everyone authenticated.
    let in_default = support::client_as(&emu, &emu.service_account_token("default", "x")).await;
    assert!(!allowed(&in_default, ask.clone()).await);
    bind(
        &admin,
        None,
        "all-accounts",
        "ClusterRole",
        "secret-reader",
        json!([{"kind": "Group", "name": "system:serviceaccounts"}]),
    )
    .await;
    assert!(allowed(&in_default, ask.clone()).await);
    assert!(!allowed(&nobody, ask.clone()).await);
    bind(
        &admin,
        None,
        "everyone",
        "ClusterRole",
        "secret-reader",
        json!([{"kind": "Group", "name": "system:authenticated"}]),
    )
    .await;
    assert!(allowed(&nobody, ask).await);
}

#[tokio::test]
async fn non_resource_urls_are_authorized_with_trailing_star_prefixes() {
    let (emu, admin) = start().await;
    let henry = client_for(&emu, "henry", &[]).await;
    // The bootstrap system:discovery role lets everyone authenticated discover.
    let (code, _) = support::get(&henry, "/apis").await;
    assert_eq!(code, 200);
    let (code, _) = support::get(&henry, "/version").await;
    assert_eq!(code, 200);
    assert!(allowed(&henry, json!({"verb": "get", "path": "/api/v1"})).await);

    let (code, _) = support::raw(
        &admin,
        "DELETE",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:discovery",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, body) = support::get(&henry, "/apis").await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "forbidden: User \"henry\" cannot get path \"/apis\""
    );
    assert_eq!(body["details"], json!({}));

    cluster_role(
        &admin,
        "apis-reader",
        json!([{"nonResourceURLs": ["/apis*"], "verbs": ["get"]}]),
    )
    .await;
    bind(
        &admin,
        None,
        "henry",
        "ClusterRole",
        "apis-reader",
        user("henry"),
    )
    .await;
    let (code, _) = support::get(&henry, "/apis").await;
    assert_eq!(code, 200);
    let (code, _) = support::get(&henry, "/apis/apps/v1").await;
    assert_eq!(code, 200);
    let (code, _) = support::get(&henry, "/api/v1").await;
    assert_eq!(code, 403);
    assert!(!allowed(&henry, json!({"verb": "post", "path": "/apis"})).await);
}

#[tokio::test]
async fn aggregated_cluster_roles_collect_the_rules_of_the_roles_their_selectors_pick() {
    let (emu, admin) = start().await;
    // The bootstrap admin / edit / view are filled in, view inside edit inside admin.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    let rules = |role: k8s_openapi::api::rbac::v1::ClusterRole| role.rules.unwrap_or_default();
    let view = rules(roles.get("view").await.expect("view"));
    let edit = rules(roles.get("edit").await.expect("edit"));
    let admin_rules = rules(roles.get("admin").await.expect("admin"));
    assert!(!view.is_empty());
    assert!(view.iter().all(|rule| edit.contains(rule)));
    assert!(edit.iter().all(|rule| admin_rules.contains(rule)));

    bind(
        &admin,
        Some("team"),
        "ivan",
        "ClusterRole",
        "view",
        user("ivan"),
    )
    .await;
    let ivan = client_for(&emu, "ivan", &[]).await;
    let gadgets =
        json!({"verb": "list", "group": "example.com", "resource": "gadgets", "namespace": "team"});
    assert!(
        allowed(
            &ivan,
            json!({"verb": "list", "resource": "pods", "namespace": "team"})
        )
        .await
    );
    assert!(!allowed(&ivan, gadgets.clone()).await);
    // A role labelled for view joins it at once, and leaves it when deleted.
    admin_create(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "gadget-viewer",
                            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
               "rules": [{"apiGroups": ["example.com"], "resources": ["gadgets"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    assert!(allowed(&ivan, gadgets.clone()).await);
    let view = rules(roles.get("admin").await.expect("admin"));
    assert!(
        view.iter()
            .any(|rule| rule.resources.as_deref() == Some(&["gadgets".to_owned()][..])),
        "admin aggregates view through edit: {view:?}"
    );
    roles
        .delete("gadget-viewer", &Default::default())
        .await
        .expect("deleted");
    assert!(!allowed(&ivan, gadgets).await);

    // A role of one's own with matchExpressions.
    admin_create(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "monitoring"},
               "aggregationRule": {"clusterRoleSelectors": [
                   {"matchExpressions": [{"key": "example.com/monitoring", "operator": "Exists"}]}]}}),
    )
    .await;
    cluster_role(
        &admin,
        "unlabelled",
        json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]),
    )
    .await;
    admin_create(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "metrics", "labels": {"example.com/monitoring": "yes"}},
               "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
    )
    .await;
    let monitoring = rules(roles.get("monitoring").await.expect("monitoring"));
    assert_eq!(monitoring.len(), 1, "{monitoring:?}");
    assert_eq!(
        monitoring[0].non_resource_urls.as_deref(),
        Some(&["/metrics".to_owned()][..])
    );
}

#[tokio::test]
async fn a_binding_to_a_missing_role_is_named_in_the_refusal() {
    let (emu, admin) = start().await;
    create_config_map(&admin, "team", "settings").await;
    bind(&admin, Some("team"), "ghost", "Role", "ghost", user("judy")).await;
    let judy = client_for(&emu, "judy", &[]).await;
    let api: Api<ConfigMap> = Api::namespaced(judy, "team");
    let status = api_status(api.get("settings").await.unwrap_err());
    assert_eq!(
        status.message,
        "configmaps \"settings\" is forbidden: User \"judy\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"
    );
}

#[tokio::test]
async fn a_namespace_object_is_in_its_own_namespace_for_role_bindings() {
    let (emu, admin) = start().await;
    role(
        &admin,
        "team",
        "see-namespace",
        json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]),
    )
    .await;
    bind(
        &admin,
        Some("team"),
        "ken",
        "Role",
        "see-namespace",
        user("ken"),
    )
    .await;
    let ken = client_for(&emu, "ken", &[]).await;
    let namespaces: Api<Namespace> = Api::all(ken);
    namespaces.get("team").await.expect("its own namespace");
    let status = api_status(namespaces.get("other").await.unwrap_err());
    assert_eq!(
        status.message,
        "namespaces \"other\" is forbidden: User \"ken\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"other\""
    );
}

#[tokio::test]
async fn subject_access_reviews_and_impersonation_ask_the_same_authorizer() {
    let (emu, admin) = start().await;
    cluster_role(
        &admin,
        "pod-lister",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
    )
    .await;
    bind(
        &admin,
        Some("team"),
        "liz",
        "ClusterRole",
        "pod-lister",
        user("liz"),
    )
    .await;
    let review = |user: &str, namespace: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "groups": ["system:authenticated"],
                        "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": namespace}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, body) = support::post(&admin, path, review("liz", "team")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true, "{body}");
    let (_, body) = support::post(&admin, path, review("liz", "other")).await;
    // RBAC has no opinion rather than a denial: no `denied`, no reason, as kube-apiserver.
    assert_eq!(body["status"], json!({"allowed": false}), "{body}");
    let (_, body) = support::post(&admin, path, review("mallory", "team")).await;
    assert_eq!(body["status"]["allowed"], false, "{body}");
    // Local reviews ask within the namespace of their URL.
    let (code, body) = support::post(
        &admin,
        "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
               "spec": {"user": "liz", "resourceAttributes": {"verb": "list", "resource": "pods"}}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true, "{body}");
    // Liz may not ask about others, nor impersonate.
    let liz = client_for(&emu, "liz", &[]).await;
    let (code, body) = support::post(&liz, path, review("liz", "team")).await;
    assert_eq!(code, 403, "{body}");
    let request = |as_user: &str| {
        http::Request::builder()
            .method("GET")
            .uri("/api/v1/namespaces/team/pods")
            .header("Impersonate-User", as_user)
            .body(kube::client::Body::empty())
            .expect("a request")
    };
    let (code, body) = support::send(&liz, request("mallory")).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "users \"mallory\" is forbidden: User \"liz\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    cluster_role(
        &admin,
        "impersonate-mallory",
        json!([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                "resourceNames": ["mallory"]}]),
    )
    .await;
    bind(
        &admin,
        None,
        "liz-as-mallory",
        "ClusterRole",
        "impersonate-mallory",
        user("liz"),
    )
    .await;
    // Now Liz acts as Mallory, who may not list pods.
    let (code, body) = support::send(&liz, request("mallory")).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "pods is forbidden: User \"mallory\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    bind(
        &admin,
        Some("team"),
        "mallory",
        "ClusterRole",
        "pod-lister",
        user("mallory"),
    )
    .await;
    let (code, body) = support::send(&liz, request("mallory")).await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn the_admin_is_a_master_and_the_bootstrap_policy_is_stored() {
    let (emu, admin) = start().await;
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(admin.clone());
    let cluster_admin = bindings.get("cluster-admin").await.expect("bootstrapped");
    assert_eq!(
        cluster_admin.subjects.expect("subjects")[0].name,
        "system:masters"
    );
    for name in [
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        bindings.get(name).await.expect("bootstrapped");
    }
    // The admin is allowed even with every binding gone, as kube-apiserver's
    // privileged-group authorizer allows system:masters.
    let (code, _) = support::raw(
        &admin,
        "DELETE",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = support::get(&admin, "/api/v1/namespaces/team/secrets").await;
    assert_eq!(code, 200);
    // Anyone authenticated may ask about themselves (system:basic-user).
    let nora = client_for(&emu, "nora", &[]).await;
    assert!(
        !allowed(
            &nora,
            json!({"verb": "get", "resource": "secrets", "namespace": "team"})
        )
        .await
    );
}

#[tokio::test]
async fn without_rbac_the_emulator_still_allows_every_request_and_stores_no_policy() {
    let (emu, admin) = support::start().await;
    let stranger = client_for(&emu, "stranger", &[]).await;
    let (code, body) = support::get(&stranger, "/api/v1/namespaces/default/secrets").await;
    assert_eq!(code, 200, "{body}");
    let (code, body) =
        support::get(&admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles").await;
    assert_eq!(code, 200);
    assert_eq!(body["items"], json!([]));
}

#[tokio::test]
async fn a_self_subject_rules_review_lists_the_rules_of_the_bindings_that_apply() {
    let (emu, admin) = start().await;
    role(
        &admin,
        "team",
        "reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                "resourceNames": ["settings"]}]),
    )
    .await;
    bind(&admin, Some("team"), "olga", "Role", "reader", user("olga")).await;
    bind(&admin, Some("team"), "ghost", "Role", "ghost", user("olga")).await;
    let olga = client_for(&emu, "olga", &[]).await;
    let review = |namespace: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
               "spec": {"namespace": namespace}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let (code, body) = support::post(&olga, path, review("team")).await;
    assert_eq!(code, 201, "{body}");
    let status = &body["status"];
    assert!(
        status["resourceRules"]
            .as_array()
            .expect("resource rules")
            .contains(
                &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                               "resourceNames": ["settings"]})
            ),
        "{status}"
    );
    assert!(
        status["nonResourceRules"]
            .as_array()
            .expect("non-resource rules")
            .iter()
            .any(|rule| rule["nonResourceURLs"]
                .as_array()
                .is_some_and(|urls| urls.contains(&json!("/apis/*")))),
        "system:discovery is listed: {status}"
    );
    assert_eq!(status["incomplete"], true, "a binding's role is missing");
    assert_eq!(
        status["evaluationError"],
        "role.rbac.authorization.k8s.io \"ghost\" not found"
    );
    let (_, body) = support::post(&olga, path, review("other")).await;
    let rules = body["status"]["resourceRules"]
        .as_array()
        .expect("rules")
        .clone();
    assert!(
        !rules
            .iter()
            .any(|rule| rule["resources"] == json!(["configmaps"])),
        "the Role does not reach other: {rules:?}"
    );
    assert_eq!(body["status"]["incomplete"], false);
}

fn typed<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a typed object")
}

const ROLE_WRITER: &str = "role-writer";

/// `name`'s permissions in `team`: writing Roles and RoleBindings, reading ConfigMaps, reading
/// the Secret `settings` by name.
async fn grant_role_writing(admin: &kube::Client, subjects: Value) {
    cluster_role(
        admin,
        ROLE_WRITER,
        json!([
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
             "verbs": ["get", "create", "update", "patch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["settings"]},
        ]),
    )
    .await;
    bind(
        admin,
        Some("team"),
        ROLE_WRITER,
        "ClusterRole",
        ROLE_WRITER,
        subjects,
    )
    .await;
}

#[tokio::test]
async fn a_role_granting_more_than_its_writer_holds_is_refused_naming_what_is_missing() {
    use k8s_openapi::api::rbac::v1::Role;
    let (emu, admin) = start().await;
    grant_role_writing(&admin, user("alice")).await;
    let alice = client_for(&emu, "alice", &["devs"]).await;
    let roles: Api<Role> = Api::namespaced(alice.clone(), "team");
    let post = PostParams::default();

    // Within what she holds: the same verbs, fewer, or a name her rule names.
    let within = typed::<Role>(json!({"metadata": {"name": "within"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["settings"]},
    ]}));
    roles
        .create(&post, &within)
        .await
        .expect("nothing escalated");

    let sneaky = typed::<Role>(json!({"metadata": {"name": "sneaky"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]},
    ]}));
    let status = api_status(roles.create(&post, &sneaky).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "roles.rbac.authorization.k8s.io \"sneaky\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}\n{APIGroups:[\"apps\"], Resources:[\"deployments\"], Verbs:[\"create\"]}"
    );
    // A name she holds is not every name.
    let all_secrets = typed::<Role>(json!({"metadata": {"name": "all-secrets"}, "rules": [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
    ]}));
    let status = api_status(roles.create(&post, &all_secrets).await.unwrap_err());
    assert!(
        status.message.ends_with(
            "not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
        ),
        "{}",
        status.message
    );

    // Updates are checked as creates are: by replace and by patch.
    let mut widened = roles.get("within").await.expect("stored");
    widened.rules.get_or_insert_with(Vec::new).push(typed(
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}),
    ));
    let status = api_status(roles.replace("within", &post, &widened).await.unwrap_err());
    assert!(
        status
            .message
            .starts_with("roles.rbac.authorization.k8s.io \"within\" is forbidden: user \"alice\"")
            && status
                .message
                .ends_with("{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"),
        "{}",
        status.message
    );
    let patch = json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    let status = api_status(
        roles
            .patch(
                "within",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403, "{}", status.message);
    // A label is no escalation... but kube checks the whole role on any change: labels pass
    // only because the rules stay within what she holds.
    let labelled = json!({"metadata": {"labels": {"team": "a"}}});
    roles
        .patch(
            "within",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&labelled),
        )
        .await
        .expect("rules unchanged and held");

    // `escalate` on roles lets her grant what she does not hold.
    bind(
        &admin,
        Some("team"),
        "escalator",
        "ClusterRole",
        "escalator",
        user("alice"),
    )
    .await;
    cluster_role(
        &admin,
        "escalator",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}]),
    )
    .await;
    roles
        .create(&post, &sneaky)
        .await
        .expect("escalate allows it");

    // The admin (system:masters) is never checked.
    let admin_roles: Api<Role> = Api::namespaced(admin.clone(), "team");
    let everything = typed::<Role>(json!({"metadata": {"name": "everything"}, "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    ]}));
    admin_roles
        .create(&post, &everything)
        .await
        .expect("a master");
}

#[tokio::test]
async fn a_binding_needs_the_permissions_of_its_role_or_bind_on_that_role() {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
    let (emu, admin) = start().await;
    grant_role_writing(
        &admin,
        json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "team"}]),
    )
    .await;
    role(
        &admin,
        "team",
        "config-reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    )
    .await;
    cluster_role(
        &admin,
        "secret-reader",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]),
    )
    .await;
    cluster_role(
        &admin,
        "pod-killer",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]),
    )
    .await;
    let deployer = support::client_as(&emu, &emu.service_account_token("team", "deployer")).await;
    let bindings: Api<RoleBinding> = Api::namespaced(deployer.clone(), "team");
    let post = PostParams::default();
    let binding = |name: &str, kind: &str, role: &str| {
        typed::<RoleBinding>(json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}]}))
    };

    bindings
        .create(&post, &binding("config", "Role", "config-reader"))
        .await
        .expect("the deployer holds what config-reader grants");
    let status = api_status(
        bindings
            .create(&post, &binding("secrets", "ClusterRole", "secret-reader"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "rolebindings.rbac.authorization.k8s.io \"secrets\" is forbidden: user \"system:serviceaccount:team:deployer\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:team\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
    );
    let status = api_status(
        bindings
            .create(&post, &binding("ghost", "Role", "ghost"))
            .await
            .unwrap_err(),
    );
    // kube-apiserver returns the role lookup's error as it is: the role's 404.
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (
            404,
            "NotFound",
            "roles.rbac.authorization.k8s.io \"ghost\" not found"
        )
    );

    // `bind` on one ClusterRole, by name, in team: that role only, and only in team.
    cluster_role(
        &admin,
        "binder",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                "verbs": ["bind"], "resourceNames": ["secret-reader"]}]),
    )
    .await;
    bind(
        &admin,
        Some("team"),
        "binder",
        "ClusterRole",
        "binder",
        json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "team"}]),
    )
    .await;
    bindings
        .create(&post, &binding("secrets", "ClusterRole", "secret-reader"))
        .await
        .expect("bind on secret-reader");
    let status = api_status(
        bindings
            .create(&post, &binding("killer", "ClusterRole", "pod-killer"))
            .await
            .unwrap_err(),
    );
    assert!(
        status
            .message
            .ends_with("{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"),
        "{}",
        status.message
    );
    // A ClusterRoleBinding needs `bind` at the cluster scope, which a RoleBinding never gives.
    cluster_role(
        &admin,
        "crb-writer",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "verbs": ["create"]}]),
    )
    .await;
    bind(
        &admin,
        None,
        "crb-writer",
        "ClusterRole",
        "crb-writer",
        json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "team"}]),
    )
    .await;
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(deployer.clone());
    let cluster_binding = typed::<ClusterRoleBinding>(json!({"metadata": {"name": "secrets"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "secret-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}]}));
    let status = api_status(
        cluster_bindings
            .create(&post, &cluster_binding)
            .await
            .unwrap_err(),
    );
    assert!(
        status.message.starts_with(
            "clusterrolebindings.rbac.authorization.k8s.io \"secrets\" is forbidden: user \"system:serviceaccount:team:deployer\""
        ),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn an_aggregation_rule_needs_every_permission_and_without_rbac_nothing_is_checked() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let (emu, admin) = start().await;
    cluster_role(
        &admin,
        "cluster-role-writer",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}]),
    )
    .await;
    bind(
        &admin,
        None,
        "cluster-role-writer",
        "ClusterRole",
        "cluster-role-writer",
        user("dave"),
    )
    .await;
    let dave = client_for(&emu, "dave", &[]).await;
    let roles: Api<ClusterRole> = Api::all(dave);
    let aggregated = typed::<ClusterRole>(json!({"metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"gather": "true"}}]}}));
    let status = api_status(
        roles
            .create(&PostParams::default(), &aggregated)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "clusterroles.rbac.authorization.k8s.io \"gatherer\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );

    // Escalation prevention is RBAC's: without it, anyone may write any role.
    let (open, _) = support::start().await;
    let eve = support::client_as(&open, &open.token_for("eve", &[])).await;
    Api::<ClusterRole>::all(eve)
        .create(&PostParams::default(), &aggregated)
        .await
        .expect("no RBAC, no escalation check");
}

/// `kubectl auth whoami` for `client` with impersonation `headers`: the status and the body.
async fn who_am_i(client: &kube::Client, headers: &[(&str, &str)]) -> (u16, Value) {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let mut request = http::Request::builder()
        .method("POST")
        .uri("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header(http::header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(kube::client::Body::from(
            serde_json::to_vec(&body).expect("json"),
        ))
        .expect("a request");
    support::send(client, request).await
}

#[tokio::test]
async fn impersonating_a_uid_and_extras_needs_impersonate_on_uids_and_each_userextra() {
    let (emu, admin) = start().await;
    cluster_role(
        &admin,
        "impersonator",
        json!([
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/scopes"],
             "verbs": ["impersonate"], "resourceNames": ["view"]},
        ]),
    )
    .await;
    bind(
        &admin,
        None,
        "impersonator",
        "ClusterRole",
        "impersonator",
        user("bob"),
    )
    .await;
    let bob = client_for(&emu, "bob", &[]).await;
    let (code, body) = who_am_i(&bob, &[]).await;
    assert_eq!(
        (code, &body["status"]["userInfo"]["username"]),
        (201, &json!("bob"))
    );

    let (code, body) = who_am_i(
        &bob,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Extra-Scopes", "view"),
        ],
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "alice", "groups": ["system:authenticated"], "extra": {"scopes": ["view"]}})
    );
    let (code, body) = who_am_i(
        &bob,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Extra-Scopes", "view"),
            ("Impersonate-Extra-Scopes", "edit"),
        ],
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str().unwrap_or_default()),
        (
            403,
            "userextras.authentication.k8s.io \"edit\" is forbidden: User \"bob\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope"
        ),
    );
    let (code, body) = who_am_i(
        &bob,
        &[("Impersonate-User", "alice"), ("Impersonate-Uid", "1234")],
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str().unwrap_or_default()),
        (
            403,
            "uids.authentication.k8s.io \"1234\" is forbidden: User \"bob\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope"
        ),
    );

    // Granted uids and a percent-encoded extra key: the impersonated user carries both, and
    // the uid reaches what the request does (a SubjectAccessReview's spec takes its extras).
    cluster_role(
        &admin,
        "uid-impersonator",
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["uids", "userextras/example.com/team"],
             "verbs": ["impersonate"]},
        ]),
    )
    .await;
    bind(
        &admin,
        None,
        "uid-impersonator",
        "ClusterRole",
        "uid-impersonator",
        user("bob"),
    )
    .await;
    let (code, body) = who_am_i(
        &bob,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Uid", "1234"),
            ("Impersonate-Extra-Example.com%2fteam", "platform"),
        ],
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "alice", "uid": "1234", "groups": ["system:authenticated"],
               "extra": {"example.com/team": ["platform"]}})
    );
    // Without a user (an empty Impersonate-User is none), kube-apiserver's impersonation
    // filter answers a plain-text 500 listing what was asked; an empty user alone is no
    // impersonation.
    let (code, body) = who_am_i(
        &bob,
        &[("Impersonate-User", ""), ("Impersonate-Uid", "1234")],
    )
    .await;
    assert_eq!(
        (code, body),
        (
            500,
            json!(
                "Internal Server Error: \"/apis/authentication.k8s.io/v1/selfsubjectreviews\": requested [{UID  1234  authentication.k8s.io/v1  }] without impersonating a user\n"
            )
        )
    );
    let (code, body) = who_am_i(&bob, &[("Impersonate-User", "")]).await;
    assert_eq!(
        (code, &body["status"]["userInfo"]["username"]),
        (201, &json!("bob"))
    );
}
