//! The verb handlers for resource paths, and what they share: resolving the kind, the verb,
//! the writer of a change, decoding bodies.

mod delete;
mod patch;
mod read;
mod review;
mod scale;
mod token;
mod watch;
mod write;

use std::sync::Arc;

use axum::body::Body;
use http::{HeaderValue, Method, Response, header};
use serde_json::Value;

use crate::accounting::RequestRecord;
use crate::api::{RequestContext, Shared, error_response};
use crate::authz::Attributes;
use crate::faults::FaultTarget;
use crate::managed::Writer;
use crate::meta;
use crate::present::Presentation;
use crate::registry::{ResourceId, ResourceKind};
use crate::status::ApiError;
use crate::store::ObjectKey;

/// Kubernetes verbs, as authorization and discovery name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    fn of(context: &RequestContext) -> Result<Verb, ApiError> {
        let named = context.target.name.is_some();
        Ok(match (&context.method, named) {
            (&Method::GET, _) if context.query.flag("watch") => Verb::Watch,
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, false) => Verb::Create,
            // A create subresource: `serviceaccounts/<name>/token`.
            (&Method::POST, true) if context.target.subresource.is_some() => Verb::Create,
            (&Method::PUT, true) => Verb::Update,
            (&Method::PATCH, true) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => return Err(ApiError::method_not_allowed()),
        })
    }
}

/// Checks that the path fits the kind: scope, subresource, verb.
fn resolve(
    shared: &Shared,
    context: &RequestContext,
) -> Result<(Arc<ResourceKind>, Verb), ApiError> {
    let target = &context.target;
    let kind = shared
        .state()
        .registry
        .lookup(&target.group, &target.version, &target.plural)
        .cloned()
        .ok_or_else(ApiError::no_such_route)?;
    let verb = Verb::of(context)?;
    match (kind.namespaced, target.namespace.is_some()) {
        (false, true) => return Err(ApiError::no_such_route()),
        // A namespaced kind is listed and watched across namespaces at the cluster path, and
        // nothing else.
        (true, false) if !matches!(verb, Verb::List | Verb::Watch) => {
            return Err(if target.name.is_some() {
                ApiError::no_such_route()
            } else {
                ApiError::method_not_allowed()
            });
        }
        _ => {}
    }
    match target.subresource.as_deref() {
        None => {}
        Some("status")
            if kind
                .version(&target.version)
                .is_some_and(|version| version.status_subresource) => {}
        Some("scale")
            if kind
                .version(&target.version)
                .is_some_and(|version| version.scale.is_some()) => {}
        Some("finalize") if kind.kind == "Namespace" && kind.id.group.is_empty() => {}
        Some(subresource) if kind.field_subresource(subresource).is_some() => {}
        Some("token")
            if kind.kind == "ServiceAccount"
                && kind.id.group.is_empty()
                && verb == Verb::Create => {}
        Some("token") if kind.kind == "ServiceAccount" && kind.id.group.is_empty() => {
            return Err(ApiError::method_not_allowed());
        }
        Some(_) => return Err(ApiError::no_such_route()),
    }
    if target.subresource.is_some()
        && target.subresource.as_deref() != Some("token")
        && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch)
    {
        return Err(ApiError::method_not_allowed());
    }
    if !kind.allows(verb.as_str()) {
        return Err(ApiError::method_not_allowed());
    }
    Ok((kind, verb))
}

/// What a request asks to do, as authorization and accounting name it, with kube-apiserver's
/// request-info rules: a Namespace object is "in" itself, and a list or watch whose field
/// selector pins `metadata.name` names that object (so `resourceNames` rules can allow it).
fn request_attributes(context: &RequestContext, verb: Verb) -> Attributes {
    let target = &context.target;
    let mut name = target.name.clone().unwrap_or_default();
    if name.is_empty() && matches!(verb, Verb::List | Verb::Watch) {
        name = context
            .query
            .get("fieldSelector")
            .and_then(selected_name)
            .unwrap_or_default();
    }
    let namespace = match &target.namespace {
        Some(namespace) => namespace.clone(),
        None if target.group.is_empty() && target.plural == "namespaces" => {
            target.name.clone().unwrap_or_default()
        }
        None => String::new(),
    };
    Attributes {
        verb: verb.as_str().to_owned(),
        group: target.group.clone(),
        resource: target.plural.clone(),
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace,
        name,
        path: None,
    }
}

