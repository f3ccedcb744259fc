//! One network conversation with a repository: list its refs, pick the wanted object, download
//! what the cache lacks, and resolve the commit.
//!
//! The refs are listed before anything is downloaded, so a missing branch or tag is reported as
//! such (libgit2 would fetch nothing and succeed), and an object the cache already holds is
//! never downloaded again. Downloads are shallow (depth 1) when the transport allows it; a
//! server or transport that refuses a shallow fetch (libgit2's local transport always does) is
//! asked again for the full history. A commit named by id is asked for directly; a server that
//! refuses to serve an object by id is asked for all its branches and tags instead.

use std::time::Instant;

use git2::{AutotagOption, Direction, FetchOptions, Oid, Remote, RemoteConnection, Repository};

use super::cache::FETCHED_REF;
use super::callbacks::CallbackState;
use super::classify::{Observed, classify};
use super::credentials::{Credentials, DEFAULT_SSH_USERNAME};
use super::deadline_relay::{DeadlineRelay, Upstream};
use super::error::FetchErrorKind;
use super::known_hosts::KnownHosts;
use super::remote_url::{self, GitUrl, Transport};
use super::source::GitReference;
use super::{FetchSettings, FetchStop};

/// libgit2's depth value meaning "make a shallow repository complete".
const UNSHALLOW: i32 = i32::MAX;

#[derive(Debug)]
pub(crate) struct Session<'s> {
    url: GitUrl,
    /// The URL libgit2 connects to (for ssh and plain http: the relay).
    effective_url: String,
    settings: &'s FetchSettings,
    relay: Option<DeadlineRelay>,
    state: CallbackState<'s>,
}

