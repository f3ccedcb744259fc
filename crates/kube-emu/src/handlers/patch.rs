//! patch: JSON patch, merge patch, strategic merge patch and server-side apply, computed by
//! [`crate::patch`] on the live object and then stored through the same update path as PUT
//! (so optimistic concurrency, status separation and generation behave identically). Apply to
//! a missing object creates it. Admission webhooks see the patched object.

use std::sync::Arc;

use axum::body::Body;
use http::{Response, header};

use super::{check_type_meta, name_after_url, object_key, object_response, stored, writer};
use crate::admission::{self, Operation, Write};
use crate::api::{RequestContext, Shared};
use crate::managed::list_semantics;
use crate::meta;
use crate::patch::{self, PatchError, PatchType};
use crate::present;
use crate::registry::ResourceKind;
use crate::state::{FieldValidation, WriteOptions};
use crate::status::{ApiError, Cause};

const ACCEPTED_PATCH_TYPES: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

pub(super) fn api_error(error: PatchError, kind: &ResourceKind, name: &str) -> ApiError {
    match error {
        PatchError::BadRequest(message) => ApiError::bad_request(message),
        PatchError::Invalid(message) => ApiError::unprocessable(message),
        PatchError::UnsupportedMediaType(message) => ApiError::unsupported_media_type(message),
        PatchError::Conflict { message, conflicts } => {
            let causes = conflicts
                .into_iter()
                .map(|conflict| Cause {
                    reason: "FieldManagerConflict",
                    message: format!("conflict with \"{}\"", conflict.manager),
                    field: conflict.field,
                })
                .collect();
            ApiError::conflict_with_message(&kind.id, name, message, causes)
        }
    }
}

/// How often a patch is recomputed when the object changes while webhooks look at it.
const PATCH_ATTEMPTS: usize = 5;

pub async fn patch(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let content_type = context.header(header::CONTENT_TYPE);
    let patch_type = PatchType::from_content_type(content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(ACCEPTED_PATCH_TYPES))?;
    if patch_type == PatchType::Apply && context.query.get("fieldManager").is_none() {
        return Err(ApiError::bad_request(
            "PATCH, application/apply-patch+yaml requires fieldManager parameter",
        ));
    }
    if patch_type != PatchType::Apply && context.query.flag("force") {
        return Err(ApiError::bad_request(
            "force is only supported for apply patches",
        ));
    }
    let writer = writer(context, kind);
    let key = object_key(context);
    let lists = list_semantics(kind);
    let version = &context.target.version;
    let subresource = context.target.subresource.as_deref();
    let fail = |error| api_error(error, kind, &key.name);
    let options = WriteOptions {
        dry_run: context.query.dry_run(),
        ownership_recorded: patch_type == PatchType::Apply,
        field_validation: FieldValidation::parse(context.query.get("fieldValidation"))?,
    };
    // The patch is computed under the lock, admitted without it (webhooks take time), and
    // stored only if the object has not changed meanwhile; otherwise computed again, as
    // kube-apiserver retries a patch that met a conflict it did not ask for.
    for _ in 0..PATCH_ATTEMPTS {
        let live = shared
            .state()
            .store
            .get(kind.storage_id(), &key)
            .map(|live| present::in_version(kind, version, live));
        let mut patched = match (patch_type, &live) {
            (PatchType::Apply, live) => {
                patch::apply(live.as_ref(), &context.body, &writer.context(), &lists)
                    .map_err(fail)?
            }
            (_, Some(live)) => {
                patch::patch(live, patch_type, &context.body, &lists).map_err(fail)?
            }
            (_, None) => return Err(ApiError::not_found(&kind.id, &key.name)),
        };
        check_type_meta(&patched, kind, context)?;
        if live.is_none() {
            if subresource.is_some() {
                return Err(ApiError::not_found(&kind.id, &key.name));
            }
            name_after_url(&mut patched, &key)?;
        }
        let write = Write {
            context,
            kind,
            operation: if live.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            name: &key.name,
            options: admission::options("PatchOptions", context),
        };
        let patched = admission::admit(shared, &write, patched, live.as_ref()).await?;
        super::write::confirm_no_escalation(shared, context, kind, &patched, live.as_ref())?;
        let mut state = shared.state();
        let unchanged = state
            .store
            .get(kind.storage_id(), &key)
            .map(|now| meta::resource_version(now))
            == live.as_ref().map(meta::resource_version);
        if !unchanged {
            continue;
        }
        if live.is_none() {
            let (storage, patched) = stored(&state, kind, patched);
            let created = state.create(
                &storage,
                context.target.namespace.as_deref(),
                patched,
                &writer,
                &options,
            );
            context.add_warnings(&state.take_warnings());
            let created = created?;
            return Ok(object_response(201, context, kind, &created));
        }
        let (storage, patched) = stored(&state, kind, patched);
        let updated = state.update(&storage, &key, patched, subresource, &writer, &options);
        context.add_warnings(&state.take_warnings());
        let updated = updated?;
        return Ok(object_response(200, context, kind, &updated));
    }
    Err(ApiError::stale_resource_version(&kind.id, &key.name))
}
