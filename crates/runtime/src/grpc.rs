//! gRPC servers and channels between Arbor's components.
//!
//! In a cluster every component serves and calls over TLS, and with a CA configured both sides
//! verify each other (mutual TLS). Plaintext exists for the local demo and tests only, so it is
//! refused for any address that is not loopback: a misconfigured Deployment fails at start
//! instead of exposing an unauthenticated API.
//!
//! A component's server is [`listener`] + [`router`]: the process's bounded accept loop
//! ([`crate::listener`]) does TLS (requiring client certificates when a CA is configured), and
//! every call passes the `--grpc-allow` rules ([`crate::authz`]) before its service. [`server`]
//! and [`bind`] (tonic's own transport) remain for test doubles.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{
    Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig,
};

use crate::authz::{self, Authz};
use crate::flags::TlsArgs;
use crate::listener::{Limits, Listener};

/// Why a gRPC server or channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    #[error("cannot read TLS file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "refusing plaintext gRPC on {address}: plaintext is only allowed on loopback; set --tls-cert and --tls-key"
    )]
    PlaintextNotLoopback { address: String },
    #[error("TLS configuration for {address} is invalid: {source}")]
    Tls {
        address: String,
        source: tonic::transport::Error,
    },
    #[error("invalid gRPC endpoint {address:?}: {reason}")]
    InvalidEndpoint { address: String, reason: String },
    #[error("cannot connect to {address}: {source}")]
    Connect {
        address: String,
        source: tonic::transport::Error,
    },
    #[error("TLS material for the gRPC server is invalid: {0}")]
    Material(String),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
}

/// The PEM material of one component: its identity, and the CA its peers chain to.
#[derive(Debug, Clone, Default)]
pub struct TlsMaterial {
    pub cert_pem: Option<String>,
    pub key_pem: Option<String>,
    pub ca_pem: Option<String>,
}

impl TlsMaterial {
    /// Reads the files named by the TLS flags; `None` when no TLS flag is set.
    pub fn load(args: &TlsArgs) -> Result<Option<Self>, GrpcError> {
        if args.cert.is_none() && args.key.is_none() && args.ca.is_none() {
            return Ok(None);
        }
        Ok(Some(Self {
            cert_pem: args.cert.as_deref().map(read).transpose()?,
            key_pem: args.key.as_deref().map(read).transpose()?,
            ca_pem: args.ca.as_deref().map(read).transpose()?,
        }))
    }

    /// Whether this material lets the component serve TLS (a certificate and its key).
    pub fn serves(&self) -> bool {
        self.cert_pem.is_some() && self.key_pem.is_some()
    }

    fn identity(&self) -> Option<Identity> {
        match (&self.cert_pem, &self.key_pem) {
            (Some(cert), Some(key)) => Some(Identity::from_pem(cert, key)),
            _ => None,
        }
    }

    fn ca(&self) -> Option<Certificate> {
        self.ca_pem.as_ref().map(Certificate::from_pem)
    }
}

fn read(path: &Path) -> Result<String, GrpcError> {
    std::fs::read_to_string(path).map_err(|source| GrpcError::ReadFile {
        path: path.to_owned(),
        source,
    })
}

/// A server builder for `addr`: TLS with the component's identity, client certificates
/// required when a CA is configured, plaintext only on loopback.
pub fn server(addr: SocketAddr, tls: Option<&TlsMaterial>) -> Result<Server, GrpcError> {
    let identity = tls.and_then(TlsMaterial::identity);
    let Some(identity) = identity else {
        if !addr.ip().is_loopback() {
            return Err(GrpcError::PlaintextNotLoopback {
                address: addr.to_string(),
            });
        }
        return Ok(Server::builder());
    };
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = tls.and_then(TlsMaterial::ca) {
        config = config.client_ca_root(ca).client_auth_optional(false);
    }
    Server::builder()
        .tls_config(config)
        .map_err(|source| GrpcError::Tls {
            address: addr.to_string(),
            source,
        })
}

