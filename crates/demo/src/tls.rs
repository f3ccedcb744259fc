//! Mutual-TLS material as files: one certificate authority and, per component, a certificate
//! that serves and authenticates as a client, valid for `localhost` and `127.0.0.1` (and, for
//! a component, for its Service's DNS names as the chart issues them, so that a client that
//! reaches it through a port-forward verifies the same name as in a cluster).
//!
//! The files are the ones the controllers' `--tls-cert`, `--tls-key` and `--tls-client-ca`
//! flags and arborctl's `--tls-*` flags take.

use std::path::{Path, PathBuf};

use crate::pki::Authority;

use crate::Error;

/// Names every issued certificate is valid for: the components all listen on loopback.
const LOOPBACK_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// The CA and identity files in one directory.
#[derive(Debug)]
pub struct TlsFiles {
    dir: PathBuf,
    authority: Authority,
}

/// One component's certificate and key files.
#[derive(Debug, Clone)]
pub struct Identity {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// Generates a CA and writes its certificate to `<dir>/ca.crt`.
    pub fn create(dir: &Path) -> Result<TlsFiles, Error> {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        let authority = Authority::generate("Arbor demo CA")?;
        let files = TlsFiles {
            dir: dir.to_owned(),
            authority,
        };
        write(&files.ca(), files.authority.cert_pem())?;
        Ok(files)
    }

    /// `<dir>/ca.crt`.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    pub fn ca_pem(&self) -> &str {
        self.authority.cert_pem()
    }

    /// Issues `<dir>/<name>.crt` and `<dir>/<name>.key` for `name`.
    pub fn issue(&self, name: &str) -> Result<Identity, Error> {
        self.issue_for(name, &[])
    }

    /// Like [`TlsFiles::issue`], valid also for `extra_names` (host names or IP addresses):
    /// a server that an API server elsewhere calls.
    pub fn issue_for(&self, name: &str, extra_names: &[&str]) -> Result<Identity, Error> {
        let mut names = LOOPBACK_NAMES.to_vec();
        names.extend(
            extra_names
                .iter()
                .filter(|name| !LOOPBACK_NAMES.contains(name)),
        );
        let issued = self.authority.issue(name, &names)?;
        let identity = Identity {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        };
        write(&identity.cert, &issued.cert_pem)?;
        write(&identity.key, &issued.key_pem)?;
        Ok(identity)
    }
}

fn write(path: &Path, content: &str) -> Result<(), Error> {
    std::fs::write(path, content).map_err(Error::io(format!("writing {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_written_next_to_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles::create(dir.path()).unwrap();
        let gitsync = files.issue("gitsync").unwrap();
        assert_eq!(gitsync.cert, dir.path().join("gitsync.crt"));
        let cert = std::fs::read_to_string(&gitsync.cert).unwrap();
        let key = std::fs::read_to_string(&gitsync.key).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.contains("PRIVATE KEY"));
        assert_eq!(std::fs::read_to_string(files.ca()).unwrap(), files.ca_pem());
    }
}
