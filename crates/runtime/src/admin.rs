//! The admin server: `/metrics`, `/healthz` and `/readyz`.
//!
//! Liveness only says that the process serves requests. Readiness is a set of gates, one per
//! thing that must be true before the component can do its job (typically "the caches of this
//! controller have synced"); `/readyz` answers 503 and names the gates still closed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::listener::{Limits, Listener};

/// Named readiness gates shared between the admin server and the components.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    gates: Arc<Mutex<BTreeMap<String, bool>>>,
}

/// One gate; opening it (or dropping the last clone of [`Readiness`]) is the component's job.
#[derive(Debug, Clone)]
pub struct ReadyGate {
    name: String,
    readiness: Readiness,
}

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a closed gate. The process is not ready until every registered gate is open.
    pub fn gate(&self, name: impl Into<String>) -> ReadyGate {
        let name = name.into();
        self.lock().insert(name.clone(), false);
        ReadyGate {
            name,
            readiness: self.clone(),
        }
    }

    /// The gates still closed; empty means ready.
    pub fn pending(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, open)| !**open)
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn is_ready(&self) -> bool {
        self.pending().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        // A poisoned map still holds valid booleans; readiness must keep answering.
        self.gates
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ReadyGate {
    pub fn open(&self) {
        self.readiness.lock().insert(self.name.clone(), true);
    }

    /// Closes the gate again, for example while a controller lost its watch and relists.
    pub fn close(&self) {
        self.readiness.lock().insert(self.name.clone(), false);
    }
}

#[derive(Debug, Clone)]
struct AdminState {
    registry: Arc<Registry>,
    readiness: Readiness,
}

/// The admin router, for embedding or testing without a socket.
pub fn router(registry: Arc<Registry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(AdminState {
            registry,
            readiness,
        })
}

/// Binds `addr` and serves the admin router until `shutdown` is cancelled, within the
/// process's listener bounds. Returns the bound address (useful with port 0) once the socket
/// listens.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    readiness: Readiness,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = Listener::bind("admin", addr, None, limits).await?;
    let local = listener.local_addr();
    tokio::spawn(listener.serve(router(registry, readiness), shutdown));
    Ok(local)
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::encode(&state.registry),
    )
}

async fn ready(State(state): State<AdminState>) -> impl IntoResponse {
    let pending = state.readiness.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("waiting for: {}\n", pending.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn readyz_is_unavailable_until_every_gate_opens() {
        let readiness = Readiness::new();
        let caches = readiness.gate("gittrack cache");
        let lease = readiness.gate("lease");
        let shutdown = CancellationToken::new();
        let registry = crate::metrics::MetricsRegistry::new().freeze();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            registry,
            readiness.clone(),
            Limits::default(),
            shutdown.clone(),
        )
        .await
        .unwrap();

        let response = get(addr, "/readyz").await;
        assert!(response.starts_with("HTTP/1.1 503"), "{response}");
        assert!(response.contains("gittrack cache, lease"), "{response}");

        caches.open();
        assert!(get(addr, "/readyz").await.contains("waiting for: lease"));
        lease.open();
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        shutdown.cancel();
    }

    #[tokio::test]
    async fn metrics_are_served_in_openmetrics_text() {
        let mut registry = crate::metrics::MetricsRegistry::new();
        let gauge = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        registry.component("hierarchy").register(
            "namespaces",
            "Namespaces in the tree",
            gauge.clone(),
        );
        gauge.set(3);
        let shutdown = CancellationToken::new();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            registry.freeze(),
            Readiness::new(),
            Limits::default(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let response = get(addr, "/metrics").await;
        assert!(
            response.contains("application/openmetrics-text"),
            "{response}"
        );
        assert!(
            response.contains("arbor_hierarchy_namespaces 3"),
            "{response}"
        );
        shutdown.cancel();
    }

    #[test]
    fn a_closed_gate_makes_the_process_unready_again() {
        let readiness = Readiness::new();
        let gate = readiness.gate("watch");
        gate.open();
        assert!(readiness.is_ready());
        gate.close();
        assert_eq!(readiness.pending(), vec!["watch".to_owned()]);
    }
}
