//! One accept loop for every listener of every component: the webhook's HTTPS endpoint, each
//! gRPC server and the admin server.
//!
//! A listener holds at most `--max-connections` connections (one fd each). Every connection
//! is one of:
//! - *unproven*: accepted, its TLS handshake (which must end within `--tls-handshake-timeout`)
//!   or its first request still to come;
//! - *busy*: a request in flight (a response body still streaming counts);
//! - *idle*: it served requests and has none in flight; closed gracefully (HTTP/2 GOAWAY) after
//!   `--idle-timeout`.
//!
//! When the listener is full, a new connection takes the place of the oldest unproven one,
//! else of the connection idle the longest; only when every connection is busy is the new one
//! refused. So a flood of connections that never send a ClientHello, or that send the HTTP/2
//! preface and SETTINGS and then nothing, can hold neither descriptors nor memory beyond the
//! bound, and a legitimate client still gets a place: the flood's own connections are the
//! oldest unproven ones. HTTP/2 keep-alive pings (`--http2-keepalive-interval`,
//! `--http2-keepalive-timeout`) drop peers that stopped answering.
//!
//! Every connection closed by the listener (refused, evicted, handshake or idle timeout) is
//! counted in `arbor_<component>_listener_shed_total{listener,reason}`, the connections held
//! are `arbor_<component>_listener_connections{listener}`, and load shed (all but idle
//! closes) is logged at warn at most once per [`SHED_LOG_INTERVAL`] per listener, with the
//! number shed since the last warning.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use http::Request;
use hyper::body::{Body as HttpBody, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::flags::parse_duration;

/// Shed warnings of one listener are logged at most this often.
pub const SHED_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// How long a connection asked to close gracefully (evicted, idle, shutdown) may take.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Request headers (HTTP/1) must arrive within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Streams one HTTP/2 connection may open at once.
const MAX_CONCURRENT_STREAMS: u32 = 64;

/// The bounds of every listener of the process.
#[derive(Debug, Clone, clap::Args)]
pub struct ListenerArgs {
    /// Connections each listener (webhook HTTPS, gRPC, admin) holds at most; beyond it the
    /// oldest unproven or idle connection is closed, or the new one refused.
    #[arg(
        long = "max-connections",
        env = "ARBOR_MAX_CONNECTIONS",
        default_value_t = 256,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_connections: u32,

    /// A TLS handshake not finished within this is dropped.
    #[arg(long = "tls-handshake-timeout", env = "ARBOR_TLS_HANDSHAKE_TIMEOUT", value_parser = parse_duration, default_value = "5s")]
    pub handshake_timeout: Duration,

    /// A connection with no request in flight for this long is closed (gracefully).
    #[arg(long = "idle-timeout", env = "ARBOR_IDLE_TIMEOUT", value_parser = parse_duration, default_value = "2m")]
    pub idle_timeout: Duration,

    /// How often an HTTP/2 connection is pinged.
    #[arg(long = "http2-keepalive-interval", env = "ARBOR_HTTP2_KEEPALIVE_INTERVAL", value_parser = parse_duration, default_value = "30s")]
    pub keepalive_interval: Duration,

    /// An HTTP/2 ping not answered within this closes the connection.
    #[arg(long = "http2-keepalive-timeout", env = "ARBOR_HTTP2_KEEPALIVE_TIMEOUT", value_parser = parse_duration, default_value = "10s")]
    pub keepalive_timeout: Duration,
}

impl Default for ListenerArgs {
    fn default() -> Self {
        Self {
            max_connections: 256,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
        }
    }
}

/// Why a connection was shed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShedReason {
    /// Full, and every connection had a request in flight: the new one was closed.
    Refused,
    /// Closed to make room for a new connection (it was unproven or idle).
    Evicted,
    /// Its TLS handshake did not finish in time.
    HandshakeTimeout,
    /// No request for `--idle-timeout`.
    Idle,
}

