//! What a decision is asked about, whichever door the question came through.
//!
//! The API server sends an `AdmissionReview` (v1) over HTTPS; tooling sends a `ReviewRequest`
//! over gRPC. Both become one [`ReviewInput`], so the same decision code answers both.
//!
//! Decoding an `AdmissionReview` happens in two steps. The envelope (uid, kind, operation,
//! user) must be well-formed, or the request is answered 400: there is no uid to answer to. The
//! objects are kept as raw JSON and read field by field by the rules, so an object of an
//! unexpected shape (labels that are not a map, a missing name) becomes a denial that names the
//! field instead of a 400 that names nothing the user wrote.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::{DynamicObject, GroupVersionKind, TypeMeta};
use serde_json::Value;

/// The only AdmissionReview version served.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// One question: an operation by a user on an object.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewInput {
    pub operation: Operation,
    /// The kind of the object (for an AdmissionReview, `request.kind`).
    pub kind: GroupVersionKind,
    pub name: String,
    pub namespace: Option<String>,
    /// Like `status`; `None` for the main resource.
    pub sub_resource: Option<String>,
    pub user: UserInfo,
    /// The object after the change; `None` for DELETE.
    pub object: Option<Value>,
    /// The object before the change; `None` for CREATE.
    pub old_object: Option<Value>,
}

impl ReviewInput {
    /// The request's username, empty when the API server sent none.
    pub fn username(&self) -> &str {
        self.user.username.as_deref().unwrap_or_default()
    }

    /// `namespace/name` or `name`, for messages.
    pub fn object_name(&self) -> String {
        match &self.namespace {
            Some(namespace) if !namespace.is_empty() => format!("{namespace}/{}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// Why a body is not an AdmissionReview this webhook can answer (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the body is not a JSON object")]
    NotAnObject,
    #[error("apiVersion is {found:?}; only {ADMISSION_API_VERSION} AdmissionReviews are served")]
    WrongVersion { found: String },
    #[error("kind is {found:?}, not AdmissionReview")]
    WrongKind { found: String },
    #[error("the AdmissionReview has no request")]
    NoRequest,
    #[error("request.{field} is not a JSON object or null")]
    ObjectNotAMap { field: &'static str },
    #[error("the AdmissionReview's request is malformed: {0}")]
    MalformedRequest(serde_json::Error),
}

/// A decoded AdmissionReview: the allowing answer to it (which carries its uid and types) and
/// the input.
#[derive(Debug)]
pub struct DecodedReview {
    allowing: AdmissionResponse,
    pub input: ReviewInput,
}

impl DecodedReview {
    /// An allowing response to this request, for the caller to deny or decorate.
    pub fn response(&self) -> AdmissionResponse {
        self.allowing.clone()
    }

    pub fn uid(&self) -> &str {
        &self.allowing.uid
    }
}

/// Decodes an `admission.k8s.io/v1` AdmissionReview body.
///
/// The body is parsed once; the request's envelope is then read straight out of the parsed
/// request (its strings moved, not copied), and the objects are moved into the input. (Reading
/// it through kube's `AdmissionReview`, whose type fields are flattened, buffered and copied
/// the whole envelope a second time on every admission.)
pub fn decode_admission_review(body: &[u8]) -> Result<DecodedReview, DecodeError> {
    let mut review: Value = serde_json::from_slice(body).map_err(DecodeError::NotJson)?;
    let envelope = review.as_object_mut().ok_or(DecodeError::NotAnObject)?;
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_owned();
    if envelope.get("apiVersion").and_then(Value::as_str) != Some(ADMISSION_API_VERSION) {
        return Err(DecodeError::WrongVersion {
            found: text(envelope.get("apiVersion")),
        });
    }
    if envelope.get("kind").and_then(Value::as_str) != Some(kube::core::admission::META_KIND) {
        return Err(DecodeError::WrongKind {
            found: text(envelope.get("kind")),
        });
    }
    let Some(Value::Object(mut request)) = envelope.remove("request") else {
        return Err(DecodeError::NoRequest);
    };
    let object = take_object(&mut request, "object")?;
    let old_object = take_object(&mut request, "oldObject")?;
    let mut request: AdmissionRequest<DynamicObject> =
        serde_json::from_value(Value::Object(request)).map_err(DecodeError::MalformedRequest)?;
    request.types = TypeMeta {
        api_version: ADMISSION_API_VERSION.to_owned(),
        kind: kube::core::admission::META_KIND.to_owned(),
    };
    let allowing = AdmissionResponse::from(&request);
    let input = ReviewInput {
        operation: request.operation,
        kind: request.kind,
        name: request.name,
        namespace: request.namespace.filter(|ns| !ns.is_empty()),
        sub_resource: request.sub_resource.filter(|s| !s.is_empty()),
        user: request.user_info,
        object,
        old_object,
    };
    Ok(DecodedReview { allowing, input })
}

/// Removes `field` from the request (so the envelope decodes without reading it) and returns
/// it when it is an object.
fn take_object(
    request: &mut serde_json::Map<String, Value>,
    field: &'static str,
) -> Result<Option<Value>, DecodeError> {
    match request.insert(field.to_owned(), Value::Null) {
        None | Some(Value::Null) => Ok(None),
        Some(object @ Value::Object(_)) => Ok(Some(object)),
        Some(_) => Err(DecodeError::ObjectNotAMap { field }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": ADMISSION_API_VERSION,
            "kind": "AdmissionReview",
            "request": request,
        }))
        .unwrap()
    }

