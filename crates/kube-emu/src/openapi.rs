//! OpenAPI v3 as much as clients need it: the `/openapi/v3` index of group versions and, per
//! group version, the paths of each kind with their operations, the
//! `x-kubernetes-group-version-kind` / `x-kubernetes-action` extensions and the PATCH query
//! parameters. kubectl reads this to learn that the server validates fields itself
//! (`fieldValidation`), so `kubectl apply` needs no client-side schema. Component schemas are not
//! published (no `kubectl explain`); `/openapi/v2` is not served, which kubectl tolerates.

use axum::body::Body;
use http::Response;
use serde_json::{Map, Value, json};

use crate::api::json_response;
use crate::registry::{Registry, ResourceKind};
use crate::status::ApiError;

/// Serves `/openapi/<path>`.
pub fn serve(registry: &Registry, path: &str) -> Result<Response<Body>, ApiError> {
    match path.trim_end_matches('/') {
        "v3" => Ok(json_response(200, &index(registry))),
        other => {
            let group_version = other
                .strip_prefix("v3/")
                .ok_or_else(ApiError::no_such_route)?;
            let document = group_version_document(registry, group_version)
                .ok_or_else(ApiError::no_such_route)?;
            Ok(json_response(200, &document))
        }
    }
}

/// `api/v1` → ("", "v1"); `apis/apps/v1` → ("apps", "v1").
fn split_group_version(path: &str) -> Option<(&str, &str)> {
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", version] => Some(("", version)),
        ["apis", group, version] => Some((group, version)),
        _ => None,
    }
}

fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// FNV-1a: a stable fingerprint of a document, so clients refetch when CRDs change it.
fn fingerprint(document: &Value) -> String {
    let hash = document
        .to_string()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("{hash:016X}")
}

fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, versions) in registry.groups() {
        for version in versions {
            let path = group_version_path(&group, &version);
            if let Some(document) = group_version_document(registry, &path) {
                paths.insert(
                    path.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", fingerprint(&document))}),
                );
            }
        }
    }
    json!({"paths": paths})
}

fn query_parameter(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(kind: &ResourceKind, version: &str, action: &str, parameters: &[&str]) -> Value {
    let mut operation = json!({
        "operationId": format!("{action}{}", kind.kind),
        "parameters": parameters.iter().map(|name| query_parameter(name)).collect::<Vec<_>>(),
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": kind.id.group, "version": version, "kind": kind.kind},
    });
    if action == "patch" {
        // Strategic merge is left out on purpose: kubectl then computes it from its built-in
        // types instead of looking for component schemas this document does not carry.
        operation["requestBody"] = json!({"content": {
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
        }});
    }
    operation
}

fn group_version_document(registry: &Registry, path: &str) -> Option<Value> {
    let (group, version) = split_group_version(path)?;
    let mut paths = Map::new();
    for kind in registry.in_group_version(group, version) {
        let prefix = format!("/{}", group_version_path(group, version));
        let collection = if kind.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", kind.id.plural)
        } else {
            format!("{prefix}/{}", kind.id.plural)
        };
        let write_parameters = ["dryRun", "fieldManager", "fieldValidation"];
        let mut collection_operations = Map::new();
        if kind.allows("list") {
            collection_operations.insert(
                "get".into(),
                operation(
                    kind,
                    version,
                    "list",
                    &[
                        "labelSelector",
                        "fieldSelector",
                        "limit",
                        "continue",
                        "watch",
                    ],
                ),
            );
        }
        if kind.allows("create") {
            collection_operations.insert(
                "post".into(),
                operation(kind, version, "post", &write_parameters),
            );
        }
        paths.insert(collection.clone(), Value::Object(collection_operations));
        if kind.allows("get") {
            paths.insert(
                format!("{collection}/{{name}}"),
                json!({
                    "get": operation(kind, version, "get", &[]),
                    "put": operation(kind, version, "put", &write_parameters),
                    "patch": operation(kind, version, "patch", &["dryRun", "fieldManager", "fieldValidation", "force"]),
                    "delete": operation(kind, version, "delete", &["dryRun", "propagationPolicy"]),
                }),
            );
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (arbor-kube-emu)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_lists_group_versions_with_hashes() {
        let registry = Registry::with_builtins();
        let index = index(&registry);
        let core = index["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .expect("core listed");
        assert!(core.starts_with("/openapi/v3/api/v1?hash="));
        assert!(index["paths"]["apis/coordination.k8s.io/v1"].is_object());
    }

    #[test]
    fn patch_operations_advertise_field_validation() {
        let registry = Registry::with_builtins();
        let document = group_version_document(&registry, "api/v1").expect("served");
        let patch = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        assert!(
            patch["parameters"]
                .as_array()
                .expect("parameters")
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        assert!(group_version_document(&registry, "apis/nothing/v1").is_none());
    }
}
