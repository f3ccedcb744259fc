//! TLS for the HTTPS listener: a throw-away certificate authority generated at start (rcgen)
//! and a server certificate for `localhost`, `127.0.0.1` and `::1` signed by it. Clients trust
//! the CA through the kubeconfig's `certificate-authority-data`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::Error;

/// A CA and the rustls configuration serving a certificate it signed.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The CA certificate, PEM: what clients must trust.
    pub ca_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

pub fn generate() -> Result<TlsMaterial, Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "arbor-kube-emu CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let mut server_params = CertificateParams::new(vec!["localhost".to_owned()])?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, "arbor-kube-emu");
    server_params.subject_alt_names.extend([
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SanType::IpAddress(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ]);
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let server_key = KeyPair::generate()?;
    let server_cert = server_params.signed_by(&server_key, &issuer)?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut server_config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(vec![server_cert.der().clone(), ca_cert.der().clone()], key)?;
    // kubectl speaks HTTP/2 when offered; kube-rs and Python clients use HTTP/1.1.
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(server_config),
    })
}
