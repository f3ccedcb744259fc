//! Least-privilege RBAC: one ServiceAccount per component, each bound only to its own roles,
//! leases granted only in the release namespace and only to the controllers that elect a
//! leader, the webhook read-only.

mod common;

use common::manifest::{Rendered, render};
use common::value_sets::{self, ValueSet};
use common::workload::{component_name, pod_spec};
use common::{COMPONENTS, NAMESPACE, workspace_root};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};

const WRITE_VERBS: [&str; 7] = [
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "bind",
    "escalate",
];

/// The ClusterRole arborctl's users are bound to (release `arbor`).
const OPERATOR_ROLE: &str = "arbor-operator";

fn cluster_rules(rendered: &Rendered, component: &str) -> Vec<PolicyRule> {
    let role: ClusterRole = rendered.get("ClusterRole", &component_name(component));
    role.rules.unwrap_or_default()
}

/// Whether `rules` grant `verb` on `group`/`resource` (wildcards included).
fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|rule| {
        let matches = |values: &Option<Vec<String>>, wanted: &str| {
            values
                .iter()
                .flatten()
                .any(|value| value == wanted || value == "*")
        };
        matches(&rule.api_groups, group)
            && matches(&rule.resources, resource)
            && rule.verbs.iter().any(|v| v == verb || v == "*")
    })
}

#[test]
fn each_component_runs_as_its_own_service_account_bound_only_to_its_own_roles() {
    for set in value_sets::all() {
        let rendered = render(&set);
        for deployment in rendered.typed_of_kind::<Deployment>("Deployment") {
            let name = deployment.metadata.name.clone().unwrap_or_default();
            assert_eq!(
                pod_spec(&deployment).service_account_name,
                Some(name.clone()),
                "[{}]",
                set.name
            );
            assert!(
                rendered.find("ServiceAccount", &name).is_some(),
                "[{}] no ServiceAccount {name}",
                set.name
            );
        }
        let bindings = rendered
            .typed_of_kind::<ClusterRoleBinding>("ClusterRoleBinding")
            .into_iter()
            .map(|binding| {
                (
                    binding.metadata.name.clone(),
                    binding.role_ref.name.clone(),
                    binding.subjects,
                )
            })
            .chain(
                rendered
                    .typed_of_kind::<RoleBinding>("RoleBinding")
                    .into_iter()
                    .map(|binding| {
                        (
                            binding.metadata.name.clone(),
                            binding.role_ref.name.clone(),
                            binding.subjects,
                        )
                    }),
            );
        // The operators' binding is to people, not to a component (its own test below).
        let bindings = bindings.filter(|(_, role, _)| role != OPERATOR_ROLE);
        for (binding, role, subjects) in bindings {
            let subjects = subjects.unwrap_or_default();
            assert_eq!(
                subjects.len(),
                1,
                "[{}] {binding:?} binds one account",
                set.name
            );
            let subject = &subjects[0];
            assert_eq!(subject.kind, "ServiceAccount");
            assert_eq!(subject.namespace.as_deref(), Some(NAMESPACE));
            assert!(
                role.starts_with(&subject.name),
                "[{}] {binding:?} binds {} to {role}, another component's role",
                set.name,
                subject.name
            );
        }
    }
}

#[test]
fn leases_are_granted_only_in_the_release_namespace_and_never_to_the_webhook() {
    let rendered = render(&value_sets::defaults());
    let webhook_account = component_name("webhook");
    for binding in rendered.typed_of_kind::<RoleBinding>("RoleBinding") {
        let subjects = binding.subjects.unwrap_or_default();
        assert!(
            subjects
                .iter()
                .all(|subject| subject.name != webhook_account),
            "the webhook elects no leader, yet RoleBinding {:?} binds it",
            binding.metadata.name
        );
    }
    for component in COMPONENTS {
        assert!(
            !grants(
                &cluster_rules(&rendered, component),
                "coordination.k8s.io",
                "leases",
                "update"
            ),
            "{component}: leases are not granted cluster-wide"
        );
        if component == "webhook" {
            continue;
        }
        let role: Role = rendered.get(
            "Role",
            &format!("{}-leader-election", component_name(component)),
        );
        assert_eq!(role.metadata.namespace.as_deref(), Some(NAMESPACE));
        let rules = role.rules.unwrap_or_default();
        // list and delete: the shard Leases (`--shards`), every replica's seen at once and a
        // shard given up by deleting its Lease.
        for verb in ["get", "list", "create", "update", "delete"] {
            assert!(
                grants(&rules, "coordination.k8s.io", "leases", verb),
                "{component}: leases {verb}"
            );
        }
    }
}

