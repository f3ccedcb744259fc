//! seeds/000, "Management Actions Taken": one test per row of the action table, then the seed's
//! examples, each built from declared and live objects through `Situation::assess`.

use arbor_policy::keys::ManagementLabel;
use arbor_policy::sync::{
    Action, CompareFields, Decision, DeclaredOnCluster, Row, Situation, decide,
};
use serde_json::{Value, json};

fn role(namespace: &str, name: &str, verbs: &[&str]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": verbs}],
    })
}

fn cluster_role(name: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["get"]}],
    })
}

/// The object as the cluster holds it: server fields filled in, optionally the management label.
fn live(declared: &Value, labelled: bool) -> Value {
    let mut live = declared.clone();
    let metadata = live["metadata"].as_object_mut().expect("metadata");
    metadata.insert("uid".into(), json!("0f1e2d3c"));
    metadata.insert("resourceVersion".into(), json!("42"));
    metadata.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
    if labelled {
        metadata.insert("labels".into(), json!({"nomos.dev/managed": "enabled"}));
    }
    live
}

fn decide_for(sync: bool, declared: Option<&Value>, live: Option<&Value>) -> Decision {
    decide(&Situation::assess(
        sync,
        declared,
        live,
        &ManagementLabel::nomos(),
        &CompareFields::AllDeclared,
    ))
}

fn assert_decision(decision: Decision, row: Row, action: Action) {
    assert_eq!(decision.row, row, "decided by {}", decision.row);
    assert_eq!(decision.action, action);
}

#[test]
fn action_table_row_1_sync_yes_declared_yes_on_cluster_yes_label_yes_matches_yes_no_action() {
    let declared = role("shipping-dev", "job-creator", &["create"]);
    let decision = decide_for(true, Some(&declared), Some(&live(&declared, true)));
    assert_decision(decision, Row::ManagedAndMatching, Action::NoAction);
}

#[test]
fn action_table_row_2_sync_yes_declared_yes_on_cluster_yes_label_yes_matches_no_updates_resource_to_match_git()
 {
    let declared = role("shipping-dev", "job-creator", &["create"]);
    let drifted = live(&role("shipping-dev", "job-creator", &["delete"]), true);
    let situation = Situation::assess(
        true,
        Some(&declared),
        Some(&drifted),
        &ManagementLabel::nomos(),
        &CompareFields::AllDeclared,
    );
    let Situation::ResourceDeclared(DeclaredOnCluster::Managed(comparison)) = &situation else {
        panic!("expected a managed, declared object, got {situation:?}");
    };
    let paths: Vec<String> = comparison.paths().map(ToString::to_string).collect();
    assert_eq!(paths, ["rules[0].verbs[0]"]);
    assert_decision(decide(&situation), Row::ManagedAndDrifted, Action::Update);
}

#[test]
fn action_table_row_3_sync_yes_declared_yes_on_cluster_yes_label_no_no_action() {
    let declared = role("shipping-dev", "job-creator", &["create"]);
    let unlabelled_and_drifted = live(&role("shipping-dev", "job-creator", &["delete"]), false);
    let decision = decide_for(true, Some(&declared), Some(&unlabelled_and_drifted));
    assert_decision(decision, Row::DeclaredButUnmanaged, Action::NoAction);
}

#[test]
fn action_table_row_4_sync_yes_declared_yes_on_cluster_no_creates_resource_to_match_git() {
    let declared = cluster_role("quota-viewer");
    let decision = decide_for(true, Some(&declared), None);
    assert_decision(decision, Row::DeclaredNotOnCluster, Action::Create);
}

#[test]
fn action_table_row_5_sync_yes_declared_no_on_cluster_yes_label_yes_deletes_resource_to_match_git()
{
    let on_cluster = live(&cluster_role("quota-viewer"), true);
    let decision = decide_for(true, None, Some(&on_cluster));
    assert_decision(decision, Row::UndeclaredButManaged, Action::Delete);
}

