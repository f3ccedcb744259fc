//! create (POST) and update (PUT), main resource and subresources. Admission webhooks see the
//! decoded body (and, for updates, the stored object) before the write.

use std::sync::Arc;

use axum::body::Body;
use http::Response;

use super::{
    check_type_meta, decode_object, name_after_url, object_key, object_response, stored, writer,
};
use crate::admission::{self, Operation, Write};
use crate::api::{RequestContext, Shared};
use crate::meta;
use crate::present;
use crate::rbac::escalation::RbacWrite;
use crate::registry::ResourceKind;
use crate::state::{FieldValidation, WriteOptions};
use crate::status::ApiError;

pub async fn create(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let object = decode_object(context)?;
    check_type_meta(&object, kind, context)?;
    let name = meta::name(&object).to_owned();
    let write = Write {
        context,
        kind,
        operation: Operation::Create,
        name: &name,
        options: admission::options("CreateOptions", context),
    };
    let object = admission::admit(shared, &write, object, None).await?;
    confirm_no_escalation(shared, context, kind, &object, None)?;
    let options = WriteOptions {
        dry_run: context.query.dry_run(),
        ownership_recorded: false,
        field_validation: FieldValidation::parse(context.query.get("fieldValidation"))?,
    };
    let created = {
        let mut state = shared.state();
        let (storage, object) = stored(&state, kind, object);
        let created = state.create(
            &storage,
            context.target.namespace.as_deref(),
            object,
            &writer(context, kind),
            &options,
        );
        context.add_warnings(&state.take_warnings());
        created?
    };
    Ok(object_response(201, context, kind, &created))
}

pub async fn update(
    shared: &Shared,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let mut object = decode_object(context)?;
    check_type_meta(&object, kind, context)?;
    let key = object_key(context);
    name_after_url(&mut object, &key)?;
    let version = &context.target.version;
    let old = shared
        .state()
        .store
        .get(kind.storage_id(), &key)
        .map(|old| present::in_version(kind, version, old));
    // A missing object is the update's 404, before admission as in kube-apiserver.
    if let Some(old) = &old {
        let write = Write {
            context,
            kind,
            operation: Operation::Update,
            name: &key.name,
            options: admission::options("UpdateOptions", context),
        };
        object = admission::admit(shared, &write, object, Some(old)).await?;
    }
    confirm_no_escalation(shared, context, kind, &object, old.as_ref())?;
    let options = WriteOptions {
        dry_run: context.query.dry_run(),
        ownership_recorded: false,
        field_validation: FieldValidation::parse(context.query.get("fieldValidation"))?,
    };
    let updated = {
        let mut state = shared.state();
        let (storage, object) = stored(&state, kind, object);
        let updated = state.update(
            &storage,
            &key,
            object,
            context.target.subresource.as_deref(),
            &writer(context, kind),
            &options,
        );
        context.add_warnings(&state.take_warnings());
        updated?
    };
    Ok(object_response(200, context, kind, &updated))
}

/// RBAC's escalation check on a write of a Role, ClusterRole or binding (see
/// [`crate::rbac::escalation`]); other kinds pass.
pub(super) fn confirm_no_escalation(
    shared: &Shared,
    context: &RequestContext,
    kind: &ResourceKind,
    object: &serde_json::Value,
    old: Option<&serde_json::Value>,
) -> Result<(), ApiError> {
    crate::rbac::escalation::confirm(
        &RbacWrite {
            identity: &context.identity,
            resource: &kind.id,
            namespace: context.target.namespace.as_deref().unwrap_or_default(),
            url_name: context.target.name.as_deref().unwrap_or_default(),
            object,
            old,
        },
        shared,
    )
}
