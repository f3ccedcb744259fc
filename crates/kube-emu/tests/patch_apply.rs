//! Server-side apply and update ownership through `patch::apply` and `patch::record_update`.

use arbor_kube_emu::patch::{self, FieldSet, ListSemantics, PatchError, WriteContext};
use serde_json::{Value, json};

fn ctx(manager: &str) -> WriteContext {
    WriteContext {
        field_manager: manager.to_owned(),
        force: false,
        subresource: None,
        now: "2026-01-01T00:00:00Z".to_owned(),
        api_version: "v1".to_owned(),
    }
}

fn forced(manager: &str) -> WriteContext {
    WriteContext {
        force: true,
        ..ctx(manager)
    }
}

fn core(kind: &str) -> ListSemantics {
    ListSemantics::for_builtin("", kind)
}

fn try_apply(
    live: Option<&Value>,
    body: &Value,
    ctx: &WriteContext,
    lists: &ListSemantics,
) -> Result<Value, PatchError> {
    patch::apply(live, body.to_string().as_bytes(), ctx, lists)
}

fn apply(live: Option<&Value>, body: &Value, ctx: &WriteContext, lists: &ListSemantics) -> Value {
    try_apply(live, body, ctx, lists).unwrap()
}

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": data})
}

/// Applies a ConfigMap with `data`.
fn try_apply_data(
    live: Option<&Value>,
    data: Value,
    ctx: &WriteContext,
) -> Result<Value, PatchError> {
    try_apply(live, &configmap(data), ctx, &core("ConfigMap"))
}

fn apply_data(live: Option<&Value>, data: Value, ctx: &WriteContext) -> Value {
    try_apply_data(live, data, ctx).unwrap()
}

/// The fieldsV1 of `manager`'s entry with `operation`.
fn owned_by(object: &Value, manager: &str, operation: &str) -> Option<Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|entry| entry["manager"] == manager && entry["operation"] == operation)
        .map(|entry| entry["fieldsV1"].clone())
}

/// Asserts that `manager`'s entry with `operation` owns exactly `fields`.
#[track_caller]
fn assert_owns(object: &Value, manager: &str, operation: &str, fields: Value) {
    assert_eq!(
        owned_by(object, manager, operation),
        Some(fields),
        "{manager} {operation} in {object:#}"
    );
}

fn conflict_message(result: Result<Value, PatchError>) -> String {
    match result {
        Err(PatchError::Conflict { message, .. }) => message,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn apply_creates_with_an_apply_entry_owning_what_was_applied() {
    let body = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}
    });
    let out = apply(None, &body, &ctx("arbor"), &core("Pod"));
    assert_eq!(out["spec"], body["spec"]);
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{
            "manager": "arbor",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {}, "f:image": {}, "f:name": {}
                }}}
            }
        }])
    );
}

#[test]
fn apply_accepts_yaml_bodies() {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  key: value\n";
    let out = patch::apply(None, yaml.as_bytes(), &ctx("arbor"), &core("ConfigMap")).unwrap();
    assert_eq!(out["data"], json!({"key": "value"}));
}

#[test]
fn apply_by_the_same_manager_removes_a_field_it_stopped_applying() {
    let first = apply_data(None, json!({"a": "1", "b": "2"}), &ctx("arbor"));
    let second = apply_data(Some(&first), json!({"a": "1"}), &ctx("arbor"));
    assert_eq!(second["data"], json!({"a": "1"}));
    assert_owns(&second, "arbor", "Apply", json!({"f:data": {"f:a": {}}}));
}

#[test]
fn a_field_the_applier_stops_applying_stays_when_another_manager_owns_it() {
    let first = apply_data(None, json!({"a": "1", "b": "2"}), &ctx("arbor"));
    // A second applier sets b to the same value: shared ownership.
    let shared = apply_data(Some(&first), json!({"b": "2"}), &ctx("other"));
    let released = apply_data(Some(&shared), json!({"a": "1"}), &ctx("arbor"));
    assert_eq!(released["data"], json!({"a": "1", "b": "2"}));
    assert_owns(&released, "arbor", "Apply", json!({"f:data": {"f:a": {}}}));
    assert_owns(&released, "other", "Apply", json!({"f:data": {"f:b": {}}}));
}

