//! seeds/004 (Krake's Kubernetes application observer), bullet by bullet, on the seed's own
//! example: an `nginx` application made of a Deployment and a Service.

use arbor_policy::observe::{
    ApplicationAction, ApplicationState, Difference, FieldPath, NotReconcilable, Observation,
    ObserverSchema, ResourceDelta, ResourceId, check_reconcilable, last_applied_manifest,
    last_observed_manifest, observe, observer_lifecycle,
};
use serde_json::{Value, json};

fn nginx_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{
                    "name": "nginx",
                    "image": "nginx:1.25",
                    "ports": [{"containerPort": 80}]
                }]}
            }
        }
    })
}

fn nginx_service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nginx", "namespace": "web", "labels": {"tier": "frontend"}},
        "spec": {"selector": {"app": "nginx"}, "ports": [{"port": 80, "protocol": "TCP"}]}
    })
}

fn manifest() -> Vec<Value> {
    vec![nginx_deployment(), nginx_service()]
}

fn default_schema() -> ObserverSchema {
    ObserverSchema::for_application(&manifest(), &[])
        .expect("the nginx manifest has a default schema")
}

/// The objects the API server holds after applying `resource`: what it was given plus the
/// fields the server sets itself.
fn as_served(resource: &Value) -> Value {
    let mut served = resource.clone();
    served["metadata"]["uid"] = json!("0b0c5c3e");
    served["metadata"]["resourceVersion"] = json!("41");
    served["status"] = json!({"observedGeneration": 1});
    if served["kind"] == "Service" {
        served["spec"]["clusterIP"] = json!("10.96.0.10");
        served["spec"]["sessionAffinity"] = json!("None");
    }
    served
}

fn live_cluster() -> Vec<Value> {
    manifest().iter().map(as_served).collect()
}

fn id(resource: &Value) -> ResourceId {
    ResourceId::of(resource).unwrap()
}

/// One reconciliation round as the controller sees it: last applied from the manifest and the
/// API's answers, last observed from the live objects.
fn delta_after(live: &[Value]) -> ResourceDelta {
    let schema = default_schema();
    let applied = last_applied_manifest(&manifest(), &schema, &live_cluster());
    let observed = last_observed_manifest(&schema, live);
    ResourceDelta::between(&schema, &applied, &observed)
}

fn differing_paths(delta: &ResourceDelta, resource: &Value) -> Vec<String> {
    delta
        .modified
        .iter()
        .find(|modified| modified.id == id(resource))
        .map(|modified| {
            modified
                .differences
                .iter()
                .map(|d| d.path.to_string())
                .collect()
        })
        .unwrap_or_default()
}

// --- Reconciliation: spec and status -------------------------------------------------------

#[test]
fn spec_is_the_desired_state_set_by_the_user_and_never_changed_by_the_controller() {
    let schema = default_schema();
    let mut answered = live_cluster();
    // The API answers with a value the user did not write; the applied state keeps the user's.
    answered[0]["spec"]["replicas"] = json!(5);
    let applied = last_applied_manifest(&manifest(), &schema, &answered);
    assert_eq!(applied, manifest());
}

#[test]
fn status_is_the_current_state_set_by_the_observer_from_the_real_world() {
    let schema = default_schema();
    let live = live_cluster();
    let Observation::Changed(status) = observe(&schema, &[], &live) else {
        panic!("a first observation must write the status");
    };
    assert_eq!(status, last_observed_manifest(&schema, &live));
    assert_eq!(
        status[0]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
}

#[test]
fn resource_needs_spec_and_status_to_be_reconciled() {
    let application = |fields: Value| {
        let mut app = json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "nginx", "namespace": "web"}});
        app.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        app
    };
    let spec = json!({"manifest": manifest()});
    let status = json!({"lastObservedManifest": []});
    assert_eq!(
        check_reconcilable(&application(json!({"status": status}))),
        Err(NotReconcilable::MissingSpec)
    );
    assert_eq!(
        check_reconcilable(&application(json!({"spec": spec}))),
        Err(NotReconcilable::MissingStatus)
    );
    assert_eq!(
        check_reconcilable(&application(json!({"spec": spec, "status": status}))),
        Ok(())
    );
}

// --- Reconciliation loop, step by step ------------------------------------------------------

