//! The serving certificate, reloaded when its files change.
//!
//! cert-manager and the kubelet rotate a mounted Secret by swapping files (a new inode behind
//! the `..data` symlink), so [`ReloadingCert`] compares each file's modification time, length
//! and inode on every TLS handshake (two `stat` calls) and re-reads the pair when either
//! changed. A pair that cannot be read or parsed (caught between the two writes, say) is
//! logged and the previous certificate stays in service; the next handshake tries again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::crypto::ring;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate pair cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no PEM private key")]
    NoKey { path: PathBuf },
    #[error("the private key in {path} cannot sign: {source}")]
    UnusableKey {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("TLS configuration failed: {0}")]
    Config(rustls::Error),
}

/// What identifies one version of a file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    })
}

#[derive(Debug)]
struct Loaded {
    stamps: (Option<FileStamp>, Option<FileStamp>),
    key: Arc<CertifiedKey>,
}

/// A [`ResolvesServerCert`] serving the pair at `cert` and `key`, re-read when they change.
#[derive(Debug)]
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Loaded>,
}

impl ReloadingCert {
    /// Loads the pair now, so that a wrong path fails at start with the file's name.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, CertError> {
        let (cert, key) = (cert.into(), key.into());
        let stamps = (stamp(&cert), stamp(&key));
        let certified = read_pair(&cert, &key)?;
        Ok(Self {
            cert,
            key,
            loaded: Mutex::new(Loaded {
                stamps,
                key: Arc::new(certified),
            }),
        })
    }

    /// The certificate to serve now, re-read first if the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let stamps = (stamp(&self.cert), stamp(&self.key));
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.stamps != stamps {
            match read_pair(&self.cert, &self.key) {
                Ok(certified) => {
                    tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                    *loaded = Loaded {
                        stamps,
                        key: Arc::new(certified),
                    };
                }
                Err(error) => {
                    tracing::warn!(%error, "keeping the previous serving certificate");
                }
            }
        }
        loaded.key.clone()
    }

    /// A rustls server configuration (HTTP/2 and HTTP/1.1, ring) that serves through this
    /// resolver.
    pub fn server_config(self: Arc<Self>) -> Result<rustls::ServerConfig, CertError> {
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(CertError::Config)?
                .with_no_client_auth()
                .with_cert_resolver(self);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, CertError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| CertError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    let chain = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CertError::Read {
            path: cert_path.to_owned(),
            source,
        })?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|source| CertError::Read {
            path: key_path.to_owned(),
            source,
        })?
        .ok_or_else(|| CertError::NoKey {
            path: key_path.to_owned(),
        })?;
    let signing =
        ring::sign::any_supported_type(&key).map_err(|source| CertError::UnusableKey {
            path: key_path.to_owned(),
            source,
        })?;
    Ok(CertifiedKey::new(chain, signing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_testkit::pki::Authority;

    fn write_pair(dir: &Path, ca: &Authority) -> (PathBuf, PathBuf, Vec<u8>) {
        let issued = ca.issue("webhook", &["localhost"]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        // Written under new names and renamed, as the kubelet swaps a Secret volume.
        std::fs::write(dir.join("tls.crt.new"), &issued.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key.new"), &issued.key_pem).unwrap();
        std::fs::rename(dir.join("tls.crt.new"), &cert).unwrap();
        std::fs::rename(dir.join("tls.key.new"), &key).unwrap();
        let der = rustls_pemfile::certs(&mut issued.cert_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        (cert, key, der.to_vec())
    }

    #[test]
    fn changed_files_are_served_and_broken_files_keep_the_old_pair() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Authority::generate("test CA").unwrap();
        let (cert, key, first) = write_pair(dir.path(), &ca);
        let resolver = ReloadingCert::load(&cert, &key).unwrap();
        assert_eq!(resolver.current().cert[0].as_ref(), first.as_slice());
        let (_, _, second) = write_pair(dir.path(), &ca);
        assert_eq!(resolver.current().cert[0].as_ref(), second.as_slice());
        std::fs::write(&cert, "garbage").unwrap();
        assert_eq!(resolver.current().cert[0].as_ref(), second.as_slice());
    }

    #[test]
    fn a_missing_file_is_named_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let error = ReloadingCert::load(dir.path().join("nope.crt"), dir.path().join("nope.key"))
            .unwrap_err();
        assert!(error.to_string().contains("nope.crt"), "{error}");
    }
}