#[test]
fn changing_a_field_another_manager_owns_is_a_conflict_worded_like_kube() {
    let lists = core("ConfigMap");
    let mut live = configmap(json!({"key": "old"}));
    let update = WriteContext {
        field_manager: "kubectl-client-side-apply".to_owned(),
        ..ctx("")
    };
    patch::record_update(None, &mut live, &update, &lists);
    let result = try_apply_data(Some(&live), json!({"key": "new"}), &ctx("arbor"));
    assert_eq!(
        conflict_message(result),
        r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key"#
    );
}

#[test]
fn several_conflicts_use_the_plural_form() {
    let live = apply_data(None, json!({"a": "1", "b": "2"}), &ctx("x"));
    let result = try_apply_data(Some(&live), json!({"a": "3", "b": "4"}), &ctx("y"));
    assert_eq!(
        conflict_message(result),
        "Apply failed with 2 conflicts: conflicts with \"x\":\n- .data.a\n- .data.b"
    );
}

#[test]
fn force_moves_ownership_to_the_applier() {
    let live = apply_data(None, json!({"a": "1", "b": "2"}), &ctx("x"));
    let out = apply_data(Some(&live), json!({"a": "9"}), &forced("y"));
    assert_eq!(out["data"], json!({"a": "9", "b": "2"}));
    assert_owns(&out, "y", "Apply", json!({"f:data": {"f:a": {}}}));
    assert_owns(&out, "x", "Apply", json!({"f:data": {"f:b": {}}}));
}

#[test]
fn applying_an_equal_value_shares_ownership_without_conflict() {
    let live = apply_data(None, json!({"a": "1"}), &ctx("x"));
    let out = apply_data(Some(&live), json!({"a": "1"}), &ctx("y"));
    for manager in ["x", "y"] {
        assert_eq!(
            owned_by(&out, manager, "Apply").unwrap(),
            json!({"f:data": {"f:a": {}}}),
            "{manager}"
        );
    }
}

#[test]
fn an_update_after_apply_takes_the_field_so_the_next_apply_conflicts() {
    let lists = core("ConfigMap");
    let applied = apply_data(None, json!({"a": "1", "b": "2"}), &ctx("arbor"));
    // kubectl edit: an update changing data.a.
    let mut edited = applied.clone();
    edited["data"]["a"] = json!("edited");
    patch::record_update(Some(&applied), &mut edited, &ctx("kubectl-edit"), &lists);
    assert_owns(
        &edited,
        "kubectl-edit",
        "Update",
        json!({"f:data": {"f:a": {}}}),
    );
    assert_owns(&edited, "arbor", "Apply", json!({"f:data": {"f:b": {}}}));
    let result = try_apply_data(Some(&edited), json!({"a": "1", "b": "2"}), &ctx("arbor"));
    assert_eq!(
        conflict_message(result),
        r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.a"#
    );
}

#[test]
fn create_through_update_owns_every_field_but_identity_and_server_metadata() {
    let mut created = configmap(json!({"a": "1"}));
    created["metadata"]["uid"] = json!("u-1");
    created["metadata"]["resourceVersion"] = json!("7");
    created["metadata"]["labels"] = json!({"app": "x"});
    patch::record_update(
        None,
        &mut created,
        &ctx("kubectl-create"),
        &core("ConfigMap"),
    );
    assert_owns(
        &created,
        "kubectl-create",
        "Update",
        json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}),
    );
}

