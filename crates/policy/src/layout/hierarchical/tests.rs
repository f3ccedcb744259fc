//! One test per layout rule, on variations of a small foo-corp-like repository.

use serde_json::{Value, json};

use super::*;
use crate::layout::HierarchyMode;

const BACKEND: &str = "namespaces/online/shipping-app-backend";

fn sync_of(kinds: Value) -> Value {
    json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "Sync", "metadata": {"name": "all"},
           "spec": {"groups": kinds}})
}

fn base_sync() -> Value {
    sync_of(json!([
        {"group": "rbac.authorization.k8s.io", "kinds": [
            {"kind": "Role", "versions": [{"version": "v1"}]},
            {"kind": "RoleBinding", "versions": [{"version": "v1"}]},
            {"kind": "ClusterRole", "versions": [{"version": "v1"}]}]},
        {"kinds": [
            {"kind": "ResourceQuota", "hierarchyMode": "hierarchicalQuota",
             "versions": [{"version": "v1"}]},
            {"kind": "ConfigMap", "versions": [{"version": "v1"}]},
            {"kind": "Secret", "hierarchyMode": "none", "versions": [{"version": "v1"}]}]},
        {"group": "example.com", "kinds": [{"kind": "Widget", "versions": [{"version": "v1"}]}]},
    ]))
}

fn namespace(name: &str, env: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": {"env": env}}})
}

fn object(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
}

fn rolebinding(name: &str) -> Value {
    object("rbac.authorization.k8s.io/v1", "RoleBinding", name)
}

fn with_selector(mut object: Value, selector: &str) -> Value {
    object["metadata"]["annotations"] = json!({"nomos.dev/namespace-selector": selector});
    object
}

fn quota(name: &str, pods: &str) -> Value {
    let mut q = object("v1", "ResourceQuota", name);
    q["spec"] = json!({"hard": {"pods": pods}});
    q
}

/// The base repository plus `extra` files.
fn repo(extra: Vec<(&str, Value)>) -> Vec<SourceFile> {
    let mut files = vec![
        SourceFile::new(
            "system/repo.yaml",
            vec![object("nomos.dev/v1alpha1", "Repo", "repo")],
        ),
        SourceFile::new("system/sync.yaml", vec![base_sync()]),
        SourceFile::new(
            "cluster/namespace-reader.yaml",
            vec![object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "namespace-reader",
            )],
        ),
    ];
    for (env, short) in [("prod", "prod"), ("staging", "staging"), ("dev", "dev")] {
        files.push(SourceFile::new(
            format!("{BACKEND}/shipping-{short}/namespace.yaml"),
            vec![namespace(&format!("shipping-{short}"), env)],
        ));
    }
    files.extend(
        extra
            .into_iter()
            .map(|(path, object)| SourceFile::new(path, vec![object])),
    );
    files
}

fn codes(files: &[SourceFile]) -> Vec<ErrorCode> {
    let errors = parse_hierarchical(files).expect_err("the repository should be refused");
    let mut codes: Vec<_> = errors.iter().map(|e| e.code).collect();
    codes.dedup();
    codes
}

fn key(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey {
        group_kind: GroupKind::new(group, kind),
        namespace: namespace.map(Into::into),
        name: name.into(),
    }
}

fn rb_key(namespace: &str, name: &str) -> ObjectKey {
    key(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        Some(namespace),
        name,
    )
}

#[test]
fn valid_repository_declares_namespaces_cluster_objects_and_kinds() {
    let state = parse_hierarchical(&repo(vec![])).unwrap();
    assert_eq!(state.layout, Layout::Hierarchical);
    assert_eq!(
        state.namespaces.iter().collect::<Vec<_>>(),
        ["shipping-dev", "shipping-prod", "shipping-staging"]
    );
    assert!(
        state
            .objects
            .contains_key(&key("", "Namespace", None, "shipping-dev"))
    );
    let reader = &state.objects[&key(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        None,
        "namespace-reader",
    )];
    assert_eq!(reader.source.path, "cluster/namespace-reader.yaml");
    assert!(state.declares_kind(&GroupKind::new("", "Namespace")));
    assert_eq!(
        state.kinds[&GroupKind::new("", "ResourceQuota")].hierarchy_mode,
        HierarchyMode::HierarchicalQuota
    );
    assert_eq!(state.objects.len(), 4);
}