impl ShedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::Evicted => "evicted",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::Idle => "idle",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ListenerLabel {
    listener: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ShedLabels {
    listener: String,
    reason: String,
}

/// The listeners' metrics of one component; clones share the same series.
#[derive(Debug, Clone, Default)]
pub struct ListenerMetrics {
    connections: Family<ListenerLabel, Gauge>,
    shed: Family<ShedLabels, Counter>,
}

impl ListenerMetrics {
    /// Registers `listener_connections` and `listener_shed_total` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "listener_connections",
            "Connections a listener holds",
            metrics.connections.clone(),
        );
        registry.register(
            "listener_shed",
            "Connections a listener closed to stay within its bounds, by reason",
            metrics.shed.clone(),
        );
        metrics
    }

    /// Connections `listener` holds now.
    pub fn connections(&self, listener: &str) -> i64 {
        self.connections
            .get_or_create(&ListenerLabel {
                listener: listener.to_owned(),
            })
            .get()
    }

    /// Connections `listener` shed for `reason` so far.
    pub fn shed(&self, listener: &str, reason: ShedReason) -> u64 {
        self.shed
            .get_or_create(&ShedLabels {
                listener: listener.to_owned(),
                reason: reason.as_str().to_owned(),
            })
            .get()
    }
}

/// Bounds and metrics, as every listener of a component takes them.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub args: ListenerArgs,
    pub metrics: ListenerMetrics,
}

impl Limits {
    pub fn new(args: ListenerArgs, metrics: ListenerMetrics) -> Self {
        Self { args, metrics }
    }
}

/// Who is at the other end of a connection, in every request's extensions.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub remote: SocketAddr,
    /// The verified client certificate's names; `None` without one (plaintext, or TLS
    /// without client authentication).
    pub identity: Option<PeerIdentity>,
}

/// The names of a client certificate: its subject's common name and its DNS (and URI)
/// subject alternative names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    pub common_name: Option<String>,
    pub alt_names: Vec<String>,
}

impl PeerIdentity {
    /// Reads the names of a DER certificate; `None` when it does not parse (rustls verified
    /// it already, so that would be a certificate rustls and x509-parser read differently).
    pub fn from_der(der: &[u8]) -> Option<Self> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_owned);
        let alt_names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|name| match name {
                        GeneralName::DNSName(name) | GeneralName::URI(name) => {
                            Some((*name).to_owned())
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            common_name,
            alt_names,
        })
    }

    /// Whether `name` is the common name or one of the alternative names.
    pub fn has_name(&self, name: &str) -> bool {
        self.common_name.as_deref() == Some(name) || self.alt_names.iter().any(|n| n == name)
    }
}

impl std::fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CN={}", self.common_name.as_deref().unwrap_or(""))?;
        if !self.alt_names.is_empty() {
            write!(f, " (SAN {})", self.alt_names.join(", "))?;
        }
        Ok(())
    }
}

/// One held connection, as eviction and the idle timer see it.
#[derive(Debug)]
struct Conn {
    in_flight: AtomicUsize,
    /// It served at least one request.
    proven: AtomicBool,
    /// Last request start or end; its accept time before the first.
    last_active: Mutex<Instant>,
    /// Asks the connection to close.
    evict: CancellationToken,
}

impl Conn {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            proven: AtomicBool::new(false),
            last_active: Mutex::new(Instant::now()),
            evict: CancellationToken::new(),
        }
    }

    fn touch(&self) {
        *lock(&self.last_active) = Instant::now();
    }

    fn last_active(&self) -> Instant {
        *lock(&self.last_active)
    }

    /// Resolves once the connection has had no request in flight for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let wait = if self.in_flight.load(Ordering::Acquire) > 0 {
                timeout
            } else {
                let idle = self.last_active().elapsed();
                if idle >= timeout {
                    return;
                }
                timeout - idle
            };
            tokio::time::sleep(wait).await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The data behind these locks (instants, a map of live connections) stays valid when a
    // holder panicked; the listener must keep serving.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A request in flight on a connection, until its response body ends.
struct Activity(Arc<Conn>);

