//! A small certificate authority for mutual TLS between Arbor's components.
//!
//! On a cluster the Helm chart (or cert-manager) issues the certificates; the local demo and
//! the tests need the same shape of material without either, so they issue it here: one CA,
//! and leaf certificates that serve as both server and client identities.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// Certificate generation failed (a name that is not a valid DNS name or IP, for example).
#[derive(Debug, thiserror::Error)]
#[error("cannot issue certificate for {subject}: {source}")]
pub struct PkiError {
    subject: String,
    source: rcgen::Error,
}

/// A PEM certificate and its PEM private key.
#[derive(Debug, Clone)]
pub struct CertifiedKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A self-signed certificate authority that issues leaf certificates.
pub struct Authority {
    params: CertificateParams,
    key: KeyPair,
    cert_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// Generates a new CA whose common name is `name`.
    pub fn generate(name: &str) -> Result<Self, PkiError> {
        let error = |source| PkiError {
            subject: name.to_owned(),
            source,
        };
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(error)?;
        let cert_pem = params.self_signed(&key).map_err(error)?.pem();
        Ok(Self {
            params,
            key,
            cert_pem,
        })
    }

    /// The CA certificate, for trust bundles.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Issues a certificate for `common_name`, valid for the given DNS names and IP addresses,
    /// usable both to serve and to authenticate as a client.
    pub fn issue(
        &self,
        common_name: &str,
        subject_alt_names: &[&str],
    ) -> Result<CertifiedKey, PkiError> {
        let error = |source| PkiError {
            subject: common_name.to_owned(),
            source,
        };
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name);
        params.subject_alt_names = subject_alt_names
            .iter()
            .map(|name| match name.parse() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => (*name).try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .map_err(error)?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().map_err(error)?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(error)?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name.push(DnType::OrganizationName, "Arbor");
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_are_pem_and_distinct() {
        let ca = Authority::generate("arbor test CA").unwrap();
        let a = ca.issue("gitsync", &["localhost", "127.0.0.1"]).unwrap();
        let b = ca.issue("webhook", &["webhook.arbor-system.svc"]).unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(a.key_pem.contains("PRIVATE KEY"));
        assert_ne!(a.cert_pem, b.cert_pem);
    }

    #[test]
    fn an_invalid_name_is_refused_with_the_subject() {
        let ca = Authority::generate("arbor test CA").unwrap();
        let err = ca.issue("bad", &["bücher.example"]).unwrap_err();
        assert!(err.to_string().contains("bad"), "{err}");
    }
}