#[test]
fn abstract_namespace_objects_are_inherited_by_every_descendant() {
    let files = repo(vec![
        (
            "namespaces/online/shipping-app-backend/pod-creator.yaml",
            rolebinding("pod-creator"),
        ),
        (
            "namespaces/online/shipping-app-backend/shipping-dev/job-creator.yaml",
            object("rbac.authorization.k8s.io/v1", "Role", "job-creator"),
        ),
    ]);
    let state = parse_hierarchical(&files).unwrap();
    for ns in ["shipping-prod", "shipping-staging", "shipping-dev"] {
        let declared = &state.objects[&rb_key(ns, "pod-creator")];
        assert_eq!(declared.object["metadata"]["namespace"], ns);
        assert_eq!(declared.inherited_from.as_deref(), Some(BACKEND));
        assert_eq!(declared.source.path, format!("{BACKEND}/pod-creator.yaml"));
    }
    let role = key(
        "rbac.authorization.k8s.io",
        "Role",
        Some("shipping-dev"),
        "job-creator",
    );
    assert_eq!(state.objects[&role].inherited_from, None);
    assert_eq!(state.in_namespace("shipping-dev").count(), 2);
    assert_eq!(state.in_namespace("shipping-prod").count(), 1);
}

#[test]
fn objects_at_the_namespaces_root_reach_every_namespace() {
    let state =
        parse_hierarchical(&repo(vec![("namespaces/sre.yaml", rolebinding("sre"))])).unwrap();
    assert_eq!(state.objects.keys().filter(|k| k.name == "sre").count(), 3);
    assert_eq!(
        state.objects[&rb_key("shipping-prod", "sre")]
            .inherited_from
            .as_deref(),
        Some("namespaces")
    );
}

#[test]
fn namespace_selector_limits_inheritance_to_matching_namespaces() {
    let selector = json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "not-dev"},
        "spec": {"selector": {"matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["dev"]}]}}});
    let mut arbor_annotated = rolebinding("prod-only");
    arbor_annotated["metadata"]["annotations"] =
        json!({"arbor.dev/namespace-selector": "prod", "keep": "me"});
    let prod = json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "prod"}, "spec": {"selector": {"matchLabels": {"env": "prod"}}}});
    let files = repo(vec![
        ("namespaces/selectors.yaml", selector),
        ("namespaces/online/prod-selector.yaml", prod),
        (
            "namespaces/online/shipping-app-backend/sre.yaml",
            with_selector(rolebinding("sre"), "not-dev"),
        ),
        (
            "namespaces/online/shipping-app-backend/prod-only.yaml",
            arbor_annotated,
        ),
    ]);
    let state = parse_hierarchical(&files).unwrap();
    assert!(state.objects.contains_key(&rb_key("shipping-prod", "sre")));
    assert!(
        state
            .objects
            .contains_key(&rb_key("shipping-staging", "sre"))
    );
    assert!(!state.objects.contains_key(&rb_key("shipping-dev", "sre")));
    let only = &state.objects[&rb_key("shipping-prod", "prod-only")];
    assert_eq!(
        only.object["metadata"]["annotations"],
        json!({"keep": "me"})
    );
    assert!(
        !state
            .objects
            .contains_key(&rb_key("shipping-staging", "prod-only"))
    );
    let sre = &state.objects[&rb_key("shipping-prod", "sre")];
    assert!(sre.object["metadata"].get("annotations").is_none());
}

#[test]
fn hierarchical_quota_nearest_declaration_wins() {
    let files = repo(vec![
        ("namespaces/quota.yaml", quota("quota", "100")),
        ("namespaces/online/quota.yaml", quota("quota", "50")),
        (
            "namespaces/online/shipping-app-backend/shipping-dev/quota.yaml",
            quota("quota", "5"),
        ),
    ]);
    let state = parse_hierarchical(&files).unwrap();
    let pods = |ns: &str| {
        let declared = &state.objects[&key("", "ResourceQuota", Some(ns), "quota")];
        (
            declared.object["spec"]["hard"]["pods"].clone(),
            declared.inherited_from.clone(),
        )
    };
    assert_eq!(pods("shipping-dev"), (json!("5"), None));
    assert_eq!(
        pods("shipping-prod"),
        (json!("50"), Some("namespaces/online".into()))
    );
}

