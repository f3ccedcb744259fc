//! create (POST) and update (PUT), main resource and subresources.

use std::sync::Arc;

use axum::body::Body;
use http::Response;

use super::{check_type_meta, decode_object, name_after_url, object_key, writer};
use crate::api::{RequestContext, Shared, json_response};
use crate::present;
use crate::registry::ResourceKind;
use crate::state::WriteOptions;
use crate::status::ApiError;

pub fn create(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let object = decode_object(context)?;
    check_type_meta(&object, kind, context)?;
    let options = WriteOptions {
        dry_run: context.query.dry_run(),
        ownership_recorded: false,
    };
    let created = shared.state().create(
        kind,
        context.target.namespace.as_deref(),
        object,
        &writer(context, kind),
        &options,
    )?;
    Ok(json_response(
        201,
        &present::in_version(kind, &context.target.version, &created),
    ))
}

pub fn update(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let mut object = decode_object(context)?;
    check_type_meta(&object, kind, context)?;
    let key = object_key(context);
    name_after_url(&mut object, &key)?;
    let options = WriteOptions {
        dry_run: context.query.dry_run(),
        ownership_recorded: false,
    };
    let updated = shared.state().update(
        kind,
        &key,
        object,
        context.target.subresource.as_deref(),
        &writer(context, kind),
        &options,
    )?;
    Ok(json_response(
        200,
        &present::in_version(kind, &context.target.version, &updated),
    ))
}
