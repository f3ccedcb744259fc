//! delete and deletecollection: options from the query and the DeleteOptions body.

use std::sync::Arc;

use axum::body::Body;
use http::Response;
use serde_json::{Map, Value};

use super::object_key;
use super::read::Filter;
use crate::api::{RequestContext, Shared, json_response};
use crate::lifecycle::{DeleteOptions, Deleted, Propagation};
use crate::meta;
use crate::present;
use crate::registry::ResourceKind;
use crate::status::{ApiError, deleted_status};
use crate::store::ObjectKey;

/// Options from `?propagationPolicy=&dryRun=` and a `DeleteOptions` body (the body wins).
fn delete_options(context: &RequestContext) -> Result<DeleteOptions, ApiError> {
    let body: Value = if context.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&context.body)
            .map_err(|error| ApiError::bad_request(format!("decoding DeleteOptions: {error}")))?
    };
    let text = |path: &str| {
        meta::lookup_path(&body, path)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let policy = text("propagationPolicy")
        .or_else(|| context.query.get("propagationPolicy").map(str::to_owned))
        .or_else(|| {
            // The deprecated orphanDependents flag maps onto the policies.
            let orphan = body
                .get("orphanDependents")
                .and_then(Value::as_bool)
                .or_else(|| context.query.get("orphanDependents").map(|v| v == "true"))?;
            Some(if orphan { "Orphan" } else { "Background" }.to_owned())
        });
    let propagation = policy
        .as_deref()
        .map(Propagation::parse)
        .transpose()?
        .unwrap_or_default();
    let dry_run = context.query.dry_run()
        || meta::string_list(body.get("dryRun"))
            .iter()
            .any(|mode| mode == "All");
    Ok(DeleteOptions {
        precondition_uid: text("preconditions.uid"),
        precondition_resource_version: text("preconditions.resourceVersion"),
        propagation,
        dry_run,
    })
}

pub fn delete(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let options = delete_options(context)?;
    let key = object_key(context);
    let outcome = shared
        .state()
        .delete(&kind.id, &key, &options, &meta::now_timestamp())?;
    let version = &context.target.version;
    Ok(match outcome {
        // kube-apiserver answers a finished delete of a custom resource with the object and of
        // a built-in kind with a Status.
        Deleted::Removed(object) if kind.custom => {
            json_response(200, &present::in_version(kind, version, &object))
        }
        Deleted::Removed(object) => json_response(
            200,
            &deleted_status(&kind.id, &key.name, meta::uid(&object)),
        ),
        Deleted::Pending(object) => {
            json_response(202, &present::in_version(kind, version, &object))
        }
    })
}

pub fn delete_collection(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let options = delete_options(context)?;
    let filter = Filter::from_request(context, kind)?;
    let now = meta::now_timestamp();
    let mut state = shared.state();
    let keys: Vec<ObjectKey> = state
        .store
        .list(&kind.id, context.target.namespace.as_deref())
        .filter(|(key, object)| filter.matches(key, object))
        .map(|(key, _)| key.clone())
        .collect();
    let mut items = Vec::new();
    for key in keys {
        match state.delete(&kind.id, &key, &options, &now) {
            Ok(Deleted::Removed(object) | Deleted::Pending(object)) => items.push(object),
            // Collected as a dependent of an earlier item of the same collection.
            Err(error) if error.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    let revision = state.store.revision();
    drop(state);
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), Value::from(revision.to_string()));
    let body = present::list(
        kind,
        &context.target.version,
        present::Presentation::Object,
        &items,
        metadata,
    );
    Ok(json_response(200, &body))
}
