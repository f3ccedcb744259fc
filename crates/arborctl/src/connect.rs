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
}

/// Where to reach the services, every setting decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub gitsync_addr: String,
    pub hierarchy_addr: String,
    pub observer_addr: String,
    pub policy_addr: String,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    /// The context the settings not given by flag or variable came from.
    pub context: Option<String>,
}

impl ConnectionArgs {
    /// Every setting decided: flag or variable, else `context`, else the default.
    pub fn resolve_with(&self, context: Option<&Context>) -> Result<Resolved, ContextError> {
        let pick =
            |given: &Option<String>, from_context: Option<&Option<String>>, default: &str| {
                given
                    .clone()
                    .or_else(|| from_context.cloned().flatten())
                    .unwrap_or_else(|| default.to_owned())
            };
        // A certificate and its key travel together: a flag for one of them never pairs with
        // the context's other.
        let (tls_cert, tls_key) = match (&self.tls_cert, &self.tls_key) {
            (None, None) => (
                context.and_then(|c| c.tls_cert.clone()),
                context.and_then(|c| c.tls_key.clone()),
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
                context.map(|c| &c.gitsync_addr),
                DEFAULT_GITSYNC_ADDR,
            ),
            hierarchy_addr: pick(
                &self.hierarchy_addr,
                context.map(|c| &c.hierarchy_addr),
                DEFAULT_HIERARCHY_ADDR,
            ),
            observer_addr: pick(
                &self.observer_addr,
                context.map(|c| &c.observer_addr),
                DEFAULT_OBSERVER_ADDR,
            ),
            policy_addr: pick(
                &self.policy_addr,
                context.map(|c| &c.policy_addr),
                DEFAULT_POLICY_ADDR,
            ),
            tls_cert,
            tls_key,
            tls_ca: self
                .tls_ca
                .clone()
                .or_else(|| context.and_then(|c| c.tls_ca.clone())),
            context: context.map(|c| c.name.clone()),
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
    /// The address of `service`.
    pub fn address(&self, service: Service) -> &str {
        match service {
            Service::Sync => &self.gitsync_addr,
            Service::Hierarchy => &self.hierarchy_addr,
            Service::Observer => &self.observer_addr,
            Service::Policy => &self.policy_addr,
        }
    }

    /// Connects to `service` now, so that an unreachable service or a TLS problem is reported
    /// before any request is made.
    pub async fn connect(&self, service: Service) -> Result<Remote, RemoteError> {
        let address = self.address(service).to_owned();
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
