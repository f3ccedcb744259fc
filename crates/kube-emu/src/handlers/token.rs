//! Service-account tokens: TokenRequest (`POST serviceaccounts/<name>/token`, what `kubectl
//! create token` sends) issues a bearer token for the service account, bound to the requested
//! audiences; TokenReview (`authentication.k8s.io/v1`) says who a token belongs to, as a
//! webhook or proxy asks kube-apiserver. The tokens are the emulator's own opaque bearer tokens
//! (not signed JWTs): they authenticate against this server and nothing else. Neither object is
//! stored.

use axum::body::Body;
use chrono::{Duration, Utc};
use http::Response;
use serde_json::{Value, json};

use super::{decode_object, object_key};
use crate::api::{RequestContext, Shared, json_response};
use crate::auth::Identity;
use crate::registry::ResourceId;
use crate::status::{ApiError, Cause};

/// kube-apiserver's default `--api-audiences`: the in-cluster address of the API server.
const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// A TokenRequest without `expirationSeconds` lives an hour; kube-apiserver refuses less than
/// ten minutes.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MINIMUM_EXPIRATION_SECONDS: i64 = 600;

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn timestamp(time: chrono::DateTime<Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn token_request(
    shared: &Shared,
    context: &RequestContext,
) -> Result<Response<Body>, ApiError> {
    let key = object_key(context);
    let request = decode_object(context)?;
    let service_accounts = ResourceId::new("", "serviceaccounts");
    if shared.state().store.get(&service_accounts, &key).is_none() {
        return Err(ApiError::not_found(&service_accounts, &key.name));
    }
    let expiration = match request
        .pointer("/spec/expirationSeconds")
        .map(|value| value.as_i64().ok_or(value))
    {
        None => DEFAULT_EXPIRATION_SECONDS,
        Some(Ok(seconds)) if seconds >= MINIMUM_EXPIRATION_SECONDS => seconds,
        Some(Ok(seconds)) => {
            return Err(ApiError::invalid(
                "authentication.k8s.io",
                "TokenRequest",
                &key.name,
                vec![Cause::invalid(
                    "spec.expirationSeconds",
                    &Value::from(seconds),
                    "may not specify a duration less than 10 minutes",
                )],
            ));
        }
        Some(Err(value)) => {
            return Err(ApiError::bad_request(format!(
                "spec.expirationSeconds must be an integer, not {value}"
            )));
        }
    };
    let mut audiences = strings(request.pointer("/spec/audiences"));
    if audiences.is_empty() {
        audiences.push(API_AUDIENCE.to_owned());
    }
    let token = shared.authenticator.issue_for_audiences(
        Identity::service_account(&key.namespace, &key.name),
        audiences.clone(),
    );
    let now = Utc::now();
    Ok(json_response(
        201,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": key.name, "namespace": key.namespace,
                         "creationTimestamp": timestamp(now)},
            "spec": {"audiences": audiences, "expirationSeconds": expiration,
                     "boundObjectRef": request.pointer("/spec/boundObjectRef").cloned()},
            "status": {"token": token,
                       "expirationTimestamp": timestamp(now + Duration::seconds(expiration))},
        }),
    ))
}

/// A SelfSubjectReview (`kubectl auth whoami`): who the request is, after impersonation.
pub fn self_subject_review(context: &RequestContext) -> Result<Response<Body>, ApiError> {
    // The body carries nothing the answer uses; it is still read, so garbage is refused.
    decode_object(context)?;
    Ok(json_response(
        201,
        &json!({
            "kind": "SelfSubjectReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": crate::meta::now_timestamp()},
            "status": {"userInfo": context.identity.user_info()},
        }),
    ))
}

pub fn token_review(shared: &Shared, context: &RequestContext) -> Result<Response<Body>, ApiError> {
    let review = decode_object(context)?;
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenReview",
            "",
            vec![Cause::required("spec.token", "token must not be empty")],
        ));
    }
    let wanted = strings(review.pointer("/spec/audiences"));
    let status = match shared.authenticator.review(token) {
        None => json!({"authenticated": false, "user": {}, "error": "invalid bearer token"}),
        Some((identity, issued_for)) => {
            // A token valid for the server's own audience when the review names none; else
            // the audiences both name, which must not be empty.
            let issued_for = issued_for.unwrap_or_else(|| vec![API_AUDIENCE.to_owned()]);
            let granted: Vec<String> = if wanted.is_empty() {
                issued_for.clone()
            } else {
                wanted
                    .iter()
                    .filter(|audience| issued_for.contains(audience))
                    .cloned()
                    .collect()
            };
            if granted.is_empty() {
                json!({"authenticated": false, "user": {},
                       "error": "token audiences are invalid for the target audiences"})
            } else {
                json!({"authenticated": true, "audiences": granted, "user": identity.user_info()})
            }
        }
    };
    Ok(json_response(
        201,
        &json!({
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": review.get("spec").cloned().unwrap_or_else(|| json!({})),
            "status": status,
        }),
    ))
}
