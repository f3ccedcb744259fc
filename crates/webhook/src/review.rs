//! What a decision is asked about, whichever door the question came through.
//!
//! The API server sends an `AdmissionReview` (v1) over HTTPS; tooling sends a `ReviewRequest`
//! over gRPC. Both become one [`ReviewInput`], so the same decision code answers both.
//!
//! Decoding an `AdmissionReview` happens in two steps. The envelope (uid, kind, operation,
//! user) must be well-formed, or the request is answered 400: there is no uid to answer to. The
//! objects are kept as JSON and read field by field by the rules, so an object of an
//! unexpected shape (labels that are not a map, a missing name) becomes a denial that names the
//! field instead of a 400 that names nothing the user wrote.
//!
//! An object is built only as far as the rules for its kind read it ([`ObjectView`], chosen by
//! [`Policy::object_view`](crate::Policy::object_view)): a GitTrackObject's owners and a
//! Namespace's tree labels are in its metadata, so its spec (a whole manifest, for a
//! GitTrackObject) is skipped without being built; a kind whose spec a rule reads, or any kind
//! under drift prevention, is read whole. What is skipped is checked for JSON syntax only: a
//! number out of range or a lone surrogate in a skipped spec is not refused (the API server,
//! which has decoded the object before it asks, never sends one).
//!
//! The envelope and the request's fields are read as typed fields, so a key given twice there
//! is refused (`duplicate field`); inside an object, as in the JSON the API server stores, the
//! last value of a repeated key counts.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::{AdmissionResponse, Operation};
use kube::core::{GroupVersionKind, GroupVersionResource, Status, TypeMeta};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

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
    /// The object after the change; `None` for DELETE. From an AdmissionReview, as much of it
    /// as the rules for its kind read ([`ObjectView`]).
    pub object: Option<Value>,
    /// The object before the change; `None` for CREATE. Read like `object`.
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

/// How much of a request's objects is built for the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectView {
    /// `apiVersion`, `kind` and `metadata`; every other field is skipped unbuilt.
    Metadata,
    /// The whole object.
    Whole,
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
    #[error("the AdmissionReview is malformed: {0}")]
    MalformedReview(serde_json::Error),
    #[error("the AdmissionReview has no request")]
    NoRequest,
    #[error("request.{field} is not a JSON object or null")]
    ObjectNotAMap { field: &'static str },
    /// `field` is where in the review (`request.uid`, `request.object`); `reason` says what is
    /// wrong there, without serde's line and column, which count from the start of the part
    /// read, not of the body.
    #[error("the AdmissionReview's {field} is malformed: {reason}")]
    MalformedRequest { field: String, reason: String },
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

/// The AdmissionReview around the request; the request itself is kept unparsed until the
/// envelope is known to be one this webhook serves.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<&'a RawValue>,
    #[serde(borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request: Option<&'a RawValue>,
}

/// What the input and the answer need of `request`, with the same required fields as kube's
/// `AdmissionRequest`. The objects stay unparsed until their kind has chosen their view.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    uid: String,
    kind: GroupVersionKind,
    // Unused, but required of a well-formed request.
    #[allow(dead_code)]
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    user_info: UserInfo,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
}

/// Decodes an `admission.k8s.io/v1` AdmissionReview body, building each object as far as
/// `view` says the rules for its kind read it.
pub fn decode_admission_review(
    body: &[u8],
    view: impl FnOnce(&GroupVersionKind) -> ObjectView,
) -> Result<DecodedReview, DecodeError> {
    if !body.trim_ascii_start().starts_with(b"{") {
        return Err(match serde_json::from_slice::<IgnoredAny>(body) {
            Ok(_) => DecodeError::NotAnObject,
            Err(error) => DecodeError::NotJson(error),
        });
    }
    let envelope: Envelope<'_> = serde_json::from_slice(body).map_err(|error| {
        if error.is_data() {
            DecodeError::MalformedReview(error)
        } else {
            DecodeError::NotJson(error)
        }
    })?;
    let text = |value: Option<&RawValue>| -> String {
        value
            .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok())
            .map(Cow::into_owned)
            .unwrap_or_default()
    };
    if text(envelope.api_version) != ADMISSION_API_VERSION {
        return Err(DecodeError::WrongVersion {
            found: text(envelope.api_version),
        });
    }
    if text(envelope.kind) != kube::core::admission::META_KIND {
        return Err(DecodeError::WrongKind {
            found: text(envelope.kind),
        });
    }
    let Some(request) = envelope.request.filter(|raw| raw.get().starts_with('{')) else {
        return Err(DecodeError::NoRequest);
    };
    let request: Request<'_> = match serde_json::from_str(request.get()) {
        Ok(request) => request,
        // Read again to name the field: tracking the path costs every request a little.
        Err(_) => return Err(malformed_request(request.get())),
    };
    let view = view(&request.kind);
    let object = read_object(request.object, "object", view)?;
    let old_object = read_object(request.old_object, "oldObject", view)?;
    let allowing = allowing(request.uid);
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