impl Activity {
    fn begin(conn: &Arc<Conn>) -> Self {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        conn.proven.store(true, Ordering::Release);
        conn.touch();
        Self(conn.clone())
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight until it ends (a gRPC server
/// stream is a request in flight for as long as it streams).
struct Tracked {
    body: Body,
    _activity: Activity,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The warnings about shed connections of one listener, at most one per interval.
#[derive(Debug, Default)]
struct ShedLog {
    last: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

/// What the accept loop and the connection tasks share.
struct Shared {
    name: &'static str,
    local: SocketAddr,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    slots: Arc<Semaphore>,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    log: ShedLog,
}

impl Shared {
    fn shed(&self, reason: ShedReason, peer: SocketAddr) {
        self.limits
            .metrics
            .shed
            .get_or_create(&ShedLabels {
                listener: self.name.to_owned(),
                reason: reason.as_str().to_owned(),
            })
            .inc();
        if reason == ShedReason::Idle {
            // Closing an idle connection is housekeeping, not load shed; clients reconnect.
            tracing::debug!(listener = self.name, %peer, "closing an idle connection");
            return;
        }
        let now = Instant::now();
        let mut last = lock(&self.log.last);
        if last.is_some_and(|at| now.duration_since(at) < SHED_LOG_INTERVAL) {
            self.log.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(now);
        let suppressed = self.log.suppressed.swap(0, Ordering::Relaxed);
        tracing::warn!(
            listener = self.name,
            address = %self.local,
            %peer,
            reason = reason.as_str(),
            shed_since_last_warning = suppressed,
            max_connections = self.limits.args.max_connections,
            "shedding connections to stay within the listener's bounds"
        );
    }

    fn gauge(&self) -> Gauge {
        self.limits
            .metrics
            .connections
            .get_or_create(&ListenerLabel {
                listener: self.name.to_owned(),
            })
            .clone()
    }

    /// Asks the oldest unproven, else the longest idle, connection to close; `false` when
    /// every connection has a request in flight (or is already closing).
    fn evict_one(&self) -> bool {
        let conns = lock(&self.conns);
        let victim = conns
            .values()
            .filter(|conn| {
                !conn.evict.is_cancelled() && conn.in_flight.load(Ordering::Acquire) == 0
            })
            .min_by_key(|conn| (conn.proven.load(Ordering::Acquire), conn.last_active()));
        match victim {
            Some(conn) => {
                conn.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// Keeps a connection registered (and its slot taken) while it lives.
struct Registered {
    shared: Arc<Shared>,
    id: u64,
    conn: Arc<Conn>,
    _slot: OwnedSemaphorePermit,
}

impl Registered {
    fn new(shared: &Arc<Shared>, slot: OwnedSemaphorePermit) -> Self {
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::new());
        lock(&shared.conns).insert(id, conn.clone());
        shared.gauge().inc();
        Self {
            shared: shared.clone(),
            id,
            conn,
            _slot: slot,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.shared.conns).remove(&self.id);
        self.shared.gauge().dec();
    }
}

/// A bound listener with its bounds; [`Listener::serve`] runs its accept loop.
pub struct Listener {
    tcp: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.shared.name)
            .field("address", &self.shared.local)
            .field("tls", &self.shared.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// Binds `address`; `tls` makes every connection TLS (with client certificates when the
    /// configuration verifies them), `None` plaintext.
    pub async fn bind(
        name: &'static str,
        address: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        limits: Limits,
    ) -> std::io::Result<Self> {
        let tcp = TcpListener::bind(address).await?;
        let local = tcp.local_addr()?;
        let slots = Arc::new(Semaphore::new(limits.args.max_connections as usize));
        Ok(Self {
            tcp,
            shared: Arc::new(Shared {
                name,
                local,
                limits,
                tls: tls.map(TlsAcceptor::from),
                slots,
                conns: Mutex::default(),
                next_id: AtomicU64::new(0),
                log: ShedLog::default(),
            }),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// Accepts and serves `router` until `shutdown`, then lets open connections finish their
    /// requests (within a short grace).
    pub async fn serve(self, router: Router, shutdown: CancellationToken) {
        let Self { tcp, shared } = self;
        loop {
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = tcp.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(listener = shared.name, %error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let slot = match shared.slots.clone().try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    if shared.evict_one() {
                        shared.shed(ShedReason::Evicted, peer);
                    }
                    // Wait here, not in a task, for the slot a closing connection gives back
                    // (an evicted unproven one closes at once, an idle one within
                    // CLOSE_GRACE): accepting no faster than connections close keeps the
                    // descriptors at the bound and leaves the rest of a flood in the kernel's
                    // backlog, and every connection evicted is a different one.
                    let wait = shared.limits.args.handshake_timeout;
                    let acquired = tokio::select! {
                        () = shutdown.cancelled() => break,
                        acquired = tokio::time::timeout(wait, shared.slots.clone().acquire_owned()) => acquired,
                    };
                    match acquired {
                        Ok(Ok(slot)) => slot,
                        _ => {
                            shared.shed(ShedReason::Refused, peer);
                            drop(stream);
                            continue;
                        }
                    }
                }
            };
            let (shared, router, shutdown) = (shared.clone(), router.clone(), shutdown.clone());
            tokio::spawn(async move {
                let registered = Registered::new(&shared, slot);
                connection(&registered, stream, peer, router, shutdown).await;
            });
        }
    }
}

async fn connection(
    registered: &Registered,
    stream: TcpStream,
    remote: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) {
    let shared = &registered.shared;
    let conn = &registered.conn;
    let args = &shared.limits.args;
    let _ = stream.set_nodelay(true);
    let (io, identity) = match &shared.tls {
        None => (Either::Left(stream), None),
        Some(acceptor) => {
            let handshake = tokio::time::timeout(args.handshake_timeout, acceptor.accept(stream));
            let tls = tokio::select! {
                handshake = handshake => handshake,
                () = conn.evict.cancelled() => return,
                () = shutdown.cancelled() => return,
            };
            let tls = match tls {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(listener = shared.name, %remote, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    shared.shed(ShedReason::HandshakeTimeout, remote);
                    return;
                }
            };
            let identity = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|cert| PeerIdentity::from_der(cert));
            (Either::Right(tls), identity)
        }
    };
    let peer = PeerInfo { remote, identity };
    let service = {
        let conn = conn.clone();
        tower::service_fn(move |request: Request<Incoming>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(peer.clone());
            let activity = Activity::begin(&conn);
            let router = router.clone();
            async move {
                let Ok(response) = router.oneshot(request).await;
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(Tracked {
                        body,
                        _activity: activity,
                    })
                }))
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(args.keepalive_interval))
        .keep_alive_timeout(args.keepalive_timeout)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let connection = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    let mut connection = std::pin::pin!(connection);
    let close = tokio::select! {
        result = connection.as_mut() => Err(result),
        () = shutdown.cancelled() => Ok(()),
        () = conn.evict.cancelled() => Ok(()),
        () = conn.idle_for(args.idle_timeout) => {
            shared.shed(ShedReason::Idle, remote);
            Ok(())
        }
    };
    let result = match close {
        Err(ended) => ended,
        // Gracefully (GOAWAY, or after the current HTTP/1 response), and for good after
        // CLOSE_GRACE.
        Ok(()) => {
            connection.as_mut().graceful_shutdown();
            tokio::time::timeout(CLOSE_GRACE, connection.as_mut())
                .await
                .unwrap_or(Ok(()))
        }
    };
    if let Err(error) = result {
        tracing::debug!(listener = shared.name, %remote, %error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_matches_its_common_name_and_alternative_names() {
        let ca = arbor_demo::pki::Authority::generate("test CA").unwrap();
        let issued = ca
            .issue("arbor-observer", &["observer.arbor-system.svc"])
            .unwrap();
        let der = rustls_pemfile::certs(&mut issued.cert_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        let identity = PeerIdentity::from_der(&der).unwrap();
        assert!(identity.has_name("arbor-observer"));
        assert!(identity.has_name("observer.arbor-system.svc"));
        assert!(!identity.has_name("arbor-webhook"));
        assert_eq!(
            identity.to_string(),
            "CN=arbor-observer (SAN observer.arbor-system.svc)"
        );
    }

    #[test]
    fn flags_default_to_bounded_listeners() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            listener: ListenerArgs,
        }
        let cli = Cli::try_parse_from(["arbor"]).unwrap();
        assert_eq!(cli.listener.max_connections, 256);
        assert_eq!(cli.listener.handshake_timeout, Duration::from_secs(5));
        assert!(Cli::try_parse_from(["arbor", "--max-connections", "0"]).is_err());
    }
}
