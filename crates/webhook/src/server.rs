//! The HTTPS admission endpoint.
//!
//! One path, [`VALIDATE_PATH`] (`POST /validate`), answers every validating webhook the chart
//! registers; [`crate::policy`] chooses the rules by the request's kind. An `admission.k8s.io/v1`
//! AdmissionReview comes in and one goes out with the same uid.
//!
//! Nothing a client sends can crash or hang the server:
//! - the body is limited to [`MAX_BODY_BYTES`] (413 beyond) and must arrive within
//!   [`BODY_TIMEOUT`] (408);
//! - a body that is not an AdmissionReview v1 is answered 400 with the reason in plain text;
//! - the decision is bounded by [`DECISION_TIMEOUT`], below the API server's default webhook
//!   timeout of 10s, and answered 504 beyond (the webhook's failurePolicy then decides);
//! - TLS handshakes must finish within [`HANDSHAKE_TIMEOUT`] and request headers within
//!   [`HEADER_TIMEOUT`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::metrics::WebhookMetrics;
use crate::policy::Policy;
use crate::review::decode_admission_review;

/// The path of the admission endpoint.
pub const VALIDATE_PATH: &str = "/validate";
/// Largest AdmissionReview accepted: an old and a new object of the API server's 3 MiB limit.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
pub const BODY_TIMEOUT: Duration = Duration::from_secs(5);
pub const DECISION_TIMEOUT: Duration = Duration::from_secs(8);
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub policy: Policy,
    pub metrics: WebhookMetrics,
}

/// The admission router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .with_state(state)
}

fn plain(status: StatusCode, reason: impl Into<String>) -> Response {
    (status, reason.into()).into_response()
}

async fn validate(State(state): State<AppState>, body: Body) -> Response {
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
    let decoded = match decode_admission_review(&bytes) {
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
    let decision = verdict.decision();
    let mut response = decoded.response();
    if !decision.allowed {
        tracing::info!(uid = decoded.uid(), rule = %decision.rule, reason = %decision.reason, "denied");
        response = response.deny(decision.to_string());
    }
    if !verdict.warnings.is_empty() {
        response.warnings = Some(verdict.warnings);
    }
    axum::Json(response.into_review()).into_response()
}

/// Binds the HTTPS listener, returning it and its address.
pub async fn bind(address: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(address).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

/// Serves `router` over TLS on `listener` until `shutdown`, then lets open connections finish
/// their requests.
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, router, shutdown) = (acceptor.clone(), router.clone(), shutdown.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let connection =
                builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(router));
            let mut connection = std::pin::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
}