#[test]
fn the_webhook_only_reads() {
    let rendered = render(&value_sets::defaults());
    let rules = cluster_rules(&rendered, "webhook");
    for rule in &rules {
        let resources = rule.resources.clone().unwrap_or_default();
        if resources.iter().all(|resource| resource == "events") {
            continue;
        }
        for verb in &rule.verbs {
            assert!(
                !WRITE_VERBS.contains(&verb.as_str()) && verb != "*",
                "the webhook may {verb} {resources:?}"
            );
        }
    }
    for resource in [
        "namespaces",
        "subnamespaces",
        "gittracks",
        "clustergittracks",
    ] {
        let group = if resource == "namespaces" {
            ""
        } else {
            "arbor.dev"
        };
        assert!(
            grants(&rules, group, resource, "list"),
            "the webhook reads {resource}"
        );
    }
}

#[test]
fn gitsync_manages_its_sources_objects_status_and_finalizers() {
    let rendered = render(&value_sets::defaults());
    let rules = cluster_rules(&rendered, "gitsync");
    for resource in [
        "gittracks",
        "clustergittracks",
        "gittrackobjects",
        "clustergittrackobjects",
        "syncs",
    ] {
        for verb in [
            "get", "list", "watch", "create", "update", "patch", "delete",
        ] {
            assert!(
                grants(&rules, "arbor.dev", resource, verb),
                "gitsync {verb} {resource}"
            );
        }
    }
    for resource in [
        "gittracks",
        "clustergittracks",
        "gittrackobjects",
        "clustergittrackobjects",
    ] {
        assert!(grants(
            &rules,
            "arbor.dev",
            &format!("{resource}/status"),
            "update"
        ));
        assert!(grants(
            &rules,
            "arbor.dev",
            &format!("{resource}/finalizers"),
            "update"
        ));
    }
    assert!(
        grants(&rules, "", "secrets", "get"),
        "a ClusterGitTrack may name a Secret anywhere"
    );
    assert!(grants(&rules, "", "events", "create"));
}

#[test]
fn gitsync_for_one_namespace_reads_secrets_there_only_and_no_cluster_sources() {
    let rendered = render(&value_sets::gitsync_only_one_namespace());
    let rules = cluster_rules(&rendered, "gitsync");
    assert!(
        !grants(&rules, "arbor.dev", "clustergittracks", "list"),
        "ClusterGitTracks are disabled"
    );
    assert!(grants(&rules, "arbor.dev", "gittracks", "list"));
    let secrets: Role = rendered.get("Role", &format!("{}-secrets", component_name("gitsync")));
    assert_eq!(secrets.metadata.namespace.as_deref(), Some("team-a"));
    assert!(grants(
        &secrets.rules.unwrap_or_default(),
        "",
        "secrets",
        "get"
    ));
}

#[test]
fn what_gitsync_may_apply_is_the_users_list_of_rules() {
    let rendered = render(&ValueSet::new(
        "custom apply rules",
        &[
            "gitsync.rbac.applyRules[0].apiGroups[0]=example.invalid",
            "gitsync.rbac.applyRules[0].resources[0]=widgets",
            "gitsync.rbac.applyRules[0].verbs[0]=create",
        ],
    ));
    let rules = cluster_rules(&rendered, "gitsync");
    assert!(grants(&rules, "example.invalid", "widgets", "create"));
    assert!(
        !grants(&rules, "apps", "deployments", "create"),
        "the defaults are replaced, not extended"
    );
}

