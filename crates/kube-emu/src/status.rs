//! Failures as the Kubernetes API reports them: `Status` objects with kube-apiserver's reason,
//! code and message wording, so clients that match on them (kube-rs `ErrorResponse`, kubectl's
//! messages, `apierrors.IsConflict` in Go) behave as against a real cluster.

use serde_json::{Value, json};

use crate::registry::ResourceId;

/// One entry of `details.causes` in an `Invalid` status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl Cause {
    /// `field: Invalid value: "value": why`, kube's FieldValueInvalid.
    pub fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {why}"),
        }
    }

    /// kube's FieldValueTypeInvalid: the value's type is not the declared one.
    pub fn type_invalid(field: impl Into<String>, value: &Value, why: &str) -> Cause {
        Cause {
            reason: "FieldValueTypeInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {why}"),
        }
    }

    /// kube's FieldValueNotSupported: `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[String]) -> Cause {
        let supported: Vec<String> = supported
            .iter()
            .map(|allowed| Value::from(allowed.as_str()).to_string())
            .collect();
        Cause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        }
    }

    /// kube's FieldValueTooLong, which does not repeat the value.
    pub fn too_long(field: impl Into<String>, max_bytes: u64) -> Cause {
        Cause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {max_bytes} bytes"),
        }
    }

    /// kube's FieldValueTooMany: `Too many: 4: must have at most 3 items`.
    pub fn too_many(field: impl Into<String>, actual: u64, max: u64) -> Cause {
        Cause {
            reason: "FieldValueTooMany",
            field: field.into(),
            message: format!("Too many: {actual}: must have at most {max} items"),
        }
    }

    /// kube's FieldValueDuplicate.
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Cause {
        Cause {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {value}"),
        }
    }

    /// kube's FieldValueRequired.
    pub fn required(field: impl Into<String>, why: &str) -> Cause {
        let message = if why.is_empty() {
            "Required value".to_owned()
        } else {
            format!("Required value: {why}")
        };
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message,
        }
    }

    /// kube's FieldValueForbidden.
    pub fn forbidden(field: impl Into<String>, why: &str) -> Cause {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {why}"),
        }
    }
}

/// An API failure, rendered as a `Status` body with `code` as the HTTP status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Whether the answer is `message` as plain text rather than a `Status`, as kube-apiserver
    /// answers failures of its filters that run before any API handler.
    pub plain_text: bool,
}

