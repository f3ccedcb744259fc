//! Calling a webhook: resolve its URL or service to an address, connect (TLS verified against
//! exactly the configuration's caBundle), POST the AdmissionReview, read the answer — all within
//! the webhook's timeout.
//!
//! There is no cluster DNS, so a `service` reference is looked up in the server's map of
//! `namespace/name:port` → local address; TLS still verifies the certificate for
//! `<name>.<namespace>.svc`, the name kube-apiserver uses. An `https` URL without a caBundle
//! fails: the emulator trusts no system roots. A plain `http` URL is accepted (kube-apiserver
//! refuses those) so a test may skip TLS when TLS is not what it tests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::config::Destination;

/// A resolved webhook address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as kube-apiserver would show it in errors.
    pub url: String,
    tls: bool,
    /// `host:port` to connect to.
    connect: String,
    /// The name the certificate must carry (and the Host header).
    host: String,
    path_and_query: String,
}

/// `scheme://host[:port]/path?query` split into its parts.
fn split_url(url: &str) -> Result<(bool, String, u16, String), String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(format!("unsupported URL {url:?}: expected https://"));
    };
    let (authority, path) = rest
        .find(['/', '?'])
        .map_or((rest, "/"), |at| rest.split_at(at));
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("bad host in {url:?}"))?;
        (host.to_owned(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (authority.to_owned(), None),
        }
    };
    let port = match port {
        Some(port) => port.parse().map_err(|_| format!("bad port in {url:?}"))?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(format!("no host in {url:?}"));
    }
    Ok((tls, host, port, path))
}

fn with_timeout(path: &str, timeout: Duration) -> String {
    let separator = if path.contains('?') { '&' } else { '?' };
    format!("{path}{separator}timeout={}s", timeout.as_secs())
}

/// Where to send a webhook's reviews.
pub fn resolve(
    destination: &Destination,
    services: &HashMap<String, String>,
    timeout: Duration,
) -> Result<Endpoint, String> {
    match destination {
        Destination::Url(url) => {
            let (tls, host, port, path) = split_url(url)?;
            let path_and_query = with_timeout(&path, timeout);
            let scheme = if tls { "https" } else { "http" };
            let connect = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            Ok(Endpoint {
                url: format!("{scheme}://{connect}{path_and_query}"),
                tls,
                connect,
                host,
                path_and_query,
            })
        }
        Destination::Service {
            namespace,
            name,
            path,
            port,
        } => {
            let key = service_key(namespace, name, *port);
            let address = services.get(&key).ok_or_else(|| {
                format!("service {key} has no address (arbor-kube-emu resolves services through --service-address)")
            })?;
            let host = format!("{name}.{namespace}.svc");
            let path = if path.is_empty() { "/" } else { path };
            let path_and_query = with_timeout(path, timeout);
            Ok(Endpoint {
                url: format!("https://{host}:{port}{path_and_query}"),
                tls: true,
                connect: address.clone(),
                host,
                path_and_query,
            })
        }
    }
}

/// The key of the service address map.
pub fn service_key(namespace: &str, name: &str, port: u16) -> String {
    format!("{namespace}/{name}:{port}")
}

fn tls_connector(ca_pem: &[u8]) -> Result<tokio_rustls::TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls_pemfile::certs(&mut &ca_pem[..]) {
        let certificate = certificate.map_err(|error| format!("reading caBundle: {error}"))?;
        roots
            .add(certificate)
            .map_err(|error| format!("caBundle certificate rejected: {error}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle holds no PEM certificate".into());
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| error.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// POSTs `body` and returns the response body; any failure is described for the error message.
pub async fn post(
    endpoint: &Endpoint,
    ca_pem: Option<&[u8]>,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let call = exchange(endpoint, ca_pem, body);
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "context deadline exceeded (timeout {}s)",
            timeout.as_secs()
        )),
    }
}

async fn exchange(
    endpoint: &Endpoint,
    ca_pem: Option<&[u8]>,
    body: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let stream = TcpStream::connect(&endpoint.connect)
        .await
        .map_err(|error| format!("dial tcp {}: {error}", endpoint.connect))?;
    if !endpoint.tls {
        return send(stream, endpoint, body).await;
    }
    let ca_pem = ca_pem.ok_or("tls: failed to verify certificate: x509: certificate signed by unknown authority (no caBundle)")?;
    let connector = tls_connector(ca_pem)?;
    let server_name = ServerName::try_from(endpoint.host.clone())
        .map_err(|error| format!("invalid server name {:?}: {error}", endpoint.host))?;
    let stream = connector
        .connect(server_name, stream)
        .await
        .map_err(|error| format!("tls: failed to verify certificate: {error}"))?;
    send(stream, endpoint, body).await
}

async fn send<S>(stream: S, endpoint: &Endpoint, body: Vec<u8>) -> Result<Vec<u8>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| error.to_string())?;
    let driver = tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "webhook connection ended with an error");
        }
    });
    let request = Request::post(&endpoint.path_and_query)
        .header(header::HOST, &endpoint.host)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|error| error.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|error| error.to_string())?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|error| format!("reading the response: {error}"))?
        .to_bytes();
    driver.abort();
    if !status.is_success() {
        return Err(format!(
            "the server responded with HTTP status {}",
            status.as_u16()
        ));
    }
    Ok(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_services_resolve_with_the_timeout_appended() {
        let timeout = Duration::from_secs(10);
        let url = resolve(
            &Destination::Url("https://127.0.0.1:8443/validate".into()),
            &HashMap::new(),
            timeout,
        )
        .expect("resolves");
        assert_eq!(url.url, "https://127.0.0.1:8443/validate?timeout=10s");
        assert_eq!(url.connect, "127.0.0.1:8443");
        let services =
            HashMap::from([(service_key("ns", "hook", 443), "127.0.0.1:9000".to_owned())]);
        let service = Destination::Service {
            namespace: "ns".into(),
            name: "hook".into(),
            path: "/v".into(),
            port: 443,
        };
        let endpoint = resolve(&service, &services, timeout).expect("resolves");
        assert_eq!(endpoint.host, "hook.ns.svc");
        assert_eq!(endpoint.connect, "127.0.0.1:9000");
        let missing = Destination::Service {
            namespace: "ns".into(),
            name: "other".into(),
            path: String::new(),
            port: 443,
        };
        assert!(
            resolve(&missing, &services, timeout)
                .unwrap_err()
                .contains("ns/other:443")
        );
        assert!(resolve(&Destination::Url("ftp://x".into()), &services, timeout).is_err());
    }
}