/// #23.3: GitTracks apply as a ServiceAccount of their namespace, so gitsync may impersonate
/// ServiceAccounts; when every write is a GitTrack's (a service account required, no
/// ClusterGitTracks), gitsync itself may no longer bind or escalate.
#[test]
fn gitsync_impersonates_service_accounts_and_drops_bind_and_escalate_when_it_can() {
    let rules = cluster_rules(&render(&value_sets::defaults()), "gitsync");
    assert!(grants(&rules, "", "serviceaccounts", "impersonate"));
    assert!(
        grants(&rules, "rbac.authorization.k8s.io", "rolebindings", "bind"),
        "ClusterGitTracks apply RBAC as gitsync"
    );

    let rendered = render(&ValueSet::new(
        "service accounts required, no ClusterGitTracks",
        &[
            "gitsync.requireServiceAccount=true",
            "gitsync.defaultServiceAccount=deployer",
            "ownership.gitTrackMode=Enabled",
            "ownership.clusterGitTrackMode=Disabled",
        ],
    ));
    let rules = cluster_rules(&rendered, "gitsync");
    assert!(grants(&rules, "", "serviceaccounts", "impersonate"));
    for verb in ["bind", "escalate"] {
        for resource in [
            "roles",
            "rolebindings",
            "clusterroles",
            "clusterrolebindings",
        ] {
            assert!(
                !grants(&rules, "rbac.authorization.k8s.io", resource, verb),
                "gitsync may not {verb} {resource}"
            );
        }
    }
    assert!(grants(
        &rules,
        "rbac.authorization.k8s.io",
        "rolebindings",
        "list"
    ));
}

#[test]
fn hierarchy_gets_full_access_to_exactly_the_watched_kinds() {
    let defaults = render(&value_sets::defaults());
    let rules = cluster_rules(&defaults, "hierarchy");
    for (group, resource) in [
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("", "secrets"),
    ] {
        for verb in ["get", "list", "watch", "create", "update", "delete"] {
            assert!(
                grants(&rules, group, resource, verb),
                "hierarchy {verb} {resource}"
            );
        }
    }
    assert!(
        !grants(&rules, "", "configmaps", "list"),
        "configmaps are not watched by default"
    );
    for verb in ["create", "delete", "patch"] {
        assert!(
            grants(&rules, "", "namespaces", verb),
            "hierarchy {verb} namespaces"
        );
    }
    assert!(grants(
        &rules,
        "arbor.dev",
        "subnamespaces/status",
        "update"
    ));
    assert!(grants(
        &rules,
        "arbor.dev",
        "subnamespaces/finalizers",
        "update"
    ));
    assert!(grants(
        &rules,
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "create"
    ));

    let takeover = workspace_root().join("deploy/values/accurate-takeover.yaml");
    let rendered = render(&ValueSet {
        name: "accurate takeover".to_owned(),
        args: vec!["--values".to_owned(), takeover.display().to_string()],
    });
    assert!(grants(
        &cluster_rules(&rendered, "hierarchy"),
        "",
        "configmaps",
        "update"
    ));
}

/// A kind the observer watches for drift, as values.yaml lists it.
#[derive(Debug, serde::Deserialize)]
struct DriftKind {
    group: String,
    version: String,
    kind: String,
    resource: String,
}