fn details(resource: &ResourceId, name: &str) -> Value {
    let mut details = json!({"name": name, "kind": resource.plural});
    if !resource.group.is_empty() {
        details["group"] = Value::from(resource.group.clone());
    }
    details
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            plain_text: false,
        }
    }

    fn with_details(mut self, details: Value) -> ApiError {
        self.details = Some(details);
        self
    }

    /// `configmaps "x" not found`.
    pub fn not_found(resource: &ResourceId, name: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(details(resource, name))
    }

    /// A URL that names no resource the server serves.
    pub fn no_such_route() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `configmaps "x" already exists`.
    pub fn already_exists(resource: &ResourceId, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(details(resource, name))
    }

    /// `Operation cannot be fulfilled on configmaps "x": <why>`.
    pub fn conflict(resource: &ResourceId, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(details(resource, name))
    }

    /// The optimistic-concurrency conflict of an update with a stale resourceVersion.
    pub fn stale_resource_version(resource: &ResourceId, name: &str) -> ApiError {
        ApiError::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// A 409 whose message is already worded (server-side apply conflicts).
    pub fn conflict_with_message(
        resource: &ResourceId,
        name: &str,
        message: String,
        causes: Vec<Cause>,
    ) -> ApiError {
        let mut details = details(resource, name);
        details["causes"] = causes_json(&causes);
        ApiError::new(409, "Conflict", message).with_details(details)
    }

    /// 422: `ConfigMap "x" is invalid: metadata.name: Invalid value: ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let rendered: Vec<String> = causes
            .iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message))
            .collect();
        let summary = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let qualified_kind = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let mut details = json!({"name": name, "kind": kind, "causes": causes_json(&causes)});
        if !group.is_empty() {
            details["group"] = Value::from(group);
        }
        ApiError::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {summary}"),
        )
        .with_details(details)
    }

    /// `Ok` when there are no causes, else [`ApiError::invalid`] with them.
    pub fn invalid_if_any(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<Cause>,
    ) -> Result<(), ApiError> {
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(group, kind, name, causes))
        }
    }

    /// 422 with a message already worded (a JSON patch `test` that failed, for example).
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }

    /// 403: `configmaps "x" is forbidden: <why>`.
    pub fn forbidden(resource: &ResourceId, name: &str, why: &str) -> ApiError {
        let subject = if name.is_empty() {
            resource.to_string()
        } else {
            format!("{resource} \"{name}\"")
        };
        ApiError::new(403, "Forbidden", format!("{subject} is forbidden: {why}"))
            .with_details(details(resource, name))
    }

    /// 403 for a non-resource path: `forbidden: <why>`, with empty details as kube-apiserver
    /// sends them.
    pub fn forbidden_path(why: &str) -> ApiError {
        ApiError::new(403, "Forbidden", format!("forbidden: {why}")).with_details(json!({}))
    }

    /// 403 for a create in a namespace that is being deleted.
    pub fn namespace_terminating(resource: &ResourceId, name: &str, namespace: &str) -> ApiError {
        let mut error = ApiError::forbidden(
            resource,
            name,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        );
        if let Some(details) = error.details.as_mut() {
            details["causes"] = json!([{
                "reason": "NamespaceTerminating",
                "message": format!("namespace {namespace} is being terminated"),
                "field": "metadata.namespace",
            }]);
        }
        error
    }

    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 410 for a watch or continue token older than the retained history.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 413 for a body over the request size limit.
    pub fn request_entity_too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// A status chosen by someone else (an admission webhook's denial, an injected fault):
    /// kube's reason for the code, and the message as given.
    pub fn with_code(code: u16, message: impl Into<String>) -> ApiError {
        ApiError::new(code, reason_for_code(code), message)
    }

    /// 500 `Internal error occurred: <what>`, kube's InternalError.
    pub fn internal(what: &str) -> ApiError {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {what}"),
        )
        .with_details(json!({"causes": [{"message": what}]}))
    }

    /// 500 as kube-apiserver's filters write it, in plain text:
    /// `Internal Server Error: "<request URI>": <what>`, with `&`, `<` and `>` escaped as HTML.
    pub fn filter_internal(request_uri: &str, what: &str) -> ApiError {
        let message = format!("Internal Server Error: {request_uri:?}: {what}")
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let mut error = ApiError::new(500, "InternalError", message);
        error.plain_text = true;
        error
    }

    /// The `Status` object for this failure.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// The `reason` kube-apiserver gives a status code (`StatusReason` in apimachinery).
pub fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|cause| json!({"reason": cause.reason, "message": cause.message, "field": cause.field}))
            .collect(),
    )
}

/// The `Status` that kube-apiserver returns for a delete that removed the object at once.
pub fn deleted_status(resource: &ResourceId, name: &str, uid: &str) -> Value {
    let mut details = details(resource, name);
    details["uid"] = Value::from(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmaps() -> ResourceId {
        ResourceId::new("", "configmaps")
    }

    #[test]
    fn not_found_names_the_resource_like_kube_apiserver() {
        let status = ApiError::not_found(&configmaps(), "x").to_status();
        assert_eq!(status["message"], "configmaps \"x\" not found");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"]["kind"], "configmaps");
    }

    #[test]
    fn grouped_resources_are_qualified_by_group() {
        let error = ApiError::already_exists(&ResourceId::new("apps", "deployments"), "web");
        assert_eq!(error.message, "deployments.apps \"web\" already exists");
    }

    #[test]
    fn invalid_lists_several_causes_in_brackets() {
        let error = ApiError::invalid(
            "",
            "ConfigMap",
            "x",
            vec![Cause::required("a", ""), Cause::required("b", "")],
        );
        assert_eq!(
            error.message,
            "ConfigMap \"x\" is invalid: [a: Required value, b: Required value]"
        );
        assert_eq!(error.to_status()["details"]["causes"][1]["field"], "b");
    }
}