/// The allowing answer to the request with this uid, as kube's `AdmissionResponse::from` makes
/// it from a whole `AdmissionRequest` (which this decoder does not build).
fn allowing(uid: String) -> AdmissionResponse {
    let mut response = AdmissionResponse::invalid("");
    response.types = TypeMeta {
        api_version: ADMISSION_API_VERSION.to_owned(),
        kind: kube::core::admission::META_KIND.to_owned(),
    };
    response.uid = uid;
    response.allowed = true;
    response.result = Status::default();
    response
}

/// `request.object` or `request.oldObject` through `view`; JSON `null` or absent is `None`.
fn read_object(
    raw: Option<&RawValue>,
    field: &'static str,
    view: ObjectView,
) -> Result<Option<Value>, DecodeError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    if !raw.get().starts_with('{') {
        return Err(DecodeError::ObjectNotAMap { field });
    }
    let object = match view {
        ObjectView::Whole => serde_json::from_str(raw.get()),
        ObjectView::Metadata => serde_json::from_str::<MetadataOnly>(raw.get()).map(|m| m.0),
    };
    object
        .map(Some)
        .map_err(|error| malformed(format!("request.{field}"), &error))
}

/// Why `request` (which did not decode) is malformed, naming the field.
fn malformed_request(request: &str) -> DecodeError {
    let read: Result<Request<'_>, _> =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(request));
    match read {
        Ok(_) => DecodeError::MalformedRequest {
            field: "request".to_owned(),
            reason: "it does not decode".to_owned(),
        },
        Err(error) => {
            let path = error.path().to_string();
            let field = if path == "." {
                "request".to_owned()
            } else {
                format!("request.{path}")
            };
            malformed(field, error.inner())
        }
    }
}

/// [`DecodeError::MalformedRequest`] at `field`, with serde's reason without its position.
fn malformed(field: String, error: &serde_json::Error) -> DecodeError {
    let reason = error.to_string();
    let reason = match reason.rsplit_once(" at line ") {
        Some((reason, _)) if error.line() > 0 => reason.to_owned(),
        _ => reason,
    };
    DecodeError::MalformedRequest { field, reason }
}

/// An object built for [`ObjectView::Metadata`]: its `apiVersion`, `kind` and `metadata`, as
/// parsing the whole object would have built them (a repeated key keeps its last value).
struct MetadataOnly(Value);

impl<'de> Deserialize<'de> for MetadataOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = MetadataOnly;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetadataOnly, A::Error> {
        let mut kept = serde_json::Map::new();
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Kept(name) => {
                    kept.insert(name.to_owned(), map.next_value::<Value>()?);
                }
                Field::Skipped => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(MetadataOnly(Value::Object(kept)))
    }
}