#[test]
fn same_kind_and_name_twice_in_ancestry_is_refused() {
    let files = repo(vec![
        (
            "namespaces/online/pod-creator.yaml",
            rolebinding("pod-creator"),
        ),
        (
            "namespaces/online/shipping-app-backend/shipping-dev/pod-creator.yaml",
            rolebinding("pod-creator"),
        ),
    ]);
    let errors = parse_hierarchical(&files).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].code, ErrorCode::DuplicateInAncestry);
    assert_eq!(
        errors[0].path,
        "namespaces/online/shipping-app-backend/shipping-dev/pod-creator.yaml"
    );
}

#[test]
fn same_kind_and_name_twice_in_one_directory_is_a_duplicate_even_for_quota() {
    let files = repo(vec![
        ("namespaces/online/a.yaml", quota("quota", "1")),
        ("namespaces/online/b.yaml", quota("quota", "2")),
    ]);
    assert_eq!(codes(&files), [ErrorCode::DuplicateObject]);
}

#[test]
fn a_selector_that_keeps_two_declarations_apart_avoids_the_conflict() {
    let selector = json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "prod"}, "spec": {"selector": {"matchLabels": {"env": "prod"}}}});
    let files = repo(vec![
        ("namespaces/online/selector.yaml", selector),
        (
            "namespaces/online/rb.yaml",
            with_selector(rolebinding("x"), "prod"),
        ),
        (
            "namespaces/online/shipping-app-backend/shipping-dev/rb.yaml",
            rolebinding("x"),
        ),
    ]);
    let state = parse_hierarchical(&files).unwrap();
    assert!(state.objects.contains_key(&rb_key("shipping-prod", "x")));
    assert!(state.objects.contains_key(&rb_key("shipping-dev", "x")));
}

#[test]
fn namespace_directory_with_subdirectories_is_refused() {
    let files = repo(vec![(
        "namespaces/online/shipping-app-backend/shipping-dev/nested/ns.yaml",
        namespace("nested", "dev"),
    )]);
    let errors = parse_hierarchical(&files).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].code,
        ErrorCode::NamespaceDirectoryHasSubdirectories
    );
    assert_eq!(errors[0].path, format!("{BACKEND}/shipping-dev"));
}

#[test]
fn hierarchy_mode_none_kind_in_abstract_namespace_is_refused() {
    let files = repo(vec![(
        "namespaces/online/secret.yaml",
        object("v1", "Secret", "s"),
    )]);
    assert_eq!(
        codes(&files),
        [ErrorCode::KindNotAllowedInAbstractNamespace]
    );
    let allowed = repo(vec![(
        "namespaces/online/shipping-app-backend/shipping-dev/secret.yaml",
        object("v1", "Secret", "s"),
    )]);
    assert!(parse_hierarchical(&allowed).is_ok());
}

#[test]
fn metadata_namespace_contradicting_the_directory_is_refused() {
    let mut elsewhere = rolebinding("a");
    elsewhere["metadata"]["namespace"] = json!("shipping-prod");
    let in_dev = format!("{BACKEND}/shipping-dev/a.yaml");
    assert_eq!(
        codes(&repo(vec![(&in_dev, elsewhere.clone())])),
        [ErrorCode::NamespaceContradictsDirectory]
    );
    assert_eq!(
        codes(&repo(vec![("namespaces/online/a.yaml", elsewhere)])),
        [ErrorCode::NamespaceContradictsDirectory]
    );
    let mut matching = rolebinding("a");
    matching["metadata"]["namespace"] = json!("shipping-dev");
    assert!(parse_hierarchical(&repo(vec![(&in_dev, matching)])).is_ok());
}

#[test]
fn namespace_named_unlike_its_directory_is_refused() {
    let files = repo(vec![(
        "namespaces/online/extra/ns.yaml",
        namespace("other", "dev"),
    )]);
    assert_eq!(codes(&files), [ErrorCode::NamespaceNameMismatch]);
}