/// The name a field selector requires exactly (`metadata.name=x` or `==x` among its terms).
fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let rest = term.trim().strip_prefix("metadata.name")?;
        let value = rest.strip_prefix("==").or_else(|| rest.strip_prefix('='))?;
        (!value.is_empty() && !value.contains('/')).then(|| value.to_owned())
    })
}

/// Serves a resource request: resolve the kind and verb, authorize, apply injected faults, then
/// run the verb (writes call admission webhooks before storing); the answer is accounted and
/// carries the webhooks' warnings.
pub async fn handle(
    shared: &Arc<Shared>,
    context: RequestContext,
) -> Result<Response<Body>, ApiError> {
    let (kind, verb) = resolve(shared, &context)?;
    let attributes = request_attributes(&context, verb);
    let mut response = match run(shared, &context, &kind, verb, &attributes).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    for warning in context.take_warnings() {
        if let Ok(value) = HeaderValue::from_str(&warning_header(&warning)) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    let mut attributes = attributes;
    if verb == Verb::Create && attributes.name.is_empty() && attributes.subresource.is_empty() {
        attributes.name = sent_name(&context.body).unwrap_or_default();
    }
    shared.requests.record(RequestRecord::new(
        attributes,
        &context.identity.username,
        response.status().as_u16(),
    ));
    Ok(response)
}

/// The name of the object a create sent (`metadata.name`), for the request's record: as in
/// kube-apiserver's audit log, a create names what it made, while authorization saw no name.
fn sent_name(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Sent {
        metadata: Option<SentMetadata>,
    }
    #[derive(serde::Deserialize)]
    struct SentMetadata {
        name: Option<String>,
    }
    let sent: Sent = serde_json::from_slice(body).ok()?;
    sent.metadata?.name
}

/// `299 - "text"`, with the text's quotes and backslashes escaped as in kube-apiserver.
fn warning_header(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("299 - \"{escaped}\"")
}

async fn run(
    shared: &Arc<Shared>,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
    verb: Verb,
    attributes: &Attributes,
) -> Result<Response<Body>, ApiError> {
    crate::authz::check(shared.authorizer.as_ref(), &context.identity, attributes)?;
    if let Some(refusal) = injected_fault(shared, context, verb).await {
        return Ok(refusal);
    }
    if context.target.subresource.as_deref() == Some("token") {
        return token::token_request(shared, context);
    }
    if context.target.subresource.as_deref() == Some("scale") {
        return match verb {
            Verb::Get => scale::get(shared, context, kind),
            Verb::Update => scale::update(shared, context, kind),
            Verb::Patch => scale::patch(shared, context, kind),
            _ => Err(ApiError::method_not_allowed()),
        };
    }
    match verb {
        Verb::Get => read::get(shared, context, kind),
        Verb::List => read::list(shared, context, kind),
        Verb::Watch => watch::watch(shared, context, kind),
        Verb::Create if review::is_review(kind) => review::access_review(shared, context, kind),
        Verb::Create if kind.kind == "TokenReview" => token::token_review(shared, context),
        Verb::Create if kind.kind == "SelfSubjectReview" => token::self_subject_review(context),
        Verb::Create => write::create(shared, context, kind).await,
        Verb::Update => write::update(shared, context, kind).await,
        Verb::Patch => patch::patch(shared, context, kind).await,
        Verb::Delete => delete::delete(shared, context, kind).await,
        Verb::DeleteCollection => delete::delete_collection(shared, context, kind).await,
    }
}

/// Waits out injected latency; the injected error response, if a status fault fires.
async fn injected_fault(
    shared: &Shared,
    context: &RequestContext,
    verb: Verb,
) -> Option<Response<Body>> {
    let target = &context.target;
    let outcome = shared.faults.decide(&FaultTarget {
        verb: verb.as_str(),
        group: &target.group,
        resource: &target.plural,
        namespace: target.namespace.as_deref().unwrap_or_default(),
        identity: &context.identity.username,
        subresource: target.subresource.as_deref().unwrap_or_default(),
    });
    if !outcome.delay.is_zero() {
        tokio::time::sleep(outcome.delay).await;
    }
    let code = outcome.status?;
    let resource = ResourceId::new(&target.group, &target.plural);
    let name = target.name.as_deref().unwrap_or_default();
    let error = match code {
        409 => ApiError::conflict(&resource, name, "injected by arbor-kube-emu"),
        429 => ApiError::with_code(429, "Too many requests, please try again later."),
        500 => ApiError::internal("injected by arbor-kube-emu"),
        503 => ApiError::with_code(
            503,
            "the server is currently unable to handle the request (injected by arbor-kube-emu)",
        ),
        other => ApiError::with_code(other, format!("status {other} injected by arbor-kube-emu")),
    };
    let mut response = error_response(&error);
    if matches!(code, 429 | 503) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    Some(response)
}

/// The field manager of a write: `?fieldManager=`, else the User-Agent's program name, as
/// kube-apiserver defaults it.
fn writer(context: &RequestContext, kind: &ResourceKind) -> Writer {
    let field_manager = context
        .query
        .get("fieldManager")
        .map(str::to_owned)
        .unwrap_or_else(|| {
            let agent = context.header(header::USER_AGENT);
            agent
                .split('/')
                .next()
                .unwrap_or_default()
                .chars()
                .take(128)
                .collect()
        });
    Writer {
        field_manager,
        now: meta::now_timestamp(),
        api_version: kind.api_version(&context.target.version),
        subresource: context.target.subresource.clone(),
        force: context.query.flag("force"),
    }
}

/// The kind whose storage keeps `kind`'s objects, and `object` in that storage's shape: a
/// view's body is converted (see [`crate::registry::view`]), any other kind's is its own.
fn stored(
    state: &crate::state::State,
    kind: &Arc<ResourceKind>,
    object: Value,
) -> (Arc<ResourceKind>, Value) {
    let Some(view) = &kind.view else {
        return (kind.clone(), object);
    };
    let storage = state
        .registry
        .get(&view.storage)
        .cloned()
        .expect("a view's storage is a built-in kind");
    let mut object = view.to_storage(object);
    if let Some(map) = object.as_object_mut() {
        map.insert(
            "apiVersion".into(),
            Value::from(storage.storage_api_version()),
        );
        map.insert("kind".into(), Value::from(storage.kind.clone()));
    }
    (storage, object)
}

/// A response carrying one object in the version and the representation the request asked
/// for: a write answered to a metadata client (`as=PartialObjectMetadata`) is metadata too.
fn object_response(
    code: u16,
    context: &RequestContext,
    kind: &ResourceKind,
    object: &Value,
) -> Response<Body> {
    crate::api::json_response(
        code,
        &crate::present::object(kind, &context.target.version, presentation(context), object),
    )
}

fn presentation(context: &RequestContext) -> Presentation {
    Presentation::from_request(
        context.header(header::ACCEPT),
        context.query.get("includeObject"),
    )
}

/// The key of the object a named path addresses.
fn object_key(context: &RequestContext) -> ObjectKey {
    ObjectKey::new(
        context.target.namespace.as_deref().unwrap_or_default(),
        context.target.name.as_deref().unwrap_or_default(),
    )
}

/// The request body as a JSON object. JSON is the encoding every client can use; protobuf is
/// understood for the few kinds kubectl's generators send that way (see [`crate::protobuf`]).
fn decode_object(context: &RequestContext) -> Result<Value, ApiError> {
    let content_type = context.header(header::CONTENT_TYPE);
    let value: Value = if content_type.starts_with("application/vnd.kubernetes.protobuf") {
        crate::protobuf::decode(&context.body).map_err(ApiError::unsupported_media_type)?
    } else if content_type.is_empty() || content_type.contains("json") {
        serde_json::from_slice(&context.body).map_err(|error| {
            ApiError::bad_request(format!(
                "couldn't get version/kind; json parse error: {error}"
            ))
        })?
    } else {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf (got {content_type})"
        )));
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// Names a body after the URL when it has no name; refuses a body named otherwise.
fn name_after_url(object: &mut Value, key: &ObjectKey) -> Result<(), ApiError> {
    match meta::name(object) {
        "" => {
            meta::metadata_mut(object).insert("name".into(), Value::from(key.name.clone()));
            Ok(())
        }
        name if name != key.name => Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            key.name
        ))),
        _ => Ok(()),
    }
}

/// Refuses a body whose apiVersion or kind is not what the URL serves.
fn check_type_meta(
    object: &Value,
    kind: &ResourceKind,
    context: &RequestContext,
) -> Result<(), ApiError> {
    let expected_version = kind.api_version(&context.target.version);
    if let Some(version) = object.get("apiVersion").and_then(Value::as_str)
        && version != expected_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({version}) does not match the expected API version ({expected_version})"
        )));
    }
    if let Some(found) = object.get("kind").and_then(Value::as_str)
        && found != kind.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({found}) does not match the expected kind ({})",
            kind.kind
        )));
    }
    Ok(())
}
