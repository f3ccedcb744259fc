//! Where Arbor's controllers listen, how to reach them, and what to say when that fails.
//!
//! Every remote command flattens [`ConnectionArgs`]: one address per service and the client's
//! TLS material. The defaults are distinct loopback ports so that a local demo can run all four
//! controllers side by side:
//!
//! | service | served by | flag | env | default |
//! |---|---|---|---|---|
//! | SyncService | arbor-gitsync | `--gitsync-addr` | `ARBOR_GITSYNC_ADDR` | `http://127.0.0.1:9090` |
//! | HierarchyService | arbor-hierarchy | `--hierarchy-addr` | `ARBOR_HIERARCHY_ADDR` | `http://127.0.0.1:9091` |
//! | ObserverService | arbor-observer | `--observer-addr` | `ARBOR_OBSERVER_ADDR` | `http://127.0.0.1:9092` |
//! | PolicyService | arbor-webhook | `--policy-addr` | `ARBOR_POLICY_ADDR` | `http://127.0.0.1:9093` |
//!
//! `http://` is plaintext and only accepted on loopback; `https://` uses TLS, verified against
//! `--tls-ca`, presenting `--tls-cert`/`--tls-key` when the servers require client
//! certificates (mutual TLS, as in a cluster).
//!
//! With a cluster instead of addresses (`--kubeconfig` and/or `--context`, or an arborctl
//! context naming a kubeconfig), a service without an address is reached through the API
//! server's port-forward to one of its ready pods, with the operators' certificate from the
//! chart's Secret ([`crate::cluster`]). Given by flag, the cluster wins over the arborctl
//! context's addresses and TLS files (they belong to another installation); an address given
//! by flag or `ARBOR_*` variable still wins for its own service.
//!
//! Failures become a [`RemoteError`] whose message names the service, its address and the
//! cause in words an operator can act on (connection refused, unknown CA, server name mismatch,
//! missing client certificate); the underlying error chain stays attached as its `source`, for
//! `--verbose`.

use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use arbor_runtime::flags::TlsArgs;
use arbor_runtime::grpc::{self, GrpcError, TlsMaterial};
use clap::Args;
use rustls::{AlertDescription, CertificateError};
use tonic::transport::Channel;

use crate::cluster::{ClusterError, ClusterTarget, DEFAULT_NAMESPACE, DEFAULT_RELEASE, Forward};
use crate::context::{Context, ContextError};

/// Default address of arbor-gitsync's SyncService.
pub const DEFAULT_GITSYNC_ADDR: &str = "http://127.0.0.1:9090";
/// Default address of arbor-hierarchy's HierarchyService.
pub const DEFAULT_HIERARCHY_ADDR: &str = "http://127.0.0.1:9091";
/// Default address of arbor-observer's ObserverService.
pub const DEFAULT_OBSERVER_ADDR: &str = "http://127.0.0.1:9092";
/// Default address of arbor-webhook's PolicyService.
pub const DEFAULT_POLICY_ADDR: &str = "http://127.0.0.1:9093";

/// A connection attempt that gets no answer at all is given up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One of the gRPC services arborctl talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Sync,
    Hierarchy,
    Observer,
    Policy,
}

impl Service {
    /// The flag that sets the service's address, for hints in error messages.
    fn flag(self) -> &'static str {
        match self {
            Self::Sync => "--gitsync-addr",
            Self::Hierarchy => "--hierarchy-addr",
            Self::Observer => "--observer-addr",
            Self::Policy => "--policy-addr",
        }
    }

    /// The chart's name of the component serving it (`<fullname>-<component>`).
    pub fn component(self) -> &'static str {
        match self {
            Self::Sync => "gitsync",
            Self::Hierarchy => "hierarchy",
            Self::Observer => "observer",
            Self::Policy => "webhook",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sync => "SyncService (arbor-gitsync)",
            Self::Hierarchy => "HierarchyService (arbor-hierarchy)",
            Self::Observer => "ObserverService (arbor-observer)",
            Self::Policy => "PolicyService (arbor-webhook)",
        })
    }
}

/// Addresses of the services and the client's TLS material. Each setting comes from its flag,
/// else its `ARBOR_*` variable, else the selected context of the config file
/// ([`crate::context`]), else the loopback default.
#[derive(Debug, Clone, Default, Args)]
pub struct ConnectionArgs {
    /// The context of the arborctl config file to use instead of its current context.
    #[arg(long, env = "ARBOR_CONTEXT")]
    pub arbor_context: Option<String>,

