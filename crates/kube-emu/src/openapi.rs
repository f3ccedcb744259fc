//! OpenAPI v3 as much as clients need it: the `/openapi/v3` index of group versions and, per
//! group version, the paths of each kind with their operations, the
//! `x-kubernetes-group-version-kind` / `x-kubernetes-action` extensions and the PATCH query
//! parameters. kubectl reads this to learn that the server validates fields itself
//! (`fieldValidation`), so `kubectl apply` needs no client-side schema. The schemas of custom
//! kinds (from their CRDs) and of built-in kinds (from k8s-openapi, see `builtin`) are
//! published as components, which is what `kubectl explain gittrack.spec` and `kubectl explain
//! deployment.spec` read. `/openapi/v2` is not served, which kubectl tolerates: with v2
//! schemas kubectl would send strategic merge patches to custom resources, which no API server
//! accepts.

mod builtin;

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
            // The built-in schemas never change while the server runs: the hash covers the
            // rest (paths and CRD schemas), which spares hashing megabytes per kubectl call.
            if let Some(document) = group_version_document_with(registry, &path, false) {
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

/// `arbor.dev` + `v1alpha1` + `GitTrack` → `dev.arbor.v1alpha1.GitTrack`, the name
/// kube-apiserver gives a custom resource's schema.
fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A custom kind's schema as a component: the CRD's schema with the type meta and metadata
/// kube-apiserver adds, marked with its group-version-kind so `kubectl explain` finds it.
fn component_schema(kind: &ResourceKind, version: &str) -> Option<Value> {
    let mut schema = kind.version(version)?.schema.clone()?;
    let object = schema.as_object_mut()?;
    let properties = object
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    properties.entry("apiVersion").or_insert_with(|| json!({
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
    }));
    properties.entry("kind").or_insert_with(|| json!({
        "type": "string",
        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to.",
    }));
    properties.insert(
        "metadata".into(),
        json!({"type": "object", "description": "Standard object's metadata."}),
    );
    object.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": kind.id.group, "version": version, "kind": kind.kind}]),
    );
    Some(schema)
}

fn group_version_document(registry: &Registry, path: &str) -> Option<Value> {
    group_version_document_with(registry, path, true)
}

fn group_version_document_with(
    registry: &Registry,
    path: &str,
    with_builtin_schemas: bool,
) -> Option<Value> {
    let (group, version) = split_group_version(path)?;
    let mut paths = Map::new();
    let mut schemas = match builtin::schemas(group, version) {
        Some(schemas) if with_builtin_schemas => schemas.clone(),
        _ => Map::new(),
    };
    for kind in registry.in_group_version(group, version) {
        if let Some(schema) = component_schema(kind, version) {
            schemas.insert(schema_name(group, version, &kind.kind), schema);
        }
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
        "components": {"schemas": schemas},
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