#[test]
fn an_update_that_changes_nothing_records_nothing() {
    let lists = core("ConfigMap");
    let applied = apply_data(None, json!({"a": "1"}), &ctx("arbor"));
    let mut same = applied.clone();
    patch::record_update(Some(&applied), &mut same, &ctx("kubectl-edit"), &lists);
    assert_eq!(same, applied);
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn associative_list_elements_are_owned_per_key() {
    let lists = core("Pod");
    let first = apply(
        None,
        &pod(json!([{"name": "app", "image": "app:1"}])),
        &ctx("a"),
        &lists,
    );
    let both = apply(
        Some(&first),
        &pod(json!([{"name": "sidecar", "image": "s:1"}])),
        &ctx("b"),
        &lists,
    );
    assert_eq!(
        both["spec"]["containers"],
        json!([{"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "s:1"}])
    );
    assert_owns(
        &both,
        "b",
        "Apply",
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"sidecar\"}": {
            ".": {}, "f:image": {}, "f:name": {}
        }}}}),
    );
    // Manager b drops its container: only b's element goes, a's stays.
    let dropped = apply(Some(&both), &pod(json!([])), &ctx("b"), &lists);
    assert_eq!(
        dropped["spec"]["containers"],
        json!([{"name": "app", "image": "app:1"}])
    );
}

#[test]
fn atomic_lists_are_replaced_whole_and_owned_as_one_field() {
    let lists = core("Pod");
    let container = |args: Value| pod(json!([{"name": "app", "args": args}]));
    let first = apply(None, &container(json!(["a", "b"])), &ctx("x"), &lists);
    let fields = owned_by(&first, "x", "Apply").unwrap();
    assert_eq!(
        fields["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["f:args"],
        json!({})
    );
    let second = apply(Some(&first), &container(json!(["c"])), &ctx("x"), &lists);
    assert_eq!(second["spec"]["containers"][0]["args"], json!(["c"]));
    let other = try_apply(
        Some(&second),
        &container(json!(["c", "d"])),
        &ctx("y"),
        &lists,
    );
    assert!(conflict_message(other).ends_with(r#".spec.containers[name="app"].args"#));
}

#[test]
fn crd_list_map_keys_are_honoured() {
    let lists = ListSemantics::from_openapi_schema(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "routes": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["host", "port"],
                "items": {"type": "object"}
            }
        }}}
    }));
    let widget = |routes: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"routes": routes}})
    };
    let first = apply(
        None,
        &widget(json!([{"host": "a", "port": 80, "backend": "x"}])),
        &ctx("one"),
        &lists,
    );
    let second = apply(
        Some(&first),
        &widget(json!([{"host": "a", "port": 443, "backend": "y"}])),
        &ctx("two"),
        &lists,
    );
    assert_eq!(second["spec"]["routes"].as_array().unwrap().len(), 2);
    assert_owns(
        &second,
        "two",
        "Apply",
        json!({"f:spec": {"f:routes": {"k:{\"host\":\"a\",\"port\":443}": {
            ".": {}, "f:backend": {}, "f:host": {}, "f:port": {}
        }}}}),
    );
}

#[test]
fn lists_without_annotations_in_a_crd_are_atomic() {
    let lists = ListSemantics::from_openapi_schema(&json!({"type": "object"}));
    let widget = |items: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"items": items}})
    };
    let first = apply(None, &widget(json!([{"name": "a"}])), &ctx("x"), &lists);
    let second = apply(
        Some(&first),
        &widget(json!([{"name": "b"}])),
        &ctx("x"),
        &lists,
    );
    assert_eq!(second["spec"]["items"], json!([{"name": "b"}]));
}

#[test]
fn status_is_applied_only_through_the_status_subresource() {
    let lists = ListSemantics::for_builtin("apps", "Deployment");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 2},
        "status": {"replicas": 5}
    });
    let apps_ctx = |manager: &str, subresource: Option<&str>| WriteContext {
        api_version: "apps/v1".to_owned(),
        subresource: subresource.map(str::to_owned),
        ..ctx(manager)
    };
    let main = apply(None, &deployment, &apps_ctx("arbor", None), &lists);
    assert!(main.get("status").is_none(), "{main:#}");
    let status = apply(
        Some(&main),
        &deployment,
        &apps_ctx("controller", Some("status")),
        &lists,
    );
    assert_eq!(status["status"], json!({"replicas": 5}));
    assert_eq!(status["spec"], json!({"replicas": 2}));
    let entries = status["metadata"]["managedFields"].as_array().unwrap();
    let status_entry = entries
        .iter()
        .find(|entry| entry["manager"] == "controller")
        .unwrap();
    assert_eq!(status_entry["subresource"], "status");
    assert_eq!(
        status_entry["fieldsV1"],
        json!({"f:status": {"f:replicas": {}}})
    );
    assert_owns(
        &status,
        "arbor",
        "Apply",
        json!({"f:spec": {"f:replicas": {}}}),
    );
}

