//! delete and deletecollection: options from the query and the DeleteOptions body. Admission
//! webhooks see each object to be deleted as the oldObject.

use std::sync::Arc;

use axum::body::Body;
use http::Response;
use serde_json::{Map, Value};

use super::read::Filter;
use super::{object_key, object_response};
use crate::admission::{self, Operation, Write};
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

/// The DeleteOptions webhooks see: the body's, else one built from the query.
fn review_options(context: &RequestContext) -> Value {
    let mut options = match serde_json::from_slice::<Value>(&context.body) {
        Ok(Value::Object(body)) => body,
        _ => Map::new(),
    };
    if let Value::Object(defaults) = admission::options("DeleteOptions", context) {
        for (field, value) in defaults {
            options.entry(field).or_insert(value);
        }
    }
    options.insert("kind".into(), Value::from("DeleteOptions"));
    options.insert("apiVersion".into(), Value::from("meta.k8s.io/v1"));
    if let Some(policy) = context.query.get("propagationPolicy") {
        options
            .entry("propagationPolicy")
            .or_insert_with(|| Value::from(policy));
    }
    Value::Object(options)
}

/// Admits the delete of each object (presented in the request's version); the first refusal
/// stops the request.
async fn admit_deletes(
    shared: &Shared,
    context: &RequestContext,
    kind: &ResourceKind,
    objects: &[Arc<Value>],
) -> Result<(), ApiError> {
    for object in objects {
        let old = present::in_version(kind, &context.target.version, object);
        let write = Write {
            context,
            kind,
            operation: Operation::Delete,
            name: meta::name(&old),
            options: review_options(context),
        };
        admission::admit_delete(shared, &write, &old).await?;
    }
    Ok(())
}

pub async fn delete(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let options = delete_options(context)?;
    let key = object_key(context);
    // A missing object is the delete's 404, before admission.
    let old = shared.state().store.get(kind.storage_id(), &key).cloned();
    admit_deletes(shared, context, kind, old.as_slice()).await?;
    let outcome =
        shared
            .state()
            .delete(kind.storage_id(), &key, &options, &meta::now_timestamp())?;
    Ok(match outcome {
        Deleted::Removed(object) if returns_deleted_object(kind) => {
            object_response(200, context, kind, &object)
        }
        Deleted::Removed(object) => json_response(
            200,
            &deleted_status(&kind.id, &key.name, meta::uid(&object)),
        ),
        // An object kept by finalizers comes back as it now is; 202 only when the client
        // asked for cascading with the old `orphanDependents: false`, as kube-apiserver does.
        Deleted::Pending(object) => object_response(
            if orphan_dependents_refused(context) {
                202
            } else {
                200
            },
            context,
            kind,
            &object,
        ),
    })
}

/// Whether kube-apiserver answers a finished delete of `kind` with the object (its registry's
/// `ReturnDeletedObject`: custom resources, Pods, Services, ServiceAccounts) rather than a
/// Status.
fn returns_deleted_object(kind: &ResourceKind) -> bool {
    kind.custom
        || (kind.id.group.is_empty()
            && matches!(kind.kind.as_str(), "Pod" | "Service" | "ServiceAccount"))
}

/// `orphanDependents: false` in the body or the query.
fn orphan_dependents_refused(context: &RequestContext) -> bool {
    let in_body = serde_json::from_slice::<Value>(&context.body)
        .ok()
        .and_then(|body| body.get("orphanDependents").and_then(Value::as_bool));
    in_body.or_else(|| context.query.get("orphanDependents").map(|v| v == "true")) == Some(false)
}

pub async fn delete_collection(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let options = delete_options(context)?;
    let filter = Filter::from_request(context, kind)?;
    let now = meta::now_timestamp();
    let chosen: Vec<Arc<Value>> = shared
        .state()
        .store
        .list(kind.storage_id(), context.target.namespace.as_deref())
        .filter(|(key, object)| filter.matches(key, object))
        .map(|(_, object)| object.clone())
        .collect();
    admit_deletes(shared, context, kind, &chosen).await?;
    let keys: Vec<ObjectKey> = chosen.iter().map(|object| ObjectKey::of(object)).collect();
    let mut state = shared.state();
    let mut items = Vec::new();
    for key in keys {
        match state.delete(kind.storage_id(), &key, &options, &now) {
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