    /// Address of arbor-gitsync's SyncService (http:// only on loopback, else https://)
    /// [default: the context's, else http://127.0.0.1:9090].
    #[arg(long, env = "ARBOR_GITSYNC_ADDR")]
    pub gitsync_addr: Option<String>,

    /// Address of arbor-hierarchy's HierarchyService [default: the context's, else
    /// http://127.0.0.1:9091].
    #[arg(long, env = "ARBOR_HIERARCHY_ADDR")]
    pub hierarchy_addr: Option<String>,

    /// Address of arbor-observer's ObserverService [default: the context's, else
    /// http://127.0.0.1:9092].
    #[arg(long, env = "ARBOR_OBSERVER_ADDR")]
    pub observer_addr: Option<String>,

    /// Address of arbor-webhook's PolicyService [default: the context's, else
    /// http://127.0.0.1:9093].
    #[arg(long, env = "ARBOR_POLICY_ADDR")]
    pub policy_addr: Option<String>,

    /// PEM client certificate presented to the services (mutual TLS).
    #[arg(long, env = "ARBOR_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "ARBOR_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// PEM CA bundle the services' certificates must chain to.
    #[arg(long, env = "ARBOR_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// Reach the services through this kubeconfig's API server (port-forward to their pods)
    /// instead of addresses.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (implies reaching the services through the API server).
    #[arg(long)]
    pub context: Option<String>,

    /// The namespace Arbor is installed in [default: the context's, else arbor-system].
    #[arg(long, env = "ARBOR_NAMESPACE")]
    pub arbor_namespace: Option<String>,

    /// The Helm release name of Arbor [default: the context's, else arbor].
    #[arg(long, env = "ARBOR_RELEASE")]
    pub release: Option<String>,
}

/// Where to reach the services, every setting decided. A service without an address is
/// reached through `cluster` (one of the two is always there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub gitsync_addr: Option<String>,
    pub hierarchy_addr: Option<String>,
    pub observer_addr: Option<String>,
    pub policy_addr: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    /// The context the settings not given by flag or variable came from.
    pub context: Option<String>,
    /// The cluster Arbor runs in, when known: services without an address are reached
    /// through its API server.
    pub cluster: Option<ClusterTarget>,
}

impl ConnectionArgs {
    /// Every setting decided: flag or variable, else `context`, else the default (see the
    /// module docs for how a cluster takes the place of the defaults).
    pub fn resolve_with(&self, context: Option<&Context>) -> Result<Resolved, ContextError> {
        // A cluster named by flag is another installation than the context's: its addresses
        // and TLS files are not used for it.
        let cluster_by_flag = self.kubeconfig.is_some() || self.context.is_some();
        let addresses_from = if cluster_by_flag { None } else { context };
        let cluster = if cluster_by_flag {
            Some((self.kubeconfig.clone(), self.context.clone()))
        } else {
            context
                .filter(|c| c.kubeconfig.is_some() || c.kube_context.is_some())
                .map(|c| (c.kubeconfig.clone(), c.kube_context.clone()))
        };
        let cluster = cluster.map(|(kubeconfig, kube_context)| ClusterTarget {
            kubeconfig,
            kube_context,
            namespace: self
                .arbor_namespace
                .clone()
                .or_else(|| context.and_then(|c| c.arbor_namespace.clone()))
                .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
            release: self
                .release
                .clone()
                .or_else(|| context.and_then(|c| c.release.clone()))
                .unwrap_or_else(|| DEFAULT_RELEASE.to_owned()),
        });
        let pick =
            |given: &Option<String>, from_context: Option<&Option<String>>, default: &str| {
                given
                    .clone()
                    .or_else(|| from_context.cloned().flatten())
                    .or_else(|| cluster.is_none().then(|| default.to_owned()))
            };
        // A certificate and its key travel together: a flag for one of them never pairs with
        // the context's other.
        let (tls_cert, tls_key) = match (&self.tls_cert, &self.tls_key) {
            (None, None) => (
                addresses_from.and_then(|c| c.tls_cert.clone()),
                addresses_from.and_then(|c| c.tls_key.clone()),
            ),
            (Some(cert), Some(key)) => (Some(cert.clone()), Some(key.clone())),
            (Some(_), None) => {
                return Err(ContextError::UnpairedTls {
                    given: "--tls-cert (ARBOR_TLS_CERT)",
                    missing: "--tls-key (ARBOR_TLS_KEY)",
                });
            }
            (None, Some(_)) => {
                return Err(ContextError::UnpairedTls {
                    given: "--tls-key (ARBOR_TLS_KEY)",
                    missing: "--tls-cert (ARBOR_TLS_CERT)",
                });
            }
        };
        Ok(Resolved {
            gitsync_addr: pick(
                &self.gitsync_addr,
                addresses_from.map(|c| &c.gitsync_addr),
                DEFAULT_GITSYNC_ADDR,
            ),
            hierarchy_addr: pick(
                &self.hierarchy_addr,
                addresses_from.map(|c| &c.hierarchy_addr),
                DEFAULT_HIERARCHY_ADDR,
            ),
            observer_addr: pick(
                &self.observer_addr,
                addresses_from.map(|c| &c.observer_addr),
                DEFAULT_OBSERVER_ADDR,
            ),
            policy_addr: pick(
                &self.policy_addr,
                addresses_from.map(|c| &c.policy_addr),
                DEFAULT_POLICY_ADDR,
            ),
            tls_cert,
            tls_key,
            tls_ca: self
                .tls_ca
                .clone()
                .or_else(|| addresses_from.and_then(|c| c.tls_ca.clone())),
            context: context.map(|c| c.name.clone()),
            cluster,
        })
    }

