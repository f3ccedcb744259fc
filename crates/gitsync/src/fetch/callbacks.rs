//! The libgit2 callbacks of one fetch: credentials (offered once per connection, so a refused
//! password ends the fetch instead of looping), ssh host key verification, the deadline check on every
//! progress report (which also ends a stopped fetch), and the download counters.
//!
//! A callback can only fail with an opaque `git2::Error`, so each one that refuses records the
//! precise reason here; [`CallbackState::take_failure`] hands it to the error classification,
//! which prefers it to libgit2's message.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

use super::FetchStop;
use super::credentials::{Credentials, DEFAULT_SSH_USERNAME};
use super::error::FetchErrorKind;
use super::known_hosts::KnownHosts;

/// Which credentials one libgit2 call has already been given.
#[derive(Debug, Default)]
struct Offered {
    password: bool,
    key: bool,
}

#[derive(Debug)]
pub(crate) struct CallbackState<'a> {
    credentials: &'a Credentials,
    /// The server's name as known_hosts lists it (the real server, not the local relay).
    known_hosts_name: String,
    known_hosts: Option<KnownHosts>,
    deadline: Instant,
    stop: FetchStop,
    failure: RefCell<Option<FetchErrorKind>>,
    deadline_passed: Cell<bool>,
    received_objects: Cell<usize>,
    received_bytes: Cell<usize>,
}

impl<'a> CallbackState<'a> {
    pub fn new(
        credentials: &'a Credentials,
        known_hosts_name: String,
        known_hosts: Option<KnownHosts>,
        deadline: Instant,
        stop: FetchStop,
    ) -> Self {
        CallbackState {
            credentials,
            known_hosts_name,
            known_hosts,
            deadline,
            stop,
            failure: RefCell::new(None),
            deadline_passed: Cell::new(false),
            received_objects: Cell::new(0),
            received_bytes: Cell::new(0),
        }
    }

    /// The callbacks for one libgit2 call (each call consumes its own set).
    pub fn callbacks(&self) -> RemoteCallbacks<'_> {
        let mut callbacks = RemoteCallbacks::new();
        // libgit2 asks again after a refusal; the second request for the same kind of
        // credentials within one call means the first were refused.
        let mut offered = Offered::default();
        callbacks.credentials(move |_url, username_from_url, allowed| {
            self.credentials_for(username_from_url, allowed, &mut offered)
        });
        callbacks.certificate_check(|cert, _host| match cert.as_hostkey() {
            Some(hostkey) => self.check_host_key(hostkey.hostkey()),
            // TLS certificates are verified by libgit2 against the system trust store.
            None => Ok(CertificateCheckStatus::CertificatePassthrough),
        });
        callbacks.transfer_progress(|progress| {
            self.received_objects.set(progress.received_objects());
            self.received_bytes.set(progress.received_bytes());
            self.within_deadline()
        });
        callbacks.sideband_progress(|_| self.within_deadline());
        callbacks
    }

    pub fn deadline_passed(&self) -> bool {
        self.deadline_passed.get() || Instant::now() >= self.deadline
    }

    pub fn has_failure(&self) -> bool {
        self.failure.borrow().is_some()
    }

    pub fn take_failure(&self) -> Option<FetchErrorKind> {
        self.failure.borrow_mut().take()
    }

    /// Objects and bytes received by the last download.
    pub fn received(&self) -> (usize, usize) {
        (self.received_objects.get(), self.received_bytes.get())
    }

    /// Whether the fetch was stopped ([`FetchStop`]).
    pub fn stopped(&self) -> bool {
        self.stop.is_stopped()
    }

    /// Whether the transfer may go on: neither past its deadline nor stopped.
    fn within_deadline(&self) -> bool {
        if self.stopped() {
            return false;
        }
        if Instant::now() >= self.deadline {
            self.deadline_passed.set(true);
            return false;
        }
        true
    }

    fn refuse(&self, kind: FetchErrorKind) -> git2::Error {
        let message = kind.to_string();
        self.failure.borrow_mut().get_or_insert(kind);
        git2::Error::from_str(&message)
    }

    fn credentials_for(
        &self,
        username_from_url: Option<&str>,
        allowed: CredentialType,
        offered: &mut Offered,
    ) -> Result<Cred, git2::Error> {
        let authentication =
            |detail: String| self.refuse(FetchErrorKind::Authentication { detail });
        if allowed.contains(CredentialType::USERNAME) {
            return Cred::username(username_from_url.unwrap_or(DEFAULT_SSH_USERNAME));
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
            let Some((username, password)) = self.credentials.http_basic() else {
                return Err(authentication(format!(
                    "the server asks for a user name and password, and the source has {}",
                    self.credentials.describe()
                )));
            };
            if std::mem::replace(&mut offered.password, true) {
                return Err(authentication(format!(
                    "the server refused the password of user {username:?}"
                )));
            }
            return Cred::userpass_plaintext(username, password);
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            let Credentials::SshKey {
                private_key_pem,
                passphrase,
                ..
            } = self.credentials
            else {
                return Err(authentication(format!(
                    "the server asks for an ssh key, and the source has {}",
                    self.credentials.describe()
                )));
            };
            let username = username_from_url.unwrap_or(DEFAULT_SSH_USERNAME);
            if std::mem::replace(&mut offered.key, true) {
                return Err(authentication(format!(
                    "the server refused the ssh key for user {username:?}"
                )));
            }
            return Cred::ssh_key_from_memory(
                username,
                None,
                private_key_pem,
                passphrase.as_deref(),
            )
            .map_err(|err| {
                authentication(format!(
                    "the ssh private key cannot be used: {}",
                    err.message()
                ))
            });
        }
        Err(authentication(format!(
            "the server asks for a kind of credentials Arbor does not support ({allowed:?})"
        )))
    }

    fn check_host_key(
        &self,
        presented: Option<&[u8]>,
    ) -> Result<CertificateCheckStatus, git2::Error> {
        let Some(known_hosts) = &self.known_hosts else {
            return Err(self.refuse(FetchErrorKind::InvalidSource {
                detail: "an ssh source needs known_hosts to verify the server".to_owned(),
            }));
        };
        let verdict = match presented {
            Some(key) => known_hosts.verify(&self.known_hosts_name, key),
            None => Err(super::known_hosts::HostKeyError::NotPresented {
                host: self.known_hosts_name.clone(),
            }),
        };
        match verdict {
            Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
            Err(refusal) => Err(self.refuse(FetchErrorKind::HostKey(refusal))),
        }
    }
}