impl DriftKind {
    /// The form `--drift-kinds` takes: `group/version/Kind`, `version/Kind` for core.
    fn flag_form(&self) -> String {
        if self.group.is_empty() {
            format!("{}/{}", self.version, self.kind)
        } else {
            format!("{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// Asserts that the observer is told to watch exactly `kinds` and may read each of them,
/// without writing those that Applications do not contain.
fn assert_observer_watches(set: &ValueSet, kinds: &[DriftKind], application_rules: &[PolicyRule]) {
    let rendered = render(set);
    let expected: Vec<String> = kinds.iter().map(DriftKind::flag_form).collect();
    let args = common::workload::args(&rendered, "observer");
    assert_eq!(
        common::workload::flag_value(&args, "--drift-kinds"),
        Some(expected.join(",").as_str()),
        "[{}]",
        set.name
    );
    let observer = cluster_rules(&rendered, "observer");
    for kind in kinds {
        assert!(
            grants(&observer, &kind.group, &kind.resource, "watch"),
            "[{}] the observer may not watch {kind:?}",
            set.name
        );
        if !grants(application_rules, &kind.group, &kind.resource, "update") {
            assert!(
                !grants(&observer, &kind.group, &kind.resource, "update"),
                "[{}] watching {kind:?} for drift is read-only",
                set.name
            );
        }
    }
}

#[test]
fn the_observer_may_read_exactly_the_kinds_it_watches_for_drift() {
    let values_path = common::chart_dir().join("values.yaml");
    let values: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(&values_path).expect("values.yaml is readable"),
    )
    .expect("values.yaml is YAML");
    let application_rules: Vec<PolicyRule> =
        serde_json::from_value(values["observer"]["rbac"]["applicationRules"].clone())
            .expect("applicationRules are PolicyRules");
    let defaults: Vec<DriftKind> = serde_json::from_value(values["observer"]["driftKinds"].clone())
        .expect("driftKinds are group/version/kind/resource");
    assert!(!defaults.is_empty());
    assert_observer_watches(&value_sets::defaults(), &defaults, &application_rules);

    let custom = [DriftKind {
        group: "example.invalid".to_owned(),
        version: "v1".to_owned(),
        kind: "Widget".to_owned(),
        resource: "widgets".to_owned(),
    }];
    let set = ValueSet::new(
        "custom drift kinds",
        &[
            "observer.driftKinds[0].group=example.invalid",
            "observer.driftKinds[0].version=v1",
            "observer.driftKinds[0].kind=Widget",
            "observer.driftKinds[0].resource=widgets",
        ],
    );
    assert_observer_watches(&set, &custom, &application_rules);
    let rendered = render(&set);
    assert!(
        !grants(
            &cluster_rules(&rendered, "observer"),
            "rbac.authorization.k8s.io",
            "clusterroles",
            "watch"
        ),
        "the default kinds are replaced, not extended"
    );

    let observer = cluster_rules(&render(&value_sets::defaults()), "observer");
    assert!(grants(&observer, "arbor.dev", "applications", "update"));
    assert!(grants(
        &observer,
        "arbor.dev",
        "applications/status",
        "update"
    ));
    assert!(grants(
        &observer,
        "arbor.dev",
        "applications/finalizers",
        "update"
    ));
}

/// issue #19 item 2: the operators may read exactly their certificate's Secret and the
/// components' Services, list pods and port-forward, in the release namespace only, and
/// nothing else.
#[test]
fn operators_may_read_their_certificate_and_port_forward_in_the_release_namespace_only() {
    for set in value_sets::all() {
        let rendered = render(&set);
        let role: ClusterRole = rendered.get("ClusterRole", OPERATOR_ROLE);
        let rules = role.rules.unwrap_or_default();
        for rule in &rules {
            assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
            let resources = rule.resources.clone().unwrap_or_default();
            let names = rule.resource_names.clone().unwrap_or_default();
            match resources.as_slice() {
                [resource] if resource == "secrets" => {
                    assert_eq!(names, ["arbor-operator-tls"], "[{}]", set.name);
                    assert_eq!(rule.verbs, ["get"], "[{}]", set.name);
                }
                [resource] if resource == "services" => {
                    assert!(!names.is_empty(), "[{}] services by name", set.name);
                    for name in &names {
                        assert!(
                            COMPONENTS
                                .iter()
                                .any(|component| *name == component_name(component)),
                            "[{}] {name} is not a component's Service",
                            set.name
                        );
                    }
                    assert_eq!(rule.verbs, ["get"], "[{}]", set.name);
                }
                [resource] if resource == "pods" => assert_eq!(rule.verbs, ["list"]),
                [resource] if resource == "pods/portforward" => {
                    assert_eq!(rule.verbs, ["get", "create"], "[{}]", set.name);
                }
                other => panic!("[{}] unexpected operator rule on {other:?}", set.name),
            }
        }
        assert!(grants(&rules, "", "pods/portforward", "create"));
        assert!(grants(&rules, "", "pods", "list"));
        assert!(
            rendered
                .typed_of_kind::<ClusterRoleBinding>("ClusterRoleBinding")
                .iter()
                .all(|binding| binding.role_ref.name != OPERATOR_ROLE),
            "[{}] the operator role is never bound cluster-wide",
            set.name
        );
        let binding: RoleBinding = rendered.get("RoleBinding", OPERATOR_ROLE);
        assert_eq!(binding.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        let subjects = binding.subjects.unwrap_or_default();
        assert!(
            subjects
                .iter()
                .any(|subject| subject.kind == "Group" && subject.name == "arbor-operators"),
            "[{}] {subjects:?}",
            set.name
        );
    }
}
