//! Starting and stopping the server: [`KubeEmu`] and its builder.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use std::collections::HashMap;

use crate::accounting::Requests;
use crate::admission::service_key;
use crate::api::{self, ServeConfig, Shared};
use crate::auth::{Authenticator, Identity, StaticToken, service_account_username};
use crate::authz::{AllowAll, Authorizer, DenyRule, DenyRules};
use crate::error::Error;
use crate::faults::Faults;
use crate::kubeconfig::{self, Endpoint};
use crate::rbac::RbacAuthorizer;
use crate::state::State;
use crate::tls;

/// How long shutdown waits for open connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Configures a server before [`KubeEmuBuilder::start`].
#[derive(Debug)]
pub struct KubeEmuBuilder {
    listen: SocketAddr,
    tls: bool,
    tokens: Option<Vec<StaticToken>>,
    history_window: usize,
    bookmark_interval: Duration,
    authorizer: Arc<dyn Authorizer>,
    rbac: bool,
    deny_rules: Vec<DenyRule>,
    service_addresses: HashMap<String, String>,
}

impl Default for KubeEmuBuilder {
    fn default() -> Self {
        KubeEmuBuilder {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            tokens: None,
            history_window: 10_000,
            bookmark_interval: Duration::from_secs(60),
            authorizer: Arc::new(AllowAll),
            rbac: false,
            deny_rules: Vec::new(),
            service_addresses: HashMap::new(),
        }
    }
}

impl KubeEmuBuilder {
    /// The address to bind; the default is a free loopback port.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Serve HTTPS with a freshly generated CA instead of plain HTTP.
    pub fn tls(mut self, enabled: bool) -> Self {
        self.tls = enabled;
        self
    }

    /// Require bearer tokens; the first token added is the one the kubeconfig carries.
    pub fn token(mut self, token: StaticToken) -> Self {
        self.tokens.get_or_insert_with(Vec::new).push(token);
        self
    }

    /// Require bearer tokens from a token file's entries (see [`crate::auth::read_token_file`]).
    pub fn tokens(mut self, tokens: Vec<StaticToken>) -> Self {
        self.tokens.get_or_insert_with(Vec::new).extend(tokens);
        self
    }

    /// How many changes the server remembers for watches and paging (default 10,000). A watch
    /// resuming from before the window, or a continue token from before it, gets 410 Gone.
    pub fn history_window(mut self, changes: usize) -> Self {
        self.history_window = changes;
        self
    }

    /// How often watches that allow bookmarks receive one (default 60 s, like kube-apiserver).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Decides every request and answers SelfSubjectAccessReviews (default: allow all).
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = authorizer;
        self
    }

    /// Enforces RBAC from the stored Roles, ClusterRoles and bindings, as kube-apiserver's RBAC
    /// authorizer does, instead of [`KubeEmuBuilder::authorizer`]; the server starts with
    /// kube's bootstrap policy (see the `rbac` module). Members of `system:masters` (the
    /// default admin) may do everything.
    pub fn rbac(mut self, enabled: bool) -> Self {
        self.rbac = enabled;
        self
    }

    /// Denies the requests `rule` matches (before the authorizer is asked); see
    /// [`crate::authz::DenyRule`].
    pub fn deny(mut self, rule: DenyRule) -> Self {
        self.deny_rules.push(rule);
        self
    }

    /// Denies what any of `rules` matches.
    pub fn deny_rules(mut self, rules: Vec<DenyRule>) -> Self {
        self.deny_rules.extend(rules);
        self
    }

    /// Where admission webhook service `namespace/name:port` listens: there is no cluster DNS,
    /// so a webhook configuration's `clientConfig.service` is reached at `addr` (TLS still
    /// checks the certificate for `<name>.<namespace>.svc`).
    pub fn service_address(
        mut self,
        namespace: &str,
        name: &str,
        port: u16,
        addr: SocketAddr,
    ) -> Self {
        self.service_addresses
            .insert(service_key(namespace, name, port), addr.to_string());
        self
    }

    /// Adds a token for service account `name` in `namespace` (its identity carries the
    /// service-account groups).
    pub fn service_account_token(self, token: &str, namespace: &str, name: &str) -> Self {
        self.token(StaticToken::service_account(token, namespace, name))
    }

    /// Binds the listener and starts serving in the background.
    pub async fn start(self) -> Result<KubeEmu, Error> {
        let listener = TcpListener::bind(self.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: self.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Io {
            what: "reading the bound address".into(),
            source,
        })?;
        let material = self.tls.then(tls::generate).transpose()?;
        let scheme = if material.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let client_token = self
            .tokens
            .as_ref()
            .and_then(|tokens| tokens.first())
            .map(|token| token.token.clone());
        let mut state = State::new(self.history_window);
        if self.rbac {
            crate::rbac::bootstrap::install(&mut state);
        }
        let state = Arc::new(Mutex::new(state));
        let base: Arc<dyn Authorizer> = if self.rbac {
            Arc::new(RbacAuthorizer::new(state.clone()))
        } else {
            self.authorizer
        };
        let authorizer: Arc<dyn Authorizer> = if self.deny_rules.is_empty() {
            base
        } else {
            Arc::new(DenyRules::new(self.deny_rules, base))
        };
        let shared = Arc::new(Shared {
            state,
            authenticator: Authenticator::new(self.tokens),
            authorizer,
            rbac: self.rbac,
            faults: Faults::default(),
            requests: Requests::default(),
            service_addresses: self.service_addresses,
            config: ServeConfig {
                bookmark_interval: self.bookmark_interval,
                server_address: addr.to_string(),
            },
            shutdown: CancellationToken::new(),
        });
        let acceptor = material
            .as_ref()
            .map(|material| TlsAcceptor::from(material.server_config.clone()));
        let task = tokio::spawn(accept_loop(listener, acceptor, shared.clone()));
        tracing::info!(%url, "arbor-kube-emu serving");
        Ok(KubeEmu {
            addr,
            url,
            ca_pem: material.map(|material| material.ca_pem),
            client_token,
            shared,
            task: Some(task),
        })
    }
}