    /// Every setting decided, with the context of the config file.
    pub fn resolve(&self) -> Result<Resolved, ContextError> {
        let context = crate::context::selected(self.arbor_context.as_deref())?;
        self.resolve_with(context.as_ref())
    }

    /// Connects to `service` now, so that an unreachable service or a TLS problem is reported
    /// before any request is made.
    pub async fn connect(&self, service: Service) -> anyhow::Result<Remote> {
        Ok(self.resolve()?.connect(service).await?)
    }
}

impl Resolved {
    /// The address of `service`; none when it is reached through the cluster.
    pub fn address(&self, service: Service) -> Option<&str> {
        match service {
            Service::Sync => self.gitsync_addr.as_deref(),
            Service::Hierarchy => self.hierarchy_addr.as_deref(),
            Service::Observer => self.observer_addr.as_deref(),
            Service::Policy => self.policy_addr.as_deref(),
        }
    }

    /// Connects to `service` now, so that an unreachable service or a TLS problem is reported
    /// before any request is made.
    pub async fn connect(&self, service: Service) -> Result<Remote, RemoteError> {
        match (self.address(service), &self.cluster) {
            (Some(address), _) => self.dial(service, address).await,
            (None, Some(cluster)) => self.through_cluster(service, cluster).await,
            (None, None) => self.dial(service, default_address(service)).await,
        }
    }

    async fn dial(&self, service: Service, address: &str) -> Result<Remote, RemoteError> {
        let address = address.to_owned();
        let tls_args = TlsArgs {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
        };
        let setup = |source| RemoteError::Setup {
            service,
            address: address.clone(),
            source,
        };
        let tls = TlsMaterial::load(&tls_args).map_err(setup)?;
        let anonymous_tls = address.starts_with("https://") && self.tls_cert.is_none();
        let endpoint = grpc::endpoint(&address, tls.as_ref())
            .map_err(setup)?
            .connect_timeout(CONNECT_TIMEOUT);
        match endpoint.connect().await {
            Ok(channel) => Ok(Remote {
                service,
                address,
                channel,
                anonymous_tls,
            }),
            Err(source) => Err(RemoteError::Unreachable {
                service,
                cause: Cause::of(&source).without_client_certificate(anonymous_tls),
                context: self.context.clone(),
                address,
                source,
            }),
        }
    }