#[test]
fn observer_started_after_resources_created() {
    // Steps 1-3: the resource exists in the API, the controller creates it, then observes it.
    let lifecycle = observer_lifecycle(ApplicationAction::Create);
    assert!(lifecycle.started_after);
    // What the started observer sees right after creation is no difference at all.
    assert!(delta_after(&live_cluster()).is_empty());
}

#[test]
fn status_equal_to_observed_means_nothing_happens() {
    // Steps 4-5.
    let schema = default_schema();
    let status = last_observed_manifest(&schema, &live_cluster());
    let mut live = live_cluster();
    live.reverse();
    assert_eq!(observe(&schema, &status, &live), Observation::Unchanged);
}

#[test]
fn status_differs_means_resource_modified() {
    // Steps 6-7: the observer notifies the API by updating the status.
    let schema = default_schema();
    let status = last_observed_manifest(&schema, &live_cluster());
    let mut live = live_cluster();
    live[0]["spec"]["replicas"] = json!(0);
    let Observation::Changed(new_status) = observe(&schema, &status, &live) else {
        panic!("a modified resource must change the status");
    };
    assert_eq!(new_status[0]["spec"]["replicas"], 0);
    assert_eq!(
        differing_paths(&delta_after(&live), &nginx_deployment()),
        [".spec.replicas"]
    );
}

#[test]
fn controller_reconciles_by_applying_desired_state_on_actual_resource() {
    // Step 8: after the controller re-applies last applied, nothing differs any more.
    let schema = default_schema();
    let applied = last_applied_manifest(&manifest(), &schema, &live_cluster());
    let mut live = live_cluster();
    live[1]["spec"]["selector"]["app"] = json!("hijacked");
    assert!(!delta_after(&live).is_empty());
    live[1] = as_served(&applied[1]);
    assert!(delta_after(&live).is_empty());
}

// --- KubernetesApplicationObserver --------------------------------------------------------

#[test]
fn observer_watches_every_resource_in_the_application_specification() {
    let observed = last_observed_manifest(&default_schema(), &live_cluster());
    let ids: Vec<ResourceId> = observed.iter().map(id).collect();
    assert_eq!(ids, [id(&nginx_deployment()), id(&nginx_service())]);
}

#[test]
fn changed_container_image_in_deployment_is_detected() {
    let mut live = live_cluster();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.19");
    let delta = delta_after(&live);
    assert_eq!(
        differing_paths(&delta, &nginx_deployment()),
        [".spec.template.spec.containers[0].image"]
    );
    let difference = &delta.modified[0].differences[0].difference;
    assert_eq!(
        difference,
        &Difference::ValueChanged {
            applied: json!("nginx:1.25"),
            observed: json!("nginx:1.19")
        }
    );
}

#[test]
fn changed_label_in_service_is_detected() {
    let mut live = live_cluster();
    live[1]["metadata"]["labels"]["tier"] = json!("backend");
    assert_eq!(
        differing_paths(&delta_after(&live), &nginx_service()),
        [".metadata.labels.tier"]
    );
}

#[test]
fn deviation_with_spec_updates_deployment_and_service_accordingly() {
    let mut live = live_cluster();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.19");
    live[1]["metadata"]["labels"]["tier"] = json!("backend");
    let delta = delta_after(&live);
    let modified: Vec<&ResourceId> = delta.modified.iter().map(|m| &m.id).collect();
    assert_eq!(modified, [&id(&nginx_deployment()), &id(&nginx_service())]);
    assert!(delta.new.is_empty() && delta.deleted.is_empty());
}

#[test]
fn observed_fields_are_controlled_by_a_custom_observer_schema() {
    let custom = [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
        "spec": {"selector": {"app": null}}}),
    ];
    let schema = ObserverSchema::for_application(&manifest(), &custom).unwrap();
    let observed = last_observed_manifest(&schema, &live_cluster());
    assert_eq!(
        observed[1],
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx", "namespace": "web"},
            "spec": {"selector": {"app": "nginx"}}})
    );
}