async fn serve_connection<I>(
    io: I,
    shared: Arc<Shared>,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(api::serve(shared, request).await) }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    if let Err(error) = watcher.watch(connection).await {
        tracing::debug!(%error, "connection ended with an error");
    }
}

async fn handle_stream(
    stream: TcpStream,
    acceptor: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    watcher: hyper_util::server::graceful::Watcher,
) {
    match acceptor {
        None => serve_connection(stream, shared, watcher).await,
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(tls_stream) => serve_connection(tls_stream, shared, watcher).await,
            Err(error) => tracing::debug!(%error, "TLS handshake failed"),
        },
    }
}

async fn accept_loop(listener: TcpListener, acceptor: Option<TlsAcceptor>, shared: Arc<Shared>) {
    let graceful = GracefulShutdown::new();
    let stop = shared.shutdown.clone();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(handle_stream(stream, acceptor.clone(), shared.clone(), graceful.watcher()));
                }
                Err(error) => tracing::warn!(%error, "accepting a connection failed"),
            },
        }
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the shutdown grace period");
    }
}

/// A running emulated API server. Dropping it stops the server too (without waiting).
#[derive(Debug)]
pub struct KubeEmu {
    addr: SocketAddr,
    url: String,
    ca_pem: Option<String>,
    client_token: Option<String>,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

impl KubeEmu {
    pub fn builder() -> KubeEmuBuilder {
        KubeEmuBuilder::default()
    }

    /// A plain-HTTP server on a free loopback port, no authentication.
    pub async fn start() -> Result<KubeEmu, Error> {
        KubeEmuBuilder::default().start().await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA certificate (PEM) clients must trust, when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bearer token the kubeconfig carries, when tokens are required.
    pub fn token(&self) -> Option<&str> {
        self.client_token.as_deref()
    }

    /// A kubeconfig for this server, context `arbor-kube-emu`, namespace `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&Endpoint {
            url: &self.url,
            ca_pem: self.ca_pem.as_deref(),
            token: self.client_token.as_deref(),
            namespace: "default",
        })
    }

    /// A kubeconfig like [`KubeEmu::kubeconfig_yaml`] that authenticates with `token` (for
    /// example one from [`KubeEmu::token_for`]).
    pub fn kubeconfig_yaml_for(&self, token: &str) -> String {
        kubeconfig::render(&Endpoint {
            url: &self.url,
            ca_pem: self.ca_pem.as_deref(),
            token: Some(token),
            namespace: "default",
        })
    }

    /// Mints a bearer token for `user` in `groups` (plus `system:authenticated`, and the
    /// service-account groups when `user` is `system:serviceaccount:<ns>:<name>`).
    pub fn token_for(&self, user: &str, groups: &[&str]) -> String {
        self.shared
            .authenticator
            .issue(Identity::new(user, "", groups))
    }

    /// Mints a bearer token for service account `name` in `namespace`
    /// (`system:serviceaccount:<namespace>:<name>`).
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.token_for(&service_account_username(namespace, name), &[])
    }

    /// The injected faults: add with `inject`, remove with `clear` (see [`crate::faults`]).
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The requests served so far (see [`crate::accounting`]).
    pub fn requests(&self) -> &Requests {
        &self.shared.requests
    }

    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| Error::Io {
            what: format!("writing kubeconfig {}", path.display()),
            source,
        })
    }

    /// The latest resourceVersion the server has handed out.
    pub fn resource_version(&self) -> u64 {
        self.shared.state().store.revision()
    }

    /// Stops accepting, ends open watches, and waits (bounded) for connections to close.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.cancel();
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
        {
            tracing::warn!(%error, "the accept loop ended abnormally");
        }
    }
}

impl Drop for KubeEmu {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