impl<'s> Session<'s> {
    /// Checks that the credentials suit the transport and starts the deadline relay.
    pub fn start(
        url: &str,
        credentials: &'s Credentials,
        settings: &'s FetchSettings,
        deadline: Instant,
        stop: &FetchStop,
    ) -> Result<Session<'s>, FetchErrorKind> {
        let invalid = |detail: String| FetchErrorKind::InvalidSource { detail };
        let parsed = GitUrl::parse(url).map_err(|error| invalid(error.to_string()))?;
        let known_hosts = match (parsed.transport, credentials) {
            (Transport::Ssh, Credentials::SshKey { known_hosts, .. }) => {
                Some(KnownHosts::parse(known_hosts)?)
            }
            (Transport::Ssh, other) => {
                return Err(invalid(format!(
                    "an ssh URL needs an ssh key with known_hosts, and the source has {}",
                    other.describe()
                )));
            }
            (Transport::Http | Transport::Https, Credentials::SshKey { .. }) => {
                return Err(invalid(
                    "an ssh key cannot authenticate an http(s) URL".to_owned(),
                ));
            }
            _ => None,
        };
        let relay_error = |err: std::io::Error| FetchErrorKind::Other {
            detail: format!("starting the fetch relay: {err}"),
        };
        let start_relay = || {
            let upstream = Upstream {
                host: parsed.host.clone(),
                port: parsed.port,
            };
            DeadlineRelay::start(upstream, deadline, stop.clone()).map_err(relay_error)
        };
        // Local and https fetches talk to the repository directly (see `deadline_relay`).
        let (relay, effective_url) = match parsed.transport {
            Transport::File | Transport::Https => (None, url.to_owned()),
            Transport::Http => {
                let relay = start_relay()?;
                let through_relay = remote_url::http_through_relay(&parsed, relay.port());
                (Some(relay), through_relay)
            }
            Transport::Ssh => {
                let relay = start_relay()?;
                let user = parsed.user.as_deref().unwrap_or(DEFAULT_SSH_USERNAME);
                let through_relay = remote_url::ssh_through_relay(&parsed, relay.port(), user);
                (Some(relay), through_relay)
            }
        };
        let state = CallbackState::new(
            credentials,
            parsed.known_hosts_name(),
            known_hosts,
            deadline,
            stop.clone(),
        );
        Ok(Session {
            url: parsed,
            effective_url,
            settings,
            relay,
            state,
        })
    }

    /// Objects and bytes received by the last download.
    pub fn received(&self) -> (usize, usize) {
        self.state.received()
    }

    /// Brings the commit that `reference` names into `repo` and returns its id.
    pub fn fetch_commit(
        &self,
        repo: &Repository,
        reference: &GitReference,
    ) -> Result<Oid, FetchErrorKind> {
        let mut remote = repo
            .remote_anonymous(&self.effective_url)
            .map_err(|err| self.failure(&err))?;
        let (wanted, refspec) = {
            let connection = self.connect(&mut remote)?;
            self.wanted_object(&connection, reference)?
        };
        if repo.find_object(wanted, None).is_err() {
            self.download(repo, &mut remote, reference, wanted, &refspec)?;
        }
        let commit = repo
            .find_object(wanted, None)
            .and_then(|object| object.peel_to_commit())
            .map_err(|_| FetchErrorKind::ReferenceNotFound {
                reference: reference.to_string(),
            })?;
        repo.reference(FETCHED_REF, commit.id(), true, "arbor fetch")
            .map_err(|err| FetchErrorKind::Cache {
                path: repo.path().to_owned(),
                detail: err.message().to_owned(),
            })?;
        Ok(commit.id())
    }

    /// The object `reference` names on the remote, and the refspec that fetches it.
    fn wanted_object(
        &self,
        connection: &RemoteConnection<'_, '_, '_>,
        reference: &GitReference,
    ) -> Result<(Oid, String), FetchErrorKind> {
        if let GitReference::Commit(sha) = reference {
            let oid = Oid::from_str(sha).map_err(|_| FetchErrorKind::InvalidSource {
                detail: format!("{sha:?} is not a commit id"),
            })?;
            return Ok((oid, sha.clone()));
        }
        let heads = connection.list().map_err(|err| self.failure(&err))?;
        reference
            .candidate_refs()
            .into_iter()
            .find_map(|name| {
                heads
                    .iter()
                    .find(|head| head.name() == name)
                    .map(|head| (head.oid(), name))
            })
            .ok_or_else(|| FetchErrorKind::ReferenceNotFound {
                reference: reference.to_string(),
            })
    }

    fn download(
        &self,
        repo: &Repository,
        remote: &mut Remote<'_>,
        reference: &GitReference,
        wanted: Oid,
        refspec: &str,
    ) -> Result<(), FetchErrorKind> {
        let shallow = self.settings.shallow && self.url.transport != Transport::File;
        let first = self.download_once(remote, &[refspec], if shallow { 1 } else { 0 });
        let Err(error) = first else {
            if repo.find_object(wanted, None).is_ok() {
                return Ok(());
            }
            // The server sent nothing for an id it does not advertise: look everywhere.
            return self.download_all_refs(repo, remote);
        };
        if self.aborted_for_good() {
            return Err(self.failure(&error));
        }
        if shallow && error.message().contains("shallow") {
            tracing::debug!(url = %remote_url::redact(&self.effective_url), "server refused a shallow fetch; fetching full history");
            return self
                .download_once(remote, &[refspec], 0)
                .map_err(|err| self.failure(&err));
        }
        if matches!(reference, GitReference::Commit(_)) {
            return self.download_all_refs(repo, remote);
        }
        Err(self.failure(&error))
    }

    /// Fetches every branch and tag with full history, to find a commit by id on a server
    /// that will not serve it directly.
    fn download_all_refs(
        &self,
        repo: &Repository,
        remote: &mut Remote<'_>,
    ) -> Result<(), FetchErrorKind> {
        let depth = if repo.is_shallow() { UNSHALLOW } else { 0 };
        self.download_once(
            remote,
            &[
                "+refs/heads/*:refs/arbor/all/heads/*",
                "+refs/tags/*:refs/arbor/all/tags/*",
            ],
            depth,
        )
        .map_err(|err| self.failure(&err))
    }

    fn download_once(
        &self,
        remote: &mut Remote<'_>,
        refspecs: &[&str],
        depth: i32,
    ) -> Result<(), git2::Error> {
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(self.state.callbacks())
            .download_tags(AutotagOption::None)
            .update_fetchhead(false)
            .depth(depth);
        let mut connection =
            remote.connect_auth(Direction::Fetch, Some(self.state.callbacks()), None)?;
        connection.remote().download(refspecs, Some(&mut options))
    }

    fn connect<'r, 'c>(
        &'c self,
        remote: &'c mut Remote<'r>,
    ) -> Result<RemoteConnection<'r, 'c, 'c>, FetchErrorKind> {
        remote
            .connect_auth(Direction::Fetch, Some(self.state.callbacks()), None)
            .map_err(|err| self.failure(&err))
    }

    /// Whether retrying is pointless: the deadline passed, the fetch was stopped, a callback
    /// refused, or the server could not be reached.
    fn aborted_for_good(&self) -> bool {
        self.state.deadline_passed()
            || self.state.stopped()
            || self.state.has_failure()
            || self
                .relay
                .as_ref()
                .is_some_and(|relay| relay.timed_out() || relay.upstream_error().is_some())
    }

    fn failure(&self, error: &git2::Error) -> FetchErrorKind {
        let observed = Observed {
            deadline_passed: self.state.deadline_passed()
                || self.relay.as_ref().is_some_and(DeadlineRelay::timed_out),
            callback_failure: self.state.take_failure(),
            upstream_error: self.relay.as_ref().and_then(DeadlineRelay::upstream_error),
        };
        classify(error, self.url.transport, observed, self.settings.timeout)
    }
}
