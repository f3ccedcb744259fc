//! AdmissionReview v1: the request the server sends a webhook, and what its answer means.

use base64::Engine;
use serde_json::{Value, json};

use crate::auth::Identity;

/// Everything an AdmissionReview request says about the request under admission.
#[derive(Debug, Clone)]
pub struct ReviewRequest<'a> {
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub identity: &'a Identity,
    pub dry_run: bool,
    /// CreateOptions, UpdateOptions, PatchOptions or DeleteOptions.
    pub options: &'a Value,
}

/// The AdmissionReview body for one webhook call.
pub fn review(
    uid: &str,
    request: &ReviewRequest<'_>,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    let kind = json!({"group": request.group, "version": request.version, "kind": request.kind});
    let resource =
        json!({"group": request.group, "version": request.version, "resource": request.resource});
    let mut body = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": request.name,
        "namespace": request.namespace,
        "operation": request.operation,
        "userInfo": request.identity.user_info(),
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old_object.cloned().unwrap_or(Value::Null),
        "dryRun": request.dry_run,
        "options": request.options,
    });
    if !request.subresource.is_empty() {
        body["subResource"] = Value::from(request.subresource);
        body["requestSubResource"] = Value::from(request.subresource);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body})
}

/// A webhook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookAnswer {
    Allowed {
        /// JSON patch operations to apply (mutating webhooks only).
        patch: Option<Value>,
        warnings: Vec<String>,
    },
    Denied {
        code: u16,
        message: String,
        warnings: Vec<String>,
    },
}

/// Reads a webhook's response body. An unusable answer is an error, which the failure policy
/// then decides about, as in kube-apiserver.
pub fn verdict(body: &[u8], uid: &str, webhook: &str) -> Result<WebhookAnswer, String> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|error| format!("the response is not an AdmissionReview: {error}"))?;
    let response = review
        .get("response")
        .filter(|response| response.is_object())
        .ok_or("the AdmissionReview has no response")?;
    let answered_uid = response
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if answered_uid != uid {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{answered_uid}\""
        ));
    }
    let warnings = crate::meta::string_list(response.get("warnings"));
    if response.get("allowed").and_then(Value::as_bool) != Some(true) {
        return Ok(denial(response.get("status"), webhook, warnings));
    }
    let patch = match response.get("patch").and_then(Value::as_str) {
        None => None,
        Some(encoded) => {
            let patch_type = response
                .get("patchType")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if patch_type != "JSONPatch" {
                return Err(format!(
                    "unsupported patchType {patch_type:?}; only JSONPatch is"
                ));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|error| format!("response.patch is not base64: {error}"))?;
            Some(
                serde_json::from_slice(&bytes)
                    .map_err(|error| format!("response.patch is not JSON: {error}"))?,
            )
        }
    };
    Ok(WebhookAnswer::Allowed { patch, warnings })
}

/// The denial as kube-apiserver words it: `admission webhook "<name>" denied the request: ...`,
/// with the webhook's status code (403 when it gives none, never below 400).
fn denial(status: Option<&Value>, webhook: &str, warnings: Vec<String>) -> WebhookAnswer {
    let text = |field: &str| {
        status
            .and_then(|status| status.get(field))
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let denied_by = format!("admission webhook \"{webhook}\" denied the request");
    let message = match text("message").or_else(|| text("reason")) {
        Some(why) => format!("{denied_by}: {why}"),
        None => format!("{denied_by} without explanation"),
    };
    let code = status
        .and_then(|status| status.get("code"))
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| *code != 0)
        .map_or(403, |code| code.max(400));
    WebhookAnswer::Denied {
        code,
        message,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_carries_the_webhook_name_message_and_code() {
        let body = json!({"response": {"uid": "u", "allowed": false, "status": {"message": "no", "code": 422}}});
        let verdict = verdict(body.to_string().as_bytes(), "u", "check.example.com").expect("read");
        assert_eq!(
            verdict,
            WebhookAnswer::Denied {
                code: 422,
                message: "admission webhook \"check.example.com\" denied the request: no".into(),
                warnings: vec![]
            }
        );
        let bare = json!({"response": {"uid": "u", "allowed": false}});
        let WebhookAnswer::Denied { code, message, .. } = verdict_of(&bare) else {
            panic!("denied")
        };
        assert_eq!(code, 403);
        assert!(message.ends_with("without explanation"), "{message}");
    }

    fn verdict_of(body: &Value) -> WebhookAnswer {
        verdict(body.to_string().as_bytes(), "u", "w").expect("read")
    }

    #[test]
    fn a_patch_is_decoded_and_a_wrong_uid_is_an_error() {
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#);
        let body = json!({"response": {"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": ["careful"]}});
        let WebhookAnswer::Allowed { patch, warnings } = verdict_of(&body) else {
            panic!("allowed")
        };
        assert_eq!(patch.expect("patch")[0]["op"], "add");
        assert_eq!(warnings, vec!["careful"]);
        let other = json!({"response": {"uid": "x", "allowed": true}});
        assert!(verdict(other.to_string().as_bytes(), "u", "w").is_err());
    }
}
