//! Access reviews, answered by the same [`crate::authz::Authorizer`] that guards every
//! request, never stored: SelfSubjectAccessReview ("may I?", what `kubectl auth can-i` asks),
//! SubjectAccessReview ("may this user and these groups?") and LocalSubjectAccessReview (the
//! same within the namespace of its URL), and SelfSubjectRulesReview ("what may I do in this
//! namespace?", what `kubectl auth can-i --list` asks).

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};

use super::decode_object;
use crate::api::{RequestContext, Shared, json_response};
use crate::auth::Identity;
use crate::authz::{Attributes, RuleList};
use crate::registry::ResourceKind;
use crate::status::{ApiError, Cause};

const GROUP: &str = "authorization.k8s.io";

/// Whether creating `kind` asks for an access review.
pub fn is_review(kind: &ResourceKind) -> bool {
    kind.id.group == GROUP
        && matches!(
            kind.kind.as_str(),
            "SelfSubjectAccessReview"
                | "SubjectAccessReview"
                | "LocalSubjectAccessReview"
                | "SelfSubjectRulesReview"
        )
}

fn text(review: &Value, path: &str) -> String {
    crate::meta::lookup_path(review, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn invalid(kind: &ResourceKind, field: &str, why: &str) -> ApiError {
    ApiError::invalid(GROUP, &kind.kind, "", vec![Cause::required(field, why)])
}

/// The question of a review's `spec`.
fn attributes_of(review: &Value, kind: &ResourceKind) -> Result<Attributes, ApiError> {
    let spec = review.get("spec");
    let resource = spec.and_then(|spec| spec.get("resourceAttributes"));
    let non_resource = spec.and_then(|spec| spec.get("nonResourceAttributes"));
    let attributes = match (resource, non_resource) {
        (Some(_), None) => Attributes {
            verb: text(review, "spec.resourceAttributes.verb"),
            group: text(review, "spec.resourceAttributes.group"),
            resource: text(review, "spec.resourceAttributes.resource"),
            subresource: text(review, "spec.resourceAttributes.subresource"),
            namespace: text(review, "spec.resourceAttributes.namespace"),
            name: text(review, "spec.resourceAttributes.name"),
            path: None,
        },
        (None, Some(_)) => Attributes {
            verb: text(review, "spec.nonResourceAttributes.verb"),
            path: Some(text(review, "spec.nonResourceAttributes.path")),
            ..Attributes::default()
        },
        _ => {
            return Err(invalid(
                kind,
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    if attributes.verb.is_empty() {
        return Err(invalid(
            kind,
            "spec.resourceAttributes.verb",
            "a verb is required",
        ));
    }
    Ok(attributes)
}

/// Whom a SubjectAccessReview asks about: exactly the user and groups of its spec (no
/// implied `system:authenticated`, as in kube-apiserver).
fn subject_of(review: &Value, kind: &ResourceKind) -> Result<Identity, ApiError> {
    let identity = Identity {
        username: text(review, "spec.user"),
        uid: text(review, "spec.uid"),
        groups: crate::meta::string_list(crate::meta::lookup_path(review, "spec.groups")),
        extra: crate::meta::lookup_path(review, "spec.extra")
            .and_then(Value::as_object)
            .map(|extra| {
                extra
                    .iter()
                    .map(|(key, values)| (key.clone(), crate::meta::string_list(Some(values))))
                    .collect()
            })
            .unwrap_or_default(),
    };
    if identity.username.is_empty() && identity.groups.is_empty() {
        return Err(invalid(
            kind,
            "spec.user",
            "at least one of user or group must be specified",
        ));
    }
    Ok(identity)
}

pub fn access_review(
    shared: &Shared,
    context: &RequestContext,
    kind: &ResourceKind,
) -> Result<Response<Body>, ApiError> {
    let mut review = decode_object(context)?;
    if kind.kind == "SelfSubjectRulesReview" {
        let namespace = text(&review, "spec.namespace");
        let list = shared.authorizer.rules_for(&context.identity, &namespace);
        finish(&mut review, kind, context, rules_status(&list));
        return Ok(json_response(201, &review));
    }
    let mut attributes = attributes_of(&review, kind)?;
    let identity = match kind.kind.as_str() {
        "SelfSubjectAccessReview" => context.identity.clone(),
        "LocalSubjectAccessReview" => {
            let namespace = context.target.namespace.clone().unwrap_or_default();
            if attributes.path.is_some()
                || (!attributes.namespace.is_empty() && attributes.namespace != namespace)
            {
                return Err(invalid(
                    kind,
                    "spec.resourceAttributes.namespace",
                    "must match metadata.namespace",
                ));
            }
            attributes.namespace = namespace;
            subject_of(&review, kind)?
        }
        _ => subject_of(&review, kind)?,
    };
    let decision = shared.authorizer.authorize(&identity, &attributes);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    if !decision.allowed && shared.authorizer.denies_explicitly(&identity, &attributes) {
        status["denied"] = json!(true);
    }
    finish(&mut review, kind, context, status);
    Ok(json_response(201, &review))
}

/// The answered review: type and metadata as kube-apiserver returns them, and `status`.
fn finish(review: &mut Value, kind: &ResourceKind, context: &RequestContext, status: Value) {
    review["apiVersion"] = json!(format!("{GROUP}/v1"));
    review["kind"] = json!(kind.kind);
    let mut metadata = json!({"creationTimestamp": null});
    if let Some(namespace) = &context.target.namespace {
        metadata["namespace"] = json!(namespace);
    }
    review["metadata"] = metadata;
    review["status"] = status;
}

/// A SelfSubjectRulesReview's status: resource and non-resource rules apart.
fn rules_status(list: &RuleList) -> Value {
    let pick = |rule: &Value, fields: &[&str]| {
        let mut picked = serde_json::Map::new();
        for field in fields {
            if let Some(value) = rule.get(*field).filter(|value| !value.is_null()) {
                picked.insert((*field).to_owned(), value.clone());
            }
        }
        Value::Object(picked)
    };
    let has = |rule: &Value, field: &str| {
        rule.get(field)
            .and_then(Value::as_array)
            .is_some_and(|items| !items.is_empty())
    };
    let resource_rules: Vec<Value> = list
        .rules
        .iter()
        .filter(|rule| has(rule, "resources"))
        .map(|rule| pick(rule, &["verbs", "apiGroups", "resources", "resourceNames"]))
        .collect();
    let non_resource_rules: Vec<Value> = list
        .rules
        .iter()
        .filter(|rule| has(rule, "nonResourceURLs"))
        .map(|rule| pick(rule, &["verbs", "nonResourceURLs"]))
        .collect();
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": list.incomplete,
    });
    if !list.evaluation_error.is_empty() {
        status["evaluationError"] = json!(list.evaluation_error);
    }
    status
}