    /// Through the API server's port-forward to a ready pod, TLS verified for the Service's
    /// DNS name, with the operators' certificate unless TLS files were named.
    async fn through_cluster(
        &self,
        service: Service,
        cluster: &ClusterTarget,
    ) -> Result<Remote, RemoteError> {
        let in_cluster = |source| RemoteError::Cluster { service, source };
        let files = TlsArgs {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
        };
        let need_secret = self.tls_cert.is_none() || self.tls_ca.is_none();
        let forward = Forward::open(cluster, service, need_secret)
            .await
            .map_err(in_cluster)?;
        let address = forward.describe();
        let setup = |source| RemoteError::Setup {
            service,
            address: address.clone(),
            source,
        };
        let given = TlsMaterial::load(&files)
            .map_err(setup)?
            .unwrap_or_default();
        let secret = forward.secret_material.clone().unwrap_or_default();
        let (cert_pem, key_pem) = match given.cert_pem {
            Some(cert) => (Some(cert), given.key_pem),
            None => (secret.cert_pem, secret.key_pem),
        };
        let material = TlsMaterial {
            cert_pem,
            key_pem,
            ca_pem: given.ca_pem.or(secret.ca_pem),
        };
        let endpoint = grpc::endpoint(&forward.url(), Some(&material))
            .map_err(setup)?
            .connect_timeout(CONNECT_TIMEOUT);
        match endpoint.connect_with_connector(forward.connector()).await {
            Ok(channel) => Ok(Remote {
                service,
                address,
                channel,
                anonymous_tls: false,
            }),
            Err(source) => Err(match forward.pod_side_error().await {
                Some(pod_side) => in_cluster(pod_side),
                None => RemoteError::Unreachable {
                    service,
                    cause: Cause::of(&source),
                    context: self.context.clone(),
                    address,
                    source,
                },
            }),
        }
    }
}

/// The loopback address `service` has when nothing else says where it is.
fn default_address(service: Service) -> &'static str {
    match service {
        Service::Sync => DEFAULT_GITSYNC_ADDR,
        Service::Hierarchy => DEFAULT_HIERARCHY_ADDR,
        Service::Observer => DEFAULT_OBSERVER_ADDR,
        Service::Policy => DEFAULT_POLICY_ADDR,
    }
}

/// An open channel to one service, remembering which one for error messages.
#[derive(Debug, Clone)]
pub struct Remote {
    service: Service,
    address: String,
    channel: Channel,
    /// TLS without a client certificate: a server requiring one drops the connection.
    anonymous_tls: bool,
}

impl Remote {
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The error for a failed call of `rpc` on this service.
    pub fn call_failed(&self, rpc: &'static str, status: tonic::Status) -> RemoteError {
        RemoteError::Call {
            service: self.service,
            address: self.address.clone(),
            rpc,
            cause: Cause::of_status(&status).without_client_certificate(self.anonymous_tls),
            source: status,
        }
    }
}

/// A remote command failed to talk to a service.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot connect to {service} at {address}: {source}")]
    Setup {
        service: Service,
        address: String,
        source: GrpcError,
    },
    #[error("cannot reach {service} at {address}: {cause}{hint}", hint = unreachable_hint(*service, cause, context.as_deref()))]
    Unreachable {
        service: Service,
        address: String,
        cause: Cause,
        /// The context the address came from, if it was not given by flag or variable.
        context: Option<String>,
        source: tonic::transport::Error,
    },
    #[error("cannot reach {service} through the cluster: {source}")]
    Cluster {
        service: Service,
        source: ClusterError,
    },
    #[error("{service} at {address}: {rpc} failed: {cause}")]
    Call {
        service: Service,
        address: String,
        rpc: &'static str,
        cause: Cause,
        source: tonic::Status,
    },
}

fn unreachable_hint(service: Service, cause: &Cause, context: Option<&str>) -> String {
    match (cause, context) {
        (Cause::Refused | Cause::TimedOut, None) => {
            format!(" (is it running? set its address with {})", service.flag())
        }
        (Cause::Refused | Cause::TimedOut, Some(context)) => format!(
            " (is it running? the address comes from arborctl context {context:?}; \
             override it with {} or change the context with `arborctl context set`)",
            service.flag()
        ),
        _ => String::new(),
    }
}