    fn request() -> Value {
        json!({
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "settings",
            "namespace": "team-a",
            "operation": "UPDATE",
            "userInfo": {"username": "alice"},
            "object": {"metadata": {"name": "settings"}},
            "oldObject": {"metadata": {"name": "settings"}},
        })
    }

    #[test]
    fn a_v1_review_decodes_with_its_objects_raw() {
        let decoded = decode_admission_review(&review(request())).unwrap();
        assert_eq!(decoded.uid(), "u-1");
        assert_eq!(decoded.input.operation, Operation::Update);
        assert_eq!(decoded.input.username(), "alice");
        assert_eq!(decoded.input.object_name(), "team-a/settings");
        assert_eq!(
            decoded.input.object.as_ref().unwrap()["metadata"]["name"],
            "settings"
        );
        let response = decoded.response();
        assert_eq!(response.uid, "u-1");
        assert!(response.allowed);
        let answer = serde_json::to_value(response.into_review()).unwrap();
        assert_eq!(answer["apiVersion"], ADMISSION_API_VERSION);
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], "u-1");
    }

    #[test]
    fn objects_of_any_shape_inside_are_kept_for_the_rules() {
        let mut request = request();
        request["object"]["metadata"]["labels"] = json!(42);
        let decoded = decode_admission_review(&review(request)).unwrap();
        assert_eq!(decoded.input.object.unwrap()["metadata"]["labels"], 42);
    }

    #[test]
    fn envelope_errors_name_what_is_wrong() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"{not json".to_vec(), "not JSON"),
            (b"[1]".to_vec(), "not a JSON object"),
            (
                serde_json::to_vec(
                    &json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}),
                )
                .unwrap(),
                "only admission.k8s.io/v1",
            ),
            (
                serde_json::to_vec(&json!({"apiVersion": ADMISSION_API_VERSION, "kind": "Pod"}))
                    .unwrap(),
                "not AdmissionReview",
            ),
            (
                serde_json::to_vec(
                    &json!({"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview"}),
                )
                .unwrap(),
                "no request",
            ),
            (
                review({
                    let mut r = request();
                    r["object"] = json!("text");
                    r
                }),
                "request.object",
            ),
            (
                review({
                    let mut r = request();
                    r.as_object_mut().unwrap().remove("uid");
                    r
                }),
                "uid",
            ),
        ];
        for (body, expected) in cases {
            let error = decode_admission_review(&body).unwrap_err().to_string();
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
        }
    }
}