/// The rustls configuration of a gRPC server: the component's identity, client certificates
/// of `ca_pem` required when it is set, HTTP/2 only.
pub fn server_tls_config(
    material: &TlsMaterial,
) -> Result<Option<Arc<rustls::ServerConfig>>, GrpcError> {
    let (Some(cert_pem), Some(key_pem)) = (&material.cert_pem, &material.key_pem) else {
        return Ok(None);
    };
    let invalid =
        |what: &str, error: &dyn std::fmt::Display| GrpcError::Material(format!("{what}: {error}"));
    let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("--tls-cert", &e))?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(|e| invalid("--tls-key", &e))?
        .ok_or_else(|| invalid("--tls-key", &"no private key in the file"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("TLS versions", &e))?;
    let builder = match &material.ca_pem {
        Some(ca_pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
                let cert = cert.map_err(|e| invalid("--tls-client-ca", &e))?;
                roots
                    .add(cert)
                    .map_err(|e| invalid("--tls-client-ca", &e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| invalid("--tls-client-ca", &e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| invalid("--tls-cert / --tls-key", &e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// Binds the gRPC listener of a component on `addr` with the process's listener bounds: TLS
/// with the component's material, plaintext only on loopback.
pub async fn listener(
    addr: SocketAddr,
    tls: Option<&TlsMaterial>,
    limits: Limits,
) -> Result<Listener, GrpcError> {
    let config = match tls {
        Some(material) => server_tls_config(material)?,
        None => None,
    };
    if config.is_none() && !addr.ip().is_loopback() {
        return Err(GrpcError::PlaintextNotLoopback {
            address: addr.to_string(),
        });
    }
    Listener::bind("grpc", addr, config, limits)
        .await
        .map_err(|source| GrpcError::Bind {
            address: addr,
            source,
        })
}

/// The router of a component's gRPC services, every call first judged by `authz` (none: off,
/// which is logged).
pub fn router(routes: tonic::service::Routes, authz: Option<Authz>) -> axum::Router {
    let router = routes.prepare().into_axum_router();
    match authz {
        Some(authz) => {
            tracing::info!(rules = %authz.describe(), "gRPC authorization by client certificate");
            let authz = Arc::new(authz);
            router.layer(axum::middleware::from_fn(move |request, next| {
                authz::enforce(authz.clone(), request, next)
            }))
        }
        None => {
            tracing::info!(
                "gRPC authorization off (no --grpc-allow): every client the transport accepts may call every method"
            );
            router
        }
    }
}

/// Binds `addr` for a gRPC server, returning the incoming stream and the bound address.
pub async fn bind(addr: SocketAddr) -> Result<(TcpListenerStream, SocketAddr), GrpcError> {
    let bind_error = |source| GrpcError::Bind {
        address: addr,
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    Ok((TcpListenerStream::new(listener), local))
}

/// `address` with an IPv6 host written in brackets, as a URL needs it. A pod IP put into a URL
/// by hand (the chart's `https://$(POD_IP):9090`) comes out as `https://fd00::1:9090` on a
/// single-stack IPv6 cluster, which is no URL; it reads here as host `fd00::1`, port 9090 (the
/// part after the last colon is the port, so such an address must name its port). Every
/// other address, an IPv6 one already in brackets among them, comes back unchanged.
pub fn bracket_ipv6_host(address: &str) -> Cow<'_, str> {
    let Some((scheme, rest)) = address.split_once("://") else {
        return Cow::Borrowed(address);
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.starts_with('[') || authority.contains('@') {
        return Cow::Borrowed(address);
    }
    match authority.rsplit_once(':') {
        Some((host, port))
            if host.contains(':')
                && host.parse::<Ipv6Addr>().is_ok()
                && port.parse::<u16>().is_ok() =>
        {
            Cow::Owned(format!("{scheme}://[{host}]:{port}{path}"))
        }
        _ => Cow::Borrowed(address),
    }
}

/// An endpoint for `address` (`https://host:port`, or `http://` on loopback), configured
/// with the component's client identity and the CA that the server must chain to.
pub fn endpoint(address: &str, tls: Option<&TlsMaterial>) -> Result<Endpoint, GrpcError> {
    endpoint_verified_as(address, tls, None)
}

/// [`endpoint`], with the server's certificate verified against `server_name` instead of the
/// address's host: another replica reached at its pod IP presents the Service's certificate.
pub fn endpoint_verified_as(
    address: &str,
    tls: Option<&TlsMaterial>,
    server_name: Option<&str>,
) -> Result<Endpoint, GrpcError> {
    let invalid = |reason: String| GrpcError::InvalidEndpoint {
        address: address.to_owned(),
        reason,
    };
    let endpoint = Endpoint::from_shared(address.to_owned()).map_err(|e| invalid(e.to_string()))?;
    let uri = endpoint.uri();
    let host = uri
        .host()
        .ok_or_else(|| invalid("no host".into()))?
        .to_owned();
    match uri.scheme_str() {
        Some("http") => {
            if !is_loopback_host(&host) {
                return Err(GrpcError::PlaintextNotLoopback {
                    address: address.to_owned(),
                });
            }
            Ok(endpoint)
        }
        Some("https") => {
            let name = server_name.unwrap_or_else(|| host.trim_matches(['[', ']']));
            let mut config = ClientTlsConfig::new().domain_name(name);
            if let Some(material) = tls {
                if let Some(ca) = material.ca() {
                    config = config.ca_certificate(ca);
                }
                if let Some(identity) = material.identity() {
                    config = config.identity(identity);
                }
            }
            endpoint
                .tls_config(config)
                .map_err(|source| GrpcError::Tls {
                    address: address.to_owned(),
                    source,
                })
        }
        other => Err(invalid(format!("scheme {other:?} is not http or https"))),
    }
}

/// Connects at once, so that a wrong address or TLS problem is reported where it happens.
pub async fn connect(address: &str, tls: Option<&TlsMaterial>) -> Result<Channel, GrpcError> {
    endpoint(address, tls)?
        .connect()
        .await
        .map_err(|source| GrpcError::Connect {
            address: address.to_owned(),
            source,
        })
}

/// A channel that connects on first use, for components that start before their peers.
pub fn connect_lazy(address: &str, tls: Option<&TlsMaterial>) -> Result<Channel, GrpcError> {
    Ok(endpoint(address, tls)?.connect_lazy())
}

fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_pod_ip_put_into_a_url_is_bracketed() {
        assert_eq!(
            bracket_ipv6_host("https://fd00:10:244::5:9090"),
            "https://[fd00:10:244::5]:9090"
        );
        assert_eq!(
            bracket_ipv6_host("http://::1:8080/x"),
            "http://[::1]:8080/x"
        );
        for unchanged in [
            "https://[fd00::5]:9090",
            "https://10.0.0.5:9090",
            "https://gitsync.arbor-system.svc:9090",
            // No port: the last group is read as part of the address, not bracketed.
            "https://fd00::5",
            "fd00::5:9090",
        ] {
            assert_eq!(bracket_ipv6_host(unchanged), unchanged);
        }
        let bracketed = bracket_ipv6_host("https://fd00::5:9090");
        let endpoint = endpoint_verified_as(&bracketed, None, Some("gitsync.arbor-system.svc"))
            .expect("a valid endpoint");
        assert_eq!(endpoint.uri().host(), Some("[fd00::5]"));
        assert_eq!(endpoint.uri().port_u16(), Some(9090));
    }

    #[test]
    fn plaintext_server_is_refused_off_loopback() {
        let err = server("0.0.0.0:9090".parse().unwrap(), None).unwrap_err();
        assert!(
            matches!(err, GrpcError::PlaintextNotLoopback { .. }),
            "{err}"
        );
        assert!(server("127.0.0.1:9090".parse().unwrap(), None).is_ok());
        assert!(server("[::1]:9090".parse().unwrap(), None).is_ok());
    }

    #[test]
    fn plaintext_channel_is_refused_off_loopback() {
        let err = endpoint("http://gitsync.arbor-system.svc:9090", None).unwrap_err();
        assert!(
            err.to_string().contains("only allowed on loopback"),
            "{err}"
        );
        assert!(endpoint("http://127.0.0.1:9090", None).is_ok());
        assert!(endpoint("http://localhost:9090", None).is_ok());
        assert!(endpoint("http://[::1]:9090", None).is_ok());
    }

    #[test]
    fn unknown_scheme_is_an_invalid_endpoint() {
        let err = endpoint("ftp://127.0.0.1:9090", None).unwrap_err();
        assert!(matches!(err, GrpcError::InvalidEndpoint { .. }), "{err}");
    }

    #[test]
    fn missing_tls_file_names_the_path() {
        let args = TlsArgs {
            cert: Some("/nonexistent/cert.pem".into()),
            key: Some("/nonexistent/key.pem".into()),
            ca: None,
        };
        let err = TlsMaterial::load(&args).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
    }
}