#[test]
fn action_table_row_6_sync_yes_declared_no_on_cluster_yes_label_no_no_action() {
    let on_cluster = live(&cluster_role("pod-accountant"), false);
    let decision = decide_for(true, None, Some(&on_cluster));
    assert_decision(decision, Row::UndeclaredAndUnmanaged, Action::NoAction);
}

#[test]
fn action_table_row_7_sync_yes_declared_no_on_cluster_no_no_action() {
    let decision = decide_for(true, None, None);
    assert_decision(decision, Row::UndeclaredNotOnCluster, Action::NoAction);
}

#[test]
fn action_table_row_8_sync_no_no_action() {
    let declared = cluster_role("quota-viewer");
    let labelled = live(&role("shipping-dev", "job-creator", &["delete"]), true);
    // Whatever git and the cluster hold, a kind without a Sync is left alone.
    for (declared, live) in [
        (Some(&declared), None),
        (Some(&declared), Some(&labelled)),
        (None, Some(&labelled)),
        (None, None),
    ] {
        let decision = decide_for(false, declared, live);
        assert_decision(decision, Row::SyncNotDeclared, Action::NoAction);
    }
}

#[test]
fn example_pod_accountant_not_in_git_is_not_deleted_or_altered() {
    let pod_accountant = live(&cluster_role("pod-accountant"), false);
    assert_eq!(
        decide_for(true, None, Some(&pod_accountant)).action,
        Action::NoAction
    );
}

#[test]
fn example_quota_viewer_is_created_then_removed_when_deleted_from_git() {
    let quota_viewer = cluster_role("quota-viewer");
    assert_eq!(
        decide_for(true, Some(&quota_viewer), None).action,
        Action::Create
    );
    // Arbor created it, so it carries the management label.
    let created = live(&quota_viewer, true);
    assert_eq!(
        decide_for(true, Some(&quota_viewer), Some(&created)).action,
        Action::NoAction
    );
    assert_eq!(
        decide_for(true, None, Some(&created)).action,
        Action::Delete
    );
}

#[test]
fn example_job_creator_is_updated_to_match_git() {
    let in_git = role("shipping-dev", "job-creator", &["create", "get"]);
    let on_cluster = live(&role("shipping-dev", "job-creator", &["create"]), true);
    assert_eq!(
        decide_for(true, Some(&in_git), Some(&on_cluster)).action,
        Action::Update
    );
}

#[test]
fn example_pod_creator_in_every_descendant_is_updated_then_removed() {
    let binding = |namespace: &str, role: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pod-creator", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "Group", "name": "shipping-devs"}],
        })
    };
    let descendants = ["shipping-prod", "shipping-staging", "shipping-dev"];
    for namespace in descendants {
        let declared = binding(namespace, "pod-creator");
        let unchanged = live(&declared, true);
        let modified = live(&binding(namespace, "cluster-admin"), true);
        let expected_update = if namespace == "shipping-prod" {
            Action::Update
        } else {
            Action::NoAction
        };
        let on_cluster = if namespace == "shipping-prod" {
            &modified
        } else {
            &unchanged
        };
        assert_eq!(
            decide_for(true, Some(&declared), Some(on_cluster)).action,
            expected_update,
            "{namespace}"
        );
        assert_eq!(
            decide_for(true, None, Some(&unchanged)).action,
            Action::Delete,
            "{namespace} after removal from git"
        );
    }
}

#[test]
fn example_secret_admin_is_kept_until_labelled_then_deleted() {
    let secret_admin = role("shipping-prod", "secret-admin", &["get"]);
    let by_hand = live(&secret_admin, false);
    assert_eq!(
        decide_for(true, None, Some(&by_hand)).action,
        Action::NoAction
    );
    let labelled_later = live(&secret_admin, true);
    assert_eq!(
        decide_for(true, None, Some(&labelled_later)).action,
        Action::Delete
    );
}

#[test]
fn example_shipping_admin_is_created() {
    let shipping_admin = role("shipping-prod", "shipping-admin", &["*"]);
    let decision = decide_for(true, Some(&shipping_admin), None);
    assert_decision(decision, Row::DeclaredNotOnCluster, Action::Create);
}
