//! JSON patch, JSON merge patch and strategic merge patch through `patch::patch`.

use arbor_kube_emu::patch::{self, ListSemantics, PatchError, PatchType};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "sidecar", "image": "sidecar:1"}
        ]}}}
    })
}

fn apps(kind: &str) -> ListSemantics {
    ListSemantics::for_builtin("apps", kind)
}

fn patch_deployment(live: &Value, patch_type: PatchType, body: Value) -> Result<Value, PatchError> {
    patch::patch(
        live,
        patch_type,
        body.to_string().as_bytes(),
        &apps("Deployment"),
    )
}

fn strategic(live: &Value, body: Value) -> Result<Value, PatchError> {
    patch_deployment(live, PatchType::StrategicMerge, body)
}

fn containers(object: &Value) -> &Value {
    &object["spec"]["template"]["spec"]["containers"]
}

fn contains_directive(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key.starts_with('$') || contains_directive(value)),
        Value::Array(list) => list.iter().any(contains_directive),
        _ => false,
    }
}

#[test]
fn json_patch_adds_replaces_and_removes() {
    let body = json!([
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
        {"op": "remove", "path": "/metadata/labels/app"},
        {"op": "test", "path": "/metadata/name", "value": "web"}
    ]);
    let out = patch_deployment(&deployment(), PatchType::Json, body).unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(out["metadata"]["labels"], json!({"tier": "front"}));
}

#[test]
fn json_patch_with_a_failing_test_is_invalid() {
    let body = json!([
        {"op": "test", "path": "/spec/replicas", "value": 5},
        {"op": "replace", "path": "/spec/replicas", "value": 3}
    ]);
    let result = patch_deployment(&deployment(), PatchType::Json, body);
    assert!(matches!(result, Err(PatchError::Invalid(_))), "{result:?}");
}

#[test]
fn json_patch_that_is_not_a_list_of_operations_is_a_bad_request() {
    let result = patch::patch(
        &deployment(),
        PatchType::Json,
        br#"{"op": "remove"}"#,
        &apps("Deployment"),
    );
    assert!(
        matches!(result, Err(PatchError::BadRequest(_))),
        "{result:?}"
    );
}

#[test]
fn merge_patch_null_deletes_and_lists_are_replaced() {
    let body = json!({
        "metadata": {"labels": {"app": null, "tier": "front"}},
        "spec": {"template": {"spec": {"containers": [{"name": "only"}]}}}
    });
    let out = patch_deployment(&deployment(), PatchType::Merge, body).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"tier": "front"}));
    assert_eq!(containers(&out), &json!([{"name": "only"}]));
}

#[test]
fn strategic_merge_merges_containers_by_name() {
    let out = strategic(
        &deployment(),
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2"},
            {"name": "new", "image": "new:1"}
        ]}}}}),
    )
    .unwrap();
    assert_eq!(
        containers(&out),
        &json!([
            {"name": "app", "image": "app:2", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "sidecar", "image": "sidecar:1"},
            {"name": "new", "image": "new:1"}
        ])
    );
}

#[test]
fn strategic_merge_patch_delete_removes_the_named_element() {
    let body = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "$patch": "delete"}
    ]}}}});
    let out = strategic(&deployment(), body).unwrap();
    assert_eq!(containers(&out).as_array().unwrap().len(), 1);
    assert_eq!(containers(&out)[0]["name"], "app");
}

#[test]
fn strategic_merge_patch_replace_replaces_lists_and_maps() {
    let body = json!({
        "metadata": {"labels": {"$patch": "replace", "team": "a"}},
        "spec": {"template": {"spec": {"containers": [
            {"$patch": "replace"},
            {"name": "solo", "image": "solo:1"}
        ]}}}
    });
    let out = strategic(&deployment(), body).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(
        containers(&out),
        &json!([{"name": "solo", "image": "solo:1"}])
    );
}

#[test]
fn strategic_merge_merges_container_ports_by_container_port() {
    let body = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "ports": [
            {"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 9090, "name": "metrics"}
        ]}
    ]}}}});
    let out = strategic(&deployment(), body).unwrap();
    assert_eq!(
        containers(&out)[0]["ports"],
        json!([
            {"containerPort": 80, "name": "http", "protocol": "TCP"},
            {"containerPort": 9090, "name": "metrics"}
        ])
    );
}

#[test]
fn strategic_merge_keeps_directives_out_of_the_object() {
    let body = json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"], "finalizers": ["y"]},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}, {"name": "new"}],
            "containers": [
                {"name": "new", "image": "new:1", "env": [{"name": "A", "value": "1", "$patch": "merge"}]},
                {"name": "app", "$patch": "merge"}
            ]
        }}}
    });
    let out = strategic(&deployment(), body).unwrap();
    assert!(!contains_directive(&out), "{out:#}");
    let names: Vec<&str> = containers(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|container| container["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sidecar", "app", "new"]);
    assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
}

#[test]
fn strategic_merge_null_deletes_a_field() {
    let out = strategic(&deployment(), json!({"metadata": {"labels": null}})).unwrap();
    assert!(out["metadata"].get("labels").is_none());
}

#[test]
fn strategic_merge_on_a_custom_resource_is_unsupported_media_type() {
    let lists = ListSemantics::from_openapi_schema(&json!({"type": "object"}));
    let result = patch::patch(
        &json!({"spec": {}}),
        PatchType::StrategicMerge,
        br#"{"spec": {"a": 1}}"#,
        &lists,
    );
    assert!(
        matches!(result, Err(PatchError::UnsupportedMediaType(_))),
        "{result:?}"
    );
}

#[test]
fn merge_patch_on_a_custom_resource_works() {
    let lists = ListSemantics::from_openapi_schema(&json!({"type": "object"}));
    let out = patch::patch(
        &json!({"spec": {"a": 1}}),
        PatchType::Merge,
        br#"{"spec": {"b": 2}}"#,
        &lists,
    )
    .unwrap();
    assert_eq!(out, json!({"spec": {"a": 1, "b": 2}}));
}

#[test]
fn patches_that_do_not_leave_an_object_are_refused() {
    let merge = patch_deployment(&deployment(), PatchType::Merge, json!(["not", "an object"]));
    assert!(matches!(merge, Err(PatchError::BadRequest(_))), "{merge:?}");
    let json_patch = patch_deployment(
        &deployment(),
        PatchType::Json,
        json!([{"op": "replace", "path": "", "value": 3}]),
    );
    assert!(
        matches!(json_patch, Err(PatchError::Invalid(_))),
        "{json_patch:?}"
    );
}