#[test]
fn one_namespace_in_two_directories_is_a_duplicate() {
    let files = repo(vec![(
        "namespaces/offline/shipping-dev/ns.yaml",
        namespace("shipping-dev", "dev"),
    )]);
    assert_eq!(codes(&files), [ErrorCode::DuplicateObject]);
}

#[test]
fn abstract_namespace_without_namespace_below_is_refused() {
    let files = repo(vec![(
        "namespaces/offline/cm.yaml",
        object("v1", "ConfigMap", "c"),
    )]);
    let errors = parse_hierarchical(&files).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].code, ErrorCode::AbstractNamespaceWithoutNamespace);
    assert_eq!(errors[0].path, "namespaces/offline");
}

#[test]
fn cluster_scoped_object_under_namespaces_is_refused() {
    let files = repo(vec![(
        "namespaces/online/cr.yaml",
        object("rbac.authorization.k8s.io/v1", "ClusterRole", "c"),
    )]);
    assert_eq!(codes(&files), [ErrorCode::ClusterScopedInNamespaces]);
}

#[test]
fn namespaced_object_under_cluster_is_refused() {
    let files = repo(vec![("cluster/rb.yaml", rolebinding("r"))]);
    assert_eq!(codes(&files), [ErrorCode::NamespacedInCluster]);
}

#[test]
fn kind_without_sync_is_refused() {
    let files = repo(vec![(
        "namespaces/online/deploy.yaml",
        object("apps/v1", "Deployment", "d"),
    )]);
    assert_eq!(codes(&files), [ErrorCode::UnsyncedKind]);
}

#[test]
fn unknown_scope_is_refused_until_a_crd_declares_it() {
    let widget = || object("example.com/v1", "Widget", "w");
    let dev_widget = format!("{BACKEND}/shipping-dev/widget.yaml");
    assert_eq!(
        codes(&repo(vec![(&dev_widget, widget())])),
        [ErrorCode::UnknownScope]
    );

    let mut sync = base_sync();
    sync["spec"]["groups"].as_array_mut().unwrap().push(
        json!({"group": "apiextensions.k8s.io", "kinds": [{"kind": "CustomResourceDefinition", "versions": [{"version": "v1"}]}]}),
    );
    let crd = |scope: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": scope,
                        "names": {"kind": "Widget", "plural": "widgets"}}})
    };
    let with_crd = |scope: &str, extra: Vec<(&str, Value)>| {
        let mut files = repo(extra);
        files.push(SourceFile::new("cluster/widget-crd.yaml", vec![crd(scope)]));
        files[1] = SourceFile::new("system/sync.yaml", vec![sync.clone()]);
        files
    };
    let state = parse_hierarchical(&with_crd("Namespaced", vec![(&dev_widget, widget())])).unwrap();
    assert!(
        state
            .objects
            .contains_key(&key("example.com", "Widget", Some("shipping-dev"), "w"))
    );
    assert_eq!(
        codes(&with_crd("Cluster", vec![(&dev_widget, widget())])),
        [ErrorCode::ClusterScopedInNamespaces]
    );
    assert_eq!(
        codes(&with_crd("Sideways", vec![])),
        [ErrorCode::InvalidCustomResourceDefinition]
    );
}

#[test]
fn config_objects_out_of_place_are_refused() {
    let selector = json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "s"}, "spec": {"selector": {}}});
    for (path, object) in [
        ("cluster/sync.yaml", sync_of(json!([]))),
        (
            "namespaces/online/repo.yaml",
            object("nomos.dev/v1alpha1", "Repo", "r"),
        ),
        ("system/selector.yaml", selector.clone()),
        (
            "namespaces/online/shipping-app-backend/shipping-dev/selector.yaml",
            selector,
        ),
        ("sync.yaml", sync_of(json!([]))),
    ] {
        assert_eq!(
            codes(&repo(vec![(path, object)])),
            [ErrorCode::MisplacedConfigObject],
            "{path}"
        );
    }
}

#[test]
fn objects_outside_their_directories_are_refused() {
    for (path, object) in [
        ("system/cm.yaml", object("v1", "ConfigMap", "c")),
        ("cm.yaml", object("v1", "ConfigMap", "c")),
        ("other/cm.yaml", object("v1", "ConfigMap", "c")),
        ("cluster/ns.yaml", namespace("loose", "dev")),
        ("namespaces/ns.yaml", namespace("namespaces", "dev")),
    ] {
        assert_eq!(
            codes(&repo(vec![(path, object)])),
            [ErrorCode::MisplacedObject],
            "{path}"
        );
    }
}