#[test]
fn change_to_unobserved_field_is_not_a_difference() {
    let mut live = live_cluster();
    live[0]["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "2"});
    live[0]["status"] = json!({"readyReplicas": 1});
    live[1]["spec"]["clusterIP"] = json!("10.96.0.99");
    assert!(delta_after(&live).is_empty());
}

#[test]
fn comparing_last_applied_and_last_observed_yields_resources_to_create() {
    let live = vec![live_cluster().remove(0)];
    let delta = delta_after(&live);
    assert_eq!(delta.new, [id(&nginx_service())]);
}

#[test]
fn comparing_last_applied_and_last_observed_yields_resources_to_delete() {
    let schema = default_schema();
    let applied = last_applied_manifest(&manifest(), &schema, &live_cluster());
    let observed = last_observed_manifest(&schema, &live_cluster());
    // The user removed the Service from the manifest; it is still observed.
    let delta = ResourceDelta::between(&schema, &applied[..1], &observed);
    assert_eq!(delta.deleted, [id(&nginx_service())]);
    assert!(delta.new.is_empty() && delta.modified.is_empty());
}

#[test]
fn observed_field_left_out_of_manifest_is_filled_from_api_response() {
    let custom = [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
        "spec": {"sessionAffinity": null, "ports": [{"port": null, "protocol": null},
            {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 4}]}}),
    ];
    let schema = ObserverSchema::for_application(&manifest(), &custom).unwrap();
    let applied = last_applied_manifest(&manifest(), &schema, &live_cluster());
    assert_eq!(applied[1]["spec"]["sessionAffinity"], "None");
    // Fields neither written nor observed are not taken over.
    assert!(applied[1]["spec"].get("clusterIP").is_none());
    let mut live = live_cluster();
    live[1]["spec"]["sessionAffinity"] = json!("ClientIP");
    let observed = last_observed_manifest(&schema, &live);
    let delta = ResourceDelta::between(&schema, &applied, &observed);
    assert_eq!(
        differing_paths(&delta, &nginx_service()),
        [".spec.sessionAffinity"]
    );
}

#[test]
fn list_outside_its_bounds_is_a_modification() {
    let mut live = live_cluster();
    live[1]["spec"]["ports"]
        .as_array_mut()
        .unwrap()
        .push(json!({"port": 443, "protocol": "TCP"}));
    let delta = delta_after(&live);
    let service = delta
        .modified
        .iter()
        .find(|m| m.id == id(&nginx_service()))
        .unwrap();
    assert_eq!(service.differences.len(), 1);
    assert_eq!(
        service.differences[0].path,
        FieldPath::root().key("spec").key("ports")
    );
    assert!(matches!(
        service.differences[0].difference,
        Difference::ListOutsideBounds { length: 2, .. }
    ));
}

#[test]
fn optional_observed_list_element_may_come_and_go_but_not_change() {
    let custom = [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"},
        "spec": {"ports": [{"port": null}, {"port": null},
            {"observer_schema_list_min_length": 1, "observer_schema_list_max_length": 0}]}}),
    ];
    let schema = ObserverSchema::for_application(&manifest(), &custom).unwrap();
    let with_second_port = |port: u16| {
        let mut live = live_cluster();
        live[1]["spec"]["ports"]
            .as_array_mut()
            .unwrap()
            .push(json!({"port": port}));
        live
    };
    // Applied when the service had a second port (8443); later removed, re-added, changed.
    let applied = last_applied_manifest(&manifest(), &schema, &with_second_port(8443));
    let delta_for = |live: &[Value]| {
        ResourceDelta::between(&schema, &applied, &last_observed_manifest(&schema, live))
    };
    assert!(delta_for(&with_second_port(8443)).is_empty());
    let removed = delta_for(&live_cluster());
    assert_eq!(
        removed.modified[0].differences[0].difference,
        Difference::MissingInObserved
    );
    let changed = delta_for(&with_second_port(9443));
    assert_eq!(
        changed.modified[0].differences[0].path.to_string(),
        ".spec.ports[1].port"
    );
}

