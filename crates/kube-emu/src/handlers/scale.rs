//! `/scale`: the autoscaling/v1 `Scale` view of a workload's replica count (Deployments,
//! ReplicaSets, StatefulSets, ReplicationControllers, and CRDs declaring
//! `subresources.scale`). Reads build the Scale from the object; writes (PUT, or a patch of
//! the Scale) set the object's replicas and go through the ordinary update, so
//! `metadata.generation` moves as `kubectl rollout status` expects.

use std::sync::Arc;

use axum::body::Body;
use http::{Response, header};
use serde_json::{Map, Value, json};

use super::{decode_object, object_key, writer};
use crate::api::{RequestContext, Shared, json_response};
use crate::managed::list_semantics;
use crate::meta;
use crate::patch::{self, PatchType};
use crate::registry::{ResourceKind, ScaleSubresource};
use crate::state::{FieldValidation, WriteOptions};
use crate::status::{ApiError, Cause};

fn scale_paths(kind: &ResourceKind, version: &str) -> Result<ScaleSubresource, ApiError> {
    kind.version(version)
        .and_then(|served| served.scale.clone())
        .ok_or_else(ApiError::no_such_route)
}

/// `.spec.replicas` → `spec.replicas`, as [`meta::lookup_path`] takes it.
fn dotted(path: &str) -> &str {
    path.trim_start_matches('.')
}

fn set_path(object: &mut Value, path: &str, value: Value) {
    let mut current = object;
    let mut fields = dotted(path).split('.').peekable();
    while let Some(field) = fields.next() {
        if !current.is_object() {
            *current = json!({});
        }
        let map = current.as_object_mut().expect("made an object above");
        if fields.peek().is_none() {
            map.insert(field.to_owned(), value);
            return;
        }
        current = map
            .entry(field)
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// A `spec.selector` label selector as the string form a Scale carries.
fn selector_string(selector: &Value) -> String {
    let mut terms: Vec<String> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect();
    for expression in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values = meta::string_list(expression.get("values")).join(",");
        terms.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_owned(),
            _ => format!("!{key}"),
        });
    }
    terms.join(",")
}

fn replicas(object: &Value, path: &str) -> i64 {
    meta::lookup_path(object, dotted(path))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The Scale of `object`.
fn scale_of(paths: &ScaleSubresource, object: &Value) -> Value {
    let selector = match &paths.label_selector_path {
        Some(path) => meta::lookup_path(object, dotted(path))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        None => meta::lookup_path(object, "spec.selector")
            .map(selector_string)
            .unwrap_or_default(),
    };
    let mut metadata = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = object.get("metadata").and_then(|m| m.get(field)) {
            metadata.insert(field.to_owned(), value.clone());
        }
    }
    let mut status = json!({"replicas": replicas(object, &paths.status_replicas_path)});
    if !selector.is_empty() {
        status["selector"] = Value::from(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas(object, &paths.spec_replicas_path)},
        "status": status,
    })
}

pub fn get(
    shared: &Shared,
    context: &RequestContext,
    kind: &ResourceKind,
) -> Result<Response<Body>, ApiError> {
    let paths = scale_paths(kind, &context.target.version)?;
    let key = object_key(context);
    let state = shared.state();
    let object = state
        .store
        .get(&kind.id, &key)
        .ok_or_else(|| ApiError::not_found(&kind.id, &key.name))?;
    Ok(json_response(200, &scale_of(&paths, object)))
}

/// Writes the replicas of `scale` into the object; the new Scale.
fn write_scale(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
    live: &Value,
    scale: &Value,
) -> Result<Response<Body>, ApiError> {
    let paths = scale_paths(kind, &context.target.version)?;
    let key = object_key(context);
    let wanted = scale
        .get("spec")
        .and_then(|spec| spec.get("replicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if wanted < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            &key.name,
            vec![Cause::invalid(
                "spec.replicas",
                &Value::from(wanted),
                "must be greater than or equal to 0",
            )],
        ));
    }
    let requested_version = meta::resource_version(scale);
    if !requested_version.is_empty() && requested_version != meta::resource_version(live) {
        return Err(ApiError::stale_resource_version(&kind.id, &key.name));
    }
    let mut object = live.clone();
    set_path(&mut object, &paths.spec_replicas_path, Value::from(wanted));
    let options = WriteOptions {
        dry_run: context.query.dry_run(),
        ownership_recorded: false,
        field_validation: FieldValidation::Ignore,
    };
    let updated =
        shared
            .state()
            .update(kind, &key, object, None, &writer(context, kind), &options)?;
    Ok(json_response(200, &scale_of(&paths, &updated)))
}

fn live_object(
    shared: &Shared,
    kind: &ResourceKind,
    context: &RequestContext,
) -> Result<Value, ApiError> {
    let key = object_key(context);
    shared
        .state()
        .store
        .get(&kind.id, &key)
        .map(|live| (**live).clone())
        .ok_or_else(|| ApiError::not_found(&kind.id, &key.name))
}

pub fn update(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let scale = decode_object(context)?;
    let live = live_object(shared, kind, context)?;
    write_scale(shared, context, kind, &live, &scale)
}

pub fn patch(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let paths = scale_paths(kind, &context.target.version)?;
    let patch_type = PatchType::from_content_type(context.header(header::CONTENT_TYPE))
        .filter(|patch_type| *patch_type != PatchType::Apply)
        .ok_or_else(|| {
            ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
            )
        })?;
    let live = live_object(shared, kind, context)?;
    let scale = patch::patch(
        &scale_of(&paths, &live),
        patch_type,
        &context.body,
        &list_semantics(kind),
    )
    .map_err(|error| super::patch::api_error(error, kind, meta::name(&live)))?;
    write_scale(shared, context, kind, &live, &scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_scale_shows_replicas_and_the_selector_as_a_string() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
            "status": {"replicas": 2},
        });
        let scale = scale_of(&ScaleSubresource::workload(), &deployment);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 2);
        assert_eq!(scale["status"]["selector"], "app=web,tier in (a,b)");
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn set_path_creates_missing_parents() {
        let mut object = json!({});
        set_path(&mut object, ".spec.size.count", json!(4));
        assert_eq!(object, json!({"spec": {"size": {"count": 4}}}));
    }
}