/// A key of an object read for its metadata.
enum Field {
    Kept(&'static str),
    Skipped,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a field name")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<Field, E> {
                Ok(match name {
                    "apiVersion" => Field::Kept("apiVersion"),
                    "kind" => Field::Kept("kind"),
                    "metadata" => Field::Kept("metadata"),
                    _ => Field::Skipped,
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
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
        let decoded = decode_admission_review(&review(request()), |_| ObjectView::Whole).unwrap();
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
        let decoded = decode_admission_review(&review(request), |_| ObjectView::Whole).unwrap();
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
            (
                br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}, "request": {}}"#.to_vec(),
                "duplicate field `request`",
            ),
            (
                serde_json::to_vec(
                    &json!({"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "request": [1]}),
                )
                .unwrap(),
                "no request",
            ),
        ];
        for (body, expected) in cases {
            let error = decode_admission_review(&body, |_| ObjectView::Whole)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
        }
    }

    fn gittrack_object_request() -> Value {
        json!({
            "uid": "u-2",
            "kind": {"group": "arbor.dev", "version": "v1alpha1", "kind": "GitTrackObject"},
            "resource": {"group": "arbor.dev", "version": "v1alpha1", "resource": "gittrackobjects"},
            "name": "configmap-settings",
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {"username": "gitsync"},
            "object": {
                "apiVersion": "arbor.dev/v1alpha1",
                "kind": "GitTrackObject",
                "spec": {"kind": "ConfigMap", "data": {"data": {"big": "x"}}},
                "metadata": {"name": "configmap-settings", "labels": {"a": "b"}},
                "status": {"phase": "Applied"},
            },
        })
    }

    #[test]
    fn the_metadata_view_builds_identity_and_metadata_only() {
        let mut views = Vec::new();
        let body = review(gittrack_object_request());
        let decoded = decode_admission_review(&body, |kind| {
            views.push(kind.kind.clone());
            ObjectView::Metadata
        })
        .unwrap();
        assert_eq!(
            views,
            ["GitTrackObject"],
            "the view is asked once, for request.kind"
        );
        assert_eq!(
            decoded.input.object,
            Some(json!({
                "apiVersion": "arbor.dev/v1alpha1",
                "kind": "GitTrackObject",
                "metadata": {"name": "configmap-settings", "labels": {"a": "b"}},
            }))
        );
        let whole = decode_admission_review(&body, |_| ObjectView::Whole).unwrap();
        assert_eq!(
            whole.input.object,
            Some(gittrack_object_request()["object"].clone())
        );
    }

    #[test]
    fn the_metadata_view_reads_keys_as_json_does() {
        // An escaped key is the same key; a repeated key keeps its last value, as a whole
        // parse keeps it; whitespace before an object is no object of another shape.
        let body = br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-3", "operation": "UPDATE", "userInfo": {},
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "object":    {"meta\u0064ata": {"name": "first"}, "spec": {}, "metadata": {"name": "last"}},
            "oldObject": null}}"#;
        for view in [ObjectView::Metadata, ObjectView::Whole] {
            let decoded = decode_admission_review(body, |_| view).unwrap();
            let object = decoded.input.object.unwrap();
            assert_eq!(object["metadata"]["name"], "last", "{view:?}");
            assert_eq!(object.get("spec").is_some(), view == ObjectView::Whole);
            assert_eq!(decoded.input.old_object, None);
        }
    }

    #[test]
    fn an_object_of_another_shape_is_refused_whatever_the_view() {
        for (object, field) in [
            ("object", "request.object"),
            ("oldObject", "request.oldObject"),
        ] {
            let mut request = request();
            request[object] = json!([{"metadata": {}}]);
            for view in [ObjectView::Metadata, ObjectView::Whole] {
                let error = decode_admission_review(&review(request.clone()), |_| view)
                    .unwrap_err()
                    .to_string();
                assert!(error.contains(field), "{error:?} lacks {field:?}");
            }
        }
    }

    #[test]
    fn a_malformed_request_names_the_field_without_a_position() {
        let mut wrong_uid = request();
        wrong_uid["uid"] = json!(1);
        let error = decode_admission_review(&review(wrong_uid), |_| ObjectView::Whole)
            .unwrap_err()
            .to_string();
        assert!(error.contains("request.uid is malformed"), "{error}");
        assert!(!error.contains("line"), "{error}");

        let mut wrong_kind = request();
        wrong_kind["kind"]["kind"] = json!(["ConfigMap"]);
        let error = decode_admission_review(&review(wrong_kind), |_| ObjectView::Whole)
            .unwrap_err()
            .to_string();
        assert!(error.contains("request.kind.kind is malformed"), "{error}");

        let body = String::from_utf8(review(request()))
            .unwrap()
            .replace(r#""oldObject":{"#, r#""oldObject":{"spec":{"n":1e400},"#);
        let error = decode_admission_review(body.as_bytes(), |_| ObjectView::Whole)
            .unwrap_err()
            .to_string();
        assert!(error.contains("request.oldObject is malformed"), "{error}");
        assert!(!error.contains("line"), "{error}");
        // Under the metadata view the skipped spec is checked for syntax only.
        assert!(decode_admission_review(body.as_bytes(), |_| ObjectView::Metadata).is_ok());
    }

    #[test]
    fn the_allowing_answer_is_the_one_kube_makes_from_the_request() {
        let body = review(request());
        let decoded = decode_admission_review(&body, |_| ObjectView::Whole).unwrap();
        let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
            serde_json::from_slice(&body).unwrap();
        let request: kube::core::admission::AdmissionRequest<kube::core::DynamicObject> =
            review.try_into().unwrap();
        assert_eq!(
            serde_json::to_value(decoded.response().into_review()).unwrap(),
            serde_json::to_value(AdmissionResponse::from(&request).into_review()).unwrap()
        );
    }
}
