//! The HTTPS admission endpoint.
//!
//! One path, [`VALIDATE_PATH`] (`POST /validate`), answers every validating webhook the chart
//! registers; [`crate::reviewer::Policy`] chooses the rules by the request's kind. An `admission.k8s.io/v1`
//! AdmissionReview comes in and one goes out with the same uid.
//!
//! Nothing a client sends can crash or hang the server:
//! - the body is limited to [`MAX_BODY_BYTES`] (413 beyond) and must arrive within
//!   [`BODY_TIMEOUT`] (408);
//! - a body that is not an AdmissionReview v1 is answered 400 with the reason in plain text;
//! - the decision is bounded by [`DECISION_TIMEOUT`], below the API server's default webhook
//!   timeout of 10s, and answered 504 beyond (the webhook's failurePolicy then decides);
//! - connections go through the process's bounded accept loop
//!   ([`arbor_runtime::listener`]): TLS handshakes within `--tls-handshake-timeout`, request
//!   headers within 5s, idle connections closed, at most `--max-connections` held, and load
//!   shed (counted and logged) beyond.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbor_runtime::listener::{Limits, Listener};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::metrics::WebhookMetrics;
use crate::review::decode_admission_review;
use crate::reviewer::Policy;

/// The path of the admission endpoint.
pub const VALIDATE_PATH: &str = "/validate";
/// Largest AdmissionReview accepted: an old and a new object of the API server's 3 MiB limit.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
pub const BODY_TIMEOUT: Duration = Duration::from_secs(5);
pub const DECISION_TIMEOUT: Duration = Duration::from_secs(8);

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub policy: Policy,
    pub metrics: WebhookMetrics,
}

/// The admission router.
pub fn router(state: AppState) -> Router {
    // Behind one `Arc`: axum clones the state for every request, and cloning `AppState`
    // itself touches a reference count per handle, shared by every worker thread.
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .with_state(Arc::new(state))
}

fn plain(status: StatusCode, reason: impl Into<String>) -> Response {
    (status, reason.into()).into_response()
}

async fn validate(State(state): State<Arc<AppState>>, body: Body) -> Response {
    let started = Instant::now();
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY_BYTES))
        .await
    {
        Err(_) => {
            return plain(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {BODY_TIMEOUT:?}"),
            );
        }
        Ok(Err(error)) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is unreadable or larger than {MAX_BODY_BYTES} bytes: {error}"),
            );
        }
        Ok(Ok(bytes)) => bytes,
    };
    let decoded = match decode_admission_review(&bytes, |kind| state.policy.object_view(kind)) {
        Ok(decoded) => decoded,
        Err(error) => return plain(StatusCode::BAD_REQUEST, error.to_string()),
    };
    let Ok(verdict) =
        tokio::time::timeout(DECISION_TIMEOUT, state.policy.review(&decoded.input)).await
    else {
        return plain(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "no decision for request {} within {DECISION_TIMEOUT:?}",
                decoded.uid()
            ),
        );
    };
    state
        .metrics
        .record("admission", &verdict, started.elapsed());
    let mut response = decoded.response();
    if !verdict.allowed() {
        let decision = verdict.decision();
        tracing::info!(uid = decoded.uid(), rule = %decision.rule, reason = %decision.reason, "denied");
        response = response.deny(decision.to_string());
    }
    if !verdict.warnings.is_empty() {
        response.warnings = Some(verdict.warnings);
    }
    axum::Json(response.into_review()).into_response()
}

/// Binds the HTTPS listener with the process's listener bounds.
pub async fn bind(
    address: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    limits: Limits,
) -> std::io::Result<Listener> {
    Listener::bind("webhook", address, Some(tls), limits).await
}
