//! The request pipeline: route → authenticate → (per resource) authorize → injected faults →
//! verb handler (writes call admission webhooks before storing) → account → respond.
//!
//! Every request becomes a [`RequestContext`] carrying the caller's identity before any handler
//! runs. The emulator's own endpoints under `/__emu/` (see [`crate::admin`]) are authenticated
//! like everything else but neither faulted nor accounted.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use tokio_util::sync::CancellationToken;

use std::collections::HashMap;

use crate::accounting::Requests;
use crate::auth::{Authenticator, Identity};
use crate::authz::Authorizer;
use crate::faults::Faults;
use crate::route::{Query, ResourceTarget, Route, parse_path};
use crate::state::State;
use crate::status::ApiError;
use crate::{admin, discovery, handlers, openapi};

/// kube-apiserver's limit on a request body (3 MiB).
pub const REQUEST_SIZE_LIMIT: usize = 3 * 1024 * 1024;

/// Settings that shape responses.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// The `host:port` clients reach the server at, for discovery.
    pub server_address: String,
}

/// What every connection shares.
#[derive(Debug)]
pub struct Shared {
    /// Shared with the RBAC authorizer, which reads the policy from the store.
    pub state: Arc<Mutex<State>>,
    pub authenticator: Authenticator,
    pub authorizer: Arc<dyn Authorizer>,
    /// Whether RBAC is enforced, and with it escalation prevention on RBAC writes.
    pub rbac: bool,
    pub config: ServeConfig,
    pub faults: Faults,
    pub requests: Requests,
    /// Webhook services by `namespace/name:port` → `host:port` (there is no cluster DNS).
    pub service_addresses: HashMap<String, String>,
    /// Cancelled at shutdown; open watches end on it.
    pub shutdown: CancellationToken,
}

impl Shared {
    /// The state; a panic in another request does not take the server down with it.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One request, authenticated.
#[derive(Debug)]
pub struct RequestContext {
    pub identity: Identity,
    pub method: Method,
    pub target: ResourceTarget,
    pub query: Query,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Warnings for the client (from admission webhooks), sent as `Warning` headers.
    pub warnings: Mutex<Vec<String>>,
}

impl RequestContext {
    pub fn add_warnings(&self, warnings: &[String]) {
        self.warnings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend_from_slice(warnings);
    }

    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .warnings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    pub fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    }
}

pub fn json_response(code: u16, body: &impl serde::Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(body).expect("JSON values always serialize");
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(bytes))
        .expect("static response parts are valid")
}

pub fn error_response(error: &ApiError) -> Response<Body> {
    if error.plain_text {
        // Go's http.Error: the text and a newline, never sniffed as anything else.
        return Response::builder()
            .status(StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .header("x-content-type-options", "nosniff")
            .body(Body::from(format!("{}\n", error.message)))
            .expect("static response parts are valid");
    }
    json_response(error.code, &error.to_status())
}

/// The path of a request kube-apiserver authorizes as a non-resource URL: discovery, version
/// and OpenAPI. Health checks are answered before authentication; the emulator's own
/// `/__emu/` endpoints are test hooks, authenticated but not authorized.
fn non_resource_path(route: &Route, path: &str) -> Option<String> {
    match route {
        Route::Version
        | Route::CoreVersions
        | Route::Groups
        | Route::Group(_)
        | Route::GroupVersion { .. }
        | Route::OpenApi(_) => Some(path.to_owned()),
        Route::Health | Route::Resource(_) | Route::Admin(_) | Route::Unknown => None,
    }
}

/// Serves one HTTP request.
pub async fn serve<B>(shared: Arc<Shared>, request: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: std::fmt::Display,
{
    let method = request.method().clone();
    let uri = request.uri().clone();
    let response = match serve_route(shared, request).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    tracing::debug!(%method, %uri, status = response.status().as_u16(), "request");
    response
}

async fn serve_route<B>(
    shared: Arc<Shared>,
    request: Request<B>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: std::fmt::Display,
{
    let route = parse_path(request.uri().path());
    let query = Query::parse(request.uri().query());
    if matches!(route, Route::Health) {
        return Ok(Response::new(Body::from("ok")));
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let identity = shared
        .authenticator
        .authenticate(authorization)
        .ok_or_else(ApiError::unauthorized)?;
    let request_uri = request
        .uri()
        .path_and_query()
        .map_or("/", |path_and_query| path_and_query.as_str())
        .to_owned();
    let identity = crate::impersonation::identity_of(
        identity,
        request.headers(),
        &request_uri,
        shared.authorizer.as_ref(),
    )?;
    // A port-forward upgrades the connection instead of answering it (see `portforward`).
    if let Route::Resource(target) = &route
        && crate::portforward::is_portforward(target)
    {
        let target = target.clone();
        return crate::portforward::serve(shared, identity, target, query, request).await;
    }
    if let Some(path) = non_resource_path(&route, request.uri().path()) {
        let attributes = crate::authz::Attributes {
            verb: request.method().as_str().to_lowercase(),
            path: Some(path),
            ..crate::authz::Attributes::default()
        };
        crate::authz::check(shared.authorizer.as_ref(), &identity, &attributes)?;
    }
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|error| ApiError::bad_request(format!("reading the request body: {error}")))?
        .to_bytes();
    if body.len() > REQUEST_SIZE_LIMIT {
        return Err(ApiError::request_entity_too_large(REQUEST_SIZE_LIMIT));
    }
    match route {
        Route::Health => Ok(Response::new(Body::from("ok"))),
        Route::Version => Ok(json_response(200, &discovery::version())),
        Route::CoreVersions | Route::Groups => {
            let core = matches!(route, Route::CoreVersions);
            let accept = parts
                .headers
                .get(header::ACCEPT)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default();
            let registry = &shared.state().registry;
            Ok(match discovery::aggregated_version(accept) {
                Some(version) => {
                    let mut response =
                        json_response(200, &discovery::aggregated(registry, core, version));
                    if let Ok(content_type) =
                        http::HeaderValue::from_str(&discovery::aggregated_content_type(version))
                    {
                        response
                            .headers_mut()
                            .insert(header::CONTENT_TYPE, content_type);
                    }
                    response
                }
                None if core => json_response(200, &discovery::core_versions(&shared.config)),
                None => json_response(200, &discovery::groups(registry)),
            })
        }
        Route::Group(group) => {
            discovery::group(&shared.state().registry, &group).map(|body| json_response(200, &body))
        }
        Route::GroupVersion { group, version } => {
            discovery::resources(&shared.state().registry, &group, &version)
                .map(|body| json_response(200, &body))
        }
        Route::OpenApi(path) => openapi::serve(&shared.state().registry, &path),
        Route::Resource(target) => {
            let reads = parts.method == http::Method::GET;
            let context = RequestContext {
                identity,
                method: parts.method,
                target,
                query,
                headers: parts.headers,
                body,
                warnings: Mutex::new(Vec::new()),
            };
            if reads {
                return handlers::handle(&shared, context).await;
            }
            // A write the server has taken is carried out even when its client stops waiting
            // for the answer: kube-apiserver does not promise to cancel it (only a write not yet
            // sent to storage is dropped with the request's context), so a client must never
            // count on a request it gave up on having no effect. Reads stay tied to their client.
            tokio::spawn(async move { handlers::handle(&shared, context).await })
                .await
                .unwrap_or_else(|failed| {
                    Err(ApiError::internal(&format!(
                        "serving the request failed: {failed}"
                    )))
                })
        }
        Route::Admin(path) => admin::serve(&shared, &parts.method, &path, &body),
        Route::Unknown => Err(ApiError::no_such_route()),
    }
}