#[test]
fn unknown_namespace_selector_is_refused() {
    let selector = json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "deep"}, "spec": {"selector": {}}});
    // A selector is visible in its own directory and below it, not in a sibling or above.
    let files = repo(vec![
        (
            "namespaces/online/shipping-app-backend/selector.yaml",
            selector,
        ),
        (
            "namespaces/online/rb.yaml",
            with_selector(rolebinding("r"), "deep"),
        ),
    ]);
    assert_eq!(codes(&files), [ErrorCode::UnknownNamespaceSelector]);
}

#[test]
fn selector_annotation_outside_abstract_namespace_is_refused() {
    let selector = json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "s"}, "spec": {"selector": {}}});
    for (path, object) in [
        (
            "namespaces/online/shipping-app-backend/shipping-dev/rb.yaml",
            with_selector(rolebinding("r"), "s"),
        ),
        (
            "cluster/cr.yaml",
            with_selector(
                object("rbac.authorization.k8s.io/v1", "ClusterRole", "c"),
                "s",
            ),
        ),
        (
            "namespaces/online/extra/namespace.yaml",
            with_selector(namespace("extra", "dev"), "s"),
        ),
    ] {
        let files = repo(vec![
            ("namespaces/selector.yaml", selector.clone()),
            (path, object),
        ]);
        assert_eq!(
            codes(&files),
            [ErrorCode::SelectorOutsideAbstractNamespace],
            "{path}"
        );
    }
}

#[test]
fn invalid_namespace_selector_is_refused() {
    let selector = json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "NamespaceSelector",
        "metadata": {"name": "s"},
        "spec": {"selector": {"matchExpressions": [{"key": "env", "operator": "Maybe"}]}}});
    assert_eq!(
        codes(&repo(vec![("namespaces/selector.yaml", selector)])),
        [ErrorCode::InvalidNamespaceSelector]
    );
}

#[test]
fn invalid_namespace_directory_names_are_refused() {
    let files = repo(vec![(
        "namespaces/Online/prod/ns.yaml",
        namespace("prod", "prod"),
    )]);
    let errors = parse_hierarchical(&files).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (errors[0].code, errors[0].path.as_str()),
        (ErrorCode::InvalidName, "namespaces/Online")
    );
}

#[test]
fn every_error_is_reported_at_once() {
    let files = repo(vec![
        ("cluster/rb.yaml", rolebinding("r")),
        (
            "namespaces/online/deploy.yaml",
            object("apps/v1", "Deployment", "d"),
        ),
        ("namespaces/online/secret.yaml", object("v1", "Secret", "s")),
    ]);
    assert_eq!(
        codes(&files),
        [
            ErrorCode::NamespacedInCluster,
            ErrorCode::UnsyncedKind,
            ErrorCode::KindNotAllowedInAbstractNamespace
        ]
    );
}

#[test]
fn empty_tree_is_an_error_never_nothing_declared() {
    assert_eq!(codes(&[]), [ErrorCode::EmptySource]);
}

#[test]
fn a_kind_the_cluster_serves_is_placed_by_the_clusters_scope() {
    let widget = || object("example.com/v1", "Widget", "w");
    let dev_widget = format!("{BACKEND}/shipping-dev/widget.yaml");
    let files = repo(vec![(&dev_widget, widget())]);
    let served = |scope| ScopeTable::served([(GroupKind::new("example.com", "Widget"), scope)]);
    let state = parse_hierarchical_with(&files, &served(Scope::Namespaced)).unwrap();
    assert!(
        state
            .objects
            .contains_key(&key("example.com", "Widget", Some("shipping-dev"), "w"))
    );
    let refused = parse_hierarchical_with(&files, &served(Scope::Cluster)).unwrap_err();
    let codes: Vec<ErrorCode> = refused.iter().map(|error| error.code).collect();
    assert_eq!(codes, [ErrorCode::ClusterScopedInNamespaces]);
}