/// Why a connection or call failed, in the terms an operator acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    Refused,
    TimedOut,
    /// The server's certificate does not chain to `--tls-ca`.
    UnknownCa,
    /// The server's certificate does not name the host of the address.
    ServerNameMismatch,
    /// The server requires a client certificate and none was presented.
    MissingClientCertificate,
    /// The server dropped a TLS connection on which no client certificate was presented; the
    /// race between its alert and the client's next write decides whether the alert arrives.
    LikelyMissingClientCertificate,
    /// The server refused the client certificate that was presented.
    ClientCertificateRejected,
    /// Another TLS failure, as rustls words it.
    Tls(String),
    /// The server answered with a gRPC error status.
    Status {
        code: tonic::Code,
        message: String,
    },
    /// Anything else: the innermost error's message.
    Other(String),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused => f.write_str("connection refused"),
            Self::TimedOut => write!(f, "no answer within {}s", CONNECT_TIMEOUT.as_secs()),
            Self::UnknownCa => f.write_str(
                "TLS: unknown CA: the server's certificate is not signed by a trusted CA; pass the CA that issued it with --tls-ca",
            ),
            Self::ServerNameMismatch => f.write_str(
                "TLS: server name mismatch: the server's certificate is not valid for the host in the address",
            ),
            Self::MissingClientCertificate => f.write_str(
                "TLS: missing client certificate: the server requires one; pass --tls-cert and --tls-key",
            ),
            Self::LikelyMissingClientCertificate => f.write_str(
                "TLS: the server closed the connection, most likely for a missing client certificate; pass --tls-cert and --tls-key",
            ),
            Self::ClientCertificateRejected => f.write_str(
                "TLS: the server rejected the client certificate (it does not chain to the server's CA)",
            ),
            Self::Tls(message) => write!(f, "TLS: {message}"),
            Self::Status { code, message } => write!(f, "{code:?}: {message}"),
            Self::Other(message) => f.write_str(message),
        }
    }
}

impl Cause {
    /// Classifies a transport error by the first cause in its chain that says something.
    fn of(error: &(dyn StdError + 'static)) -> Self {
        let mut innermost = error.to_string();
        let mut current = Some(error);
        while let Some(err) = current {
            if let Some(cause) = classify_one(err) {
                return cause;
            }
            innermost = err.to_string();
            current = err.source();
        }
        Self::Other(innermost)
    }

    /// Over TLS without a client certificate, a connection the server broke off without a
    /// clearer cause is put down to the missing certificate.
    fn without_client_certificate(self, anonymous_tls: bool) -> Self {
        match self {
            Self::Other(_) if anonymous_tls => Self::LikelyMissingClientCertificate,
            cause => cause,
        }
    }

    /// A status the server sent is its own cause; one with a source was made by the client
    /// when the connection failed under the call, and that failure is the cause.
    fn of_status(status: &tonic::Status) -> Self {
        match status.source() {
            Some(transport) => Self::of(transport),
            None => Self::Status {
                code: status.code(),
                message: status.message().to_owned(),
            },
        }
    }
}

fn classify_one(err: &(dyn StdError + 'static)) -> Option<Cause> {
    if let Some(tls) = err.downcast_ref::<rustls::Error>() {
        return Some(classify_tls(tls));
    }
    let io = err.downcast_ref::<std::io::Error>()?;
    // io::Error hides a wrapped error from `source()`; rustls errors travel that way.
    if let Some(tls) = io
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return Some(classify_tls(tls));
    }
    match io.kind() {
        std::io::ErrorKind::ConnectionRefused => Some(Cause::Refused),
        std::io::ErrorKind::TimedOut => Some(Cause::TimedOut),
        _ => received_alert(&io.to_string()).map(classify_alert),
    }
}

/// An alert the server sent after the handshake looked complete (TLS 1.3 checks the client
/// certificate then) reaches the client as a read error that only keeps rustls's message,
/// like "received fatal alert: CertificateRequired".
fn received_alert(message: &str) -> Option<AlertDescription> {
    let name = message.strip_prefix("received fatal alert: ")?;
    [
        AlertDescription::CertificateRequired,
        AlertDescription::UnknownCA,
        AlertDescription::BadCertificate,
        AlertDescription::CertificateUnknown,
    ]
    .into_iter()
    .find(|alert| format!("{alert:?}") == name)
}

fn classify_tls(error: &rustls::Error) -> Cause {
    match error {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => Cause::UnknownCa,
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => Cause::ServerNameMismatch,
        rustls::Error::AlertReceived(alert) => classify_alert(*alert),
        other => Cause::Tls(other.to_string()),
    }
}

/// What the server's alert says about the client's certificate.
fn classify_alert(alert: AlertDescription) -> Cause {
    match alert {
        AlertDescription::CertificateRequired => Cause::MissingClientCertificate,
        AlertDescription::UnknownCA
        | AlertDescription::BadCertificate
        | AlertDescription::CertificateUnknown => Cause::ClientCertificateRejected,
        other => Cause::Tls(format!("the server sent the alert {other:?}")),
    }
}

/// Prints an error the way arborctl reports failures: remote errors as their one friendly
/// line (with the full cause chain when `verbose`), any other error with its whole chain.
pub fn report(error: &anyhow::Error, verbose: bool) {
    eprintln!("error: {error}");
    if verbose || error.downcast_ref::<RemoteError>().is_none() {
        for cause in error.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_errors_wrapped_in_io_errors_are_classified() {
        let wrapped = std::io::Error::other(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ));
        assert_eq!(Cause::of(&wrapped), Cause::UnknownCa);
        let alert = std::io::Error::other(rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired,
        ));
        assert_eq!(Cause::of(&alert), Cause::MissingClientCertificate);
    }

