//! SelfSubjectAccessReview: "may I?", answered by the same [`crate::authz::Authorizer`] that
//! guards every request. Reviews are answered, never stored.

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};

use super::decode_object;
use crate::api::{RequestContext, Shared, json_response};
use crate::authz::Attributes;
use crate::status::ApiError;

pub fn self_subject_access_review(
    shared: &Shared,
    context: &RequestContext,
) -> Result<Response<Body>, ApiError> {
    let mut review = decode_object(context)?;
    let text = |path: &str| {
        crate::meta::lookup_path(&review, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let attributes = if review
        .get("spec")
        .and_then(|spec| spec.get("nonResourceAttributes"))
        .is_some()
    {
        Attributes {
            verb: text("spec.nonResourceAttributes.verb"),
            name: text("spec.nonResourceAttributes.path"),
            ..Attributes::default()
        }
    } else {
        Attributes {
            verb: text("spec.resourceAttributes.verb"),
            group: text("spec.resourceAttributes.group"),
            resource: text("spec.resourceAttributes.resource"),
            subresource: text("spec.resourceAttributes.subresource"),
            namespace: text("spec.resourceAttributes.namespace"),
            name: text("spec.resourceAttributes.name"),
        }
    };
    if attributes.verb.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "",
            vec![crate::status::Cause::required(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        ));
    }
    let decision = shared.authorizer.authorize(&context.identity, &attributes);
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    review["metadata"] = json!({"creationTimestamp": null});
    review["status"] = if decision.allowed {
        json!({"allowed": true, "reason": decision.reason})
    } else {
        json!({"allowed": false, "denied": true, "reason": decision.reason})
    };
    Ok(json_response(201, &review))
}