#[test]
fn managed_fields_in_the_body_are_refused() {
    let mut body = configmap(json!({}));
    body["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let result = try_apply(None, &body, &ctx("a"), &core("ConfigMap"));
    assert!(
        matches!(result, Err(PatchError::BadRequest(_))),
        "{result:?}"
    );
}

#[test]
fn duplicate_keys_in_an_applied_list_are_invalid() {
    let body = pod(json!([{"name": "a"}, {"name": "a"}]));
    let result = try_apply(None, &body, &ctx("a"), &core("Pod"));
    assert!(matches!(result, Err(PatchError::Invalid(_))), "{result:?}");
}

#[test]
fn managed_fields_decode_into_field_sets() {
    let out = apply(
        None,
        &configmap(json!({"a": "1"})),
        &ctx("x"),
        &core("ConfigMap"),
    );
    let set = FieldSet::from_fields_v1(&owned_by(&out, "x", "Apply").unwrap()).unwrap();
    assert_eq!(set.members().len(), 1);
}

#[test]
fn an_element_another_manager_partly_owns_keeps_its_key_and_their_fields() {
    let lists = core("Pod");
    let applied = apply(
        None,
        &pod(json!([{"name": "app", "image": "app:1", "tty": true}])),
        &ctx("arbor"),
        &lists,
    );
    let mut edited = applied.clone();
    edited["spec"]["containers"][0]["image"] = json!("app:hotfix");
    patch::record_update(Some(&applied), &mut edited, &ctx("kubectl-edit"), &lists);
    let dropped = apply(Some(&edited), &pod(json!([])), &ctx("arbor"), &lists);
    assert_eq!(
        dropped["spec"]["containers"],
        json!([{"name": "app", "image": "app:hotfix"}])
    );
    assert!(owned_by(&dropped, "arbor", "Apply").is_none());
}

#[test]
fn updates_through_status_get_their_own_entry() {
    let lists = ListSemantics::for_builtin("apps", "Deployment");
    let old = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                     "spec": {"replicas": 1}});
    let mut new = old.clone();
    new["status"] = json!({"readyReplicas": 1});
    let writer = WriteContext {
        subresource: Some("status".to_owned()),
        api_version: "apps/v1".to_owned(),
        ..ctx("controller")
    };
    patch::record_update(Some(&old), &mut new, &writer, &lists);
    assert_eq!(
        new["metadata"]["managedFields"],
        json!([{
            "manager": "controller", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:readyReplicas": {}}}, "subresource": "status"
        }])
    );
}

#[test]
fn custom_resources_get_object_meta_semantics_for_finalizers() {
    let lists = ListSemantics::from_openapi_schema(&json!({"type": "object"}));
    let widget = |finalizer: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "finalizers": [finalizer]}})
    };
    let first = apply(None, &widget("a.example.com/x"), &ctx("one"), &lists);
    let second = apply(
        Some(&first),
        &widget("b.example.com/y"),
        &ctx("two"),
        &lists,
    );
    assert_eq!(
        second["metadata"]["finalizers"],
        json!(["a.example.com/x", "b.example.com/y"])
    );
    assert_owns(
        &second,
        "two",
        "Apply",
        json!({"f:metadata": {"f:finalizers": {"v:\"b.example.com/y\"": {}}}}),
    );
}

#[test]
fn atomic_maps_in_a_crd_are_replaced_and_owned_whole() {
    let lists = ListSemantics::from_openapi_schema(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic"}
        }}}
    }));
    let widget = |selector: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"selector": selector}})
    };
    let first = apply(
        None,
        &widget(json!({"a": "1", "b": "2"})),
        &ctx("x"),
        &lists,
    );
    assert_owns(&first, "x", "Apply", json!({"f:spec": {"f:selector": {}}}));
    let second = apply(Some(&first), &widget(json!({"c": "3"})), &ctx("x"), &lists);
    assert_eq!(second["spec"]["selector"], json!({"c": "3"}));
}