    #[test]
    fn an_alert_known_only_by_its_message_is_classified() {
        let after_handshake = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "received fatal alert: CertificateRequired",
        );
        assert_eq!(Cause::of(&after_handshake), Cause::MissingClientCertificate);
        let rejected = std::io::Error::other("received fatal alert: UnknownCA");
        assert_eq!(Cause::of(&rejected), Cause::ClientCertificateRejected);
    }

    #[test]
    fn an_unclassified_chain_reports_its_innermost_message() {
        let error = anyhow::anyhow!("disk on fire").context("outer");
        let boxed: Box<dyn StdError + 'static> = error.into();
        assert_eq!(
            Cause::of(boxed.as_ref()),
            Cause::Other("disk on fire".into())
        );
    }

    fn demo_context() -> Context {
        Context {
            name: "arbor-demo".into(),
            gitsync_addr: Some("https://127.0.0.1:4001".into()),
            tls_cert: Some("/demo/arborctl.crt".into()),
            tls_key: Some("/demo/arborctl.key".into()),
            tls_ca: Some("/demo/ca.crt".into()),
            kubeconfig: Some("/demo/kubeconfig".into()),
            ..Context::default()
        }
    }

    #[test]
    fn a_kubeconfig_alone_reaches_every_service_through_the_cluster() {
        let args = ConnectionArgs {
            kubeconfig: Some("/home/me/.kube/config".into()),
            ..ConnectionArgs::default()
        };
        let resolved = args.resolve_with(None).unwrap();
        for service in [
            Service::Sync,
            Service::Hierarchy,
            Service::Observer,
            Service::Policy,
        ] {
            assert_eq!(resolved.address(service), None, "{service}");
        }
        let cluster = resolved.cluster.unwrap();
        assert_eq!(cluster.namespace, "arbor-system");
        assert_eq!(cluster.release, "arbor");
        assert_eq!(cluster.kube_context, None);
    }

    #[test]
    fn a_context_with_addresses_and_a_kubeconfig_dials_the_addresses() {
        let resolved = ConnectionArgs::default()
            .resolve_with(Some(&demo_context()))
            .unwrap();
        assert_eq!(
            resolved.address(Service::Sync),
            Some("https://127.0.0.1:4001")
        );
        // What the context does not address is reached through its cluster.
        assert_eq!(resolved.address(Service::Observer), None);
        assert!(resolved.cluster.is_some());
    }

    #[test]
    fn a_cluster_given_by_flag_ignores_the_contexts_addresses_and_files() {
        let args = ConnectionArgs {
            context: Some("prod".into()),
            arbor_namespace: Some("platform".into()),
            ..ConnectionArgs::default()
        };
        let resolved = args.resolve_with(Some(&demo_context())).unwrap();
        assert_eq!(resolved.address(Service::Sync), None);
        assert_eq!(resolved.tls_cert, None);
        assert_eq!(resolved.tls_ca, None);
        let cluster = resolved.cluster.unwrap();
        assert_eq!(cluster.kube_context.as_deref(), Some("prod"));
        assert_eq!(cluster.kubeconfig, None);
        assert_eq!(cluster.namespace, "platform");
    }

    #[test]
    fn without_a_cluster_the_loopback_defaults_stay() {
        let resolved = ConnectionArgs::default().resolve_with(None).unwrap();
        assert_eq!(resolved.address(Service::Policy), Some(DEFAULT_POLICY_ADDR));
        assert_eq!(resolved.cluster, None);
    }

    #[test]
    fn a_plain_status_is_its_own_cause() {
        let status = tonic::Status::not_found("no source GitTrack/a/b");
        assert_eq!(
            Cause::of_status(&status),
            Cause::Status {
                code: tonic::Code::NotFound,
                message: "no source GitTrack/a/b".into()
            }
        );
    }
}