#[test]
fn minimal_schema_only_checks_that_the_resource_exists() {
    let custom = [json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nginx"}})];
    let schema = ObserverSchema::for_application(&manifest(), &custom).unwrap();
    let applied = last_applied_manifest(&manifest(), &schema, &live_cluster());
    let mut live = live_cluster();
    live[1]["spec"] = json!({"type": "NodePort"});
    let observed = last_observed_manifest(&schema, &live);
    assert!(ResourceDelta::between(&schema, &applied, &observed).is_empty());
    let gone = last_observed_manifest(&schema, &live[..1]);
    assert_eq!(
        ResourceDelta::between(&schema, &applied, &gone).new,
        [id(&nginx_service())]
    );
}

// --- Observer lifecycle: Summary and "Actions on the API side" ------------------------------

#[test]
fn lifecycle_create_observer_not_stopped_before_started_after() {
    let lifecycle = observer_lifecycle(ApplicationAction::Create);
    assert!(!lifecycle.stopped_before);
    assert!(lifecycle.started_after);
}

#[test]
fn lifecycle_update_observer_stopped_before_started_after() {
    let lifecycle = observer_lifecycle(ApplicationAction::Update);
    assert!(lifecycle.stopped_before);
    assert!(lifecycle.started_after);
}

#[test]
fn lifecycle_delete_observer_stopped_before_not_started_after() {
    let lifecycle = observer_lifecycle(ApplicationAction::Delete);
    assert!(lifecycle.stopped_before);
    assert!(!lifecycle.started_after);
}

// --- On status change -----------------------------------------------------------------------

#[test]
fn changed_status_matches_what_the_observer_fetched_from_the_cluster() {
    let schema = default_schema();
    let status = last_observed_manifest(&schema, &live_cluster());
    let mut live = live_cluster();
    live[0]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.19");
    let Observation::Changed(new_status) = observe(&schema, &status, &live) else {
        panic!("the observer must update the status");
    };
    assert_eq!(new_status, last_observed_manifest(&schema, &live));
}

#[test]
fn reconciliation_is_an_update_observer_stopped_before_started_after() {
    let mut live = live_cluster();
    live[1]["metadata"]["labels"]["tier"] = json!("backend");
    let running = ApplicationState {
        created: true,
        ..ApplicationState::default()
    };
    let action = running.next_action(&delta_after(&live));
    assert_eq!(action, Some(ApplicationAction::Update));
    let lifecycle = observer_lifecycle(ApplicationAction::Update);
    assert!(lifecycle.stopped_before && lifecycle.started_after);
}

#[test]
fn application_in_its_desired_state_needs_no_action() {
    let running = ApplicationState {
        created: true,
        ..ApplicationState::default()
    };
    assert_eq!(running.next_action(&delta_after(&live_cluster())), None);
}

#[test]
fn new_application_is_created_and_deleted_application_is_deleted() {
    // (deleting, created, spec changed) -> action, with no drift reported.
    let rows = [
        ((false, false, false), Some(ApplicationAction::Create)),
        ((false, true, true), Some(ApplicationAction::Update)),
        ((true, true, false), Some(ApplicationAction::Delete)),
        ((true, false, false), None),
    ];
    for ((deleting, created, spec_changed), expected) in rows {
        let state = ApplicationState {
            deleting,
            created,
            spec_changed,
        };
        assert_eq!(
            state.next_action(&ResourceDelta::default()),
            expected,
            "{state:?}"
        );
    }
}

#[test]
fn after_reconciliation_status_follows_desired_state() {
    let schema = default_schema();
    let mut drifted = live_cluster();
    drifted[0]["spec"]["replicas"] = json!(7);
    let drifted_status = last_observed_manifest(&schema, &drifted);
    // The reconciled cluster: the observer writes the status once, then sees no change.
    let reconciled = live_cluster();
    let Observation::Changed(status) = observe(&schema, &drifted_status, &reconciled) else {
        panic!("the reconciled state must replace the drifted status");
    };
    assert_eq!(status[0]["spec"]["replicas"], 2);
    assert_eq!(
        observe(&schema, &status, &reconciled),
        Observation::Unchanged
    );
}

// --- Warning: resources added manually ------------------------------------------------------

#[test]
fn resource_added_manually_is_not_managed() {
    let schema = default_schema();
    let manual = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-debug", "namespace": "web"},
        "spec": {"replicas": 1}});
    assert!(!schema.observes(&manual));
    let mut live = live_cluster();
    live.push(manual.clone());
    let observed = last_observed_manifest(&schema, &live);
    assert!(!observed.iter().any(|resource| id(resource) == id(&manual)));
    // Neither deleted, nor healed, nor updated.
    assert!(delta_after(&live).is_empty());
}
