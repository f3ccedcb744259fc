//! Fetching over ssh from OpenSSH's sshd with a deploy key, and the refusals: an unknown or
//! different host key, a key the server does not accept.
//!
//! These tests need /usr/sbin/sshd (Debian's openssh-server; `make deps` installs it) and
//! fail, rather than pass silently, without it.

mod support;

use arbor_gitsync::fetch::{
    Credentials, FetchError, FetchErrorKind, FetchSettings, Fetcher, HostKeyError,
};
use support::git_repo::GitRepo;
use support::sshd::{KeyPair, Sshd};
use support::{assert_kind, branch, fetch_error, source};

fn deploy_key(private_key: &str, known_hosts: String) -> Credentials {
    Credentials::SshKey {
        private_key_pem: private_key.to_owned(),
        passphrase: None,
        known_hosts,
    }
}

struct Setup {
    repo: GitRepo,
    sshd: Sshd,
    key: KeyPair,
    keys: tempfile::TempDir,
    cache: tempfile::TempDir,
}

fn setup() -> Setup {
    let repo = GitRepo::new("repo");
    let keys = tempfile::tempdir().unwrap();
    let key = KeyPair::generate(keys.path(), "deploy");
    let sshd = Sshd::start(&key);
    Setup {
        repo,
        sshd,
        key,
        keys,
        cache: tempfile::tempdir().unwrap(),
    }
}

impl Setup {
    fn fetcher(&self) -> Fetcher {
        Fetcher::new(self.cache.path(), FetchSettings::default()).unwrap()
    }

    fn url(&self) -> String {
        self.sshd.url(self.repo.path())
    }
}

#[test]
fn fetches_a_branch_with_a_deploy_key_and_known_host() {
    let setup = setup();
    let head = setup
        .repo
        .commit("deploy/ssh.yaml", "via: ssh\n", "Over ssh");
    let credentials = deploy_key(&setup.key.private_key, setup.sshd.known_hosts_line());
    let fetcher = setup.fetcher();
    let app = source("app", &setup.url(), branch("main"), credentials);

    let fetched = fetcher.fetch(&app).unwrap();
    let again = fetcher.fetch(&app).unwrap();

    assert_eq!(fetched.commit, head);
    assert_eq!(fetched.summary, "Over ssh");
    assert_eq!(again.received_objects, 0);
    let cached = git2::Repository::open_bare(fetcher.cache_dir(&app.id).join("repo.git")).unwrap();
    assert!(cached.is_shallow(), "a depth-1 fetch was expected");
    let dir = fetcher.checkout(&app.id, &head, "deploy").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("ssh.yaml")).unwrap(),
        "via: ssh\n"
    );
}

/// Fetches with the right deploy key but `known_hosts` as given, expecting a refusal.
fn fetch_error_with_known_hosts(setup: &Setup, known_hosts: String) -> FetchError {
    let credentials = deploy_key(&setup.key.private_key, known_hosts);
    fetch_error(&source("app", &setup.url(), branch("main"), credentials))
}

#[test]
fn an_unknown_host_key_is_refused() {
    let setup = setup();
    let elsewhere = setup
        .sshd
        .known_hosts_line()
        .replace("[127.0.0.1]", "[git.example.com]");

    let err = fetch_error_with_known_hosts(&setup, elsewhere);

    assert_kind!(err, FetchErrorKind::HostKey(HostKeyError::Unknown { .. }));
}

#[test]
fn a_different_host_key_is_refused_as_a_mismatch() {
    let setup = setup();
    let impostor = KeyPair::generate(setup.keys.path(), "impostor");
    let known_hosts = format!("[127.0.0.1]:{} {}", setup.sshd.port(), impostor.public_key);

    let err = fetch_error_with_known_hosts(&setup, known_hosts);

    assert_kind!(err, FetchErrorKind::HostKey(HostKeyError::Mismatch { .. }));
}

#[test]
fn a_deploy_key_the_server_does_not_accept_is_an_authentication_error() {
    let setup = setup();
    let stranger = KeyPair::generate(setup.keys.path(), "stranger");
    let credentials = deploy_key(&stranger.private_key, setup.sshd.known_hosts_line());

    let err = fetch_error(&source("app", &setup.url(), branch("main"), credentials));

    assert_kind!(err, FetchErrorKind::Authentication { .. });
    assert!(!err.to_string().contains("PRIVATE KEY"), "{err}");
}

#[test]
fn a_missing_repository_over_ssh_is_repository_not_found() {
    let setup = setup();
    let credentials = deploy_key(&setup.key.private_key, setup.sshd.known_hosts_line());
    let url = setup.sshd.url(&setup.repo.root().join("absent"));

    let err = fetch_error(&source("app", &url, branch("main"), credentials));

    assert_kind!(err, FetchErrorKind::RepositoryNotFound { .. });
}

#[test]
fn an_ssh_url_without_a_deploy_key_is_refused_before_connecting() {
    let setup = setup();

    let err = fetch_error(&source(
        "app",
        &setup.url(),
        branch("main"),
        Credentials::None,
    ));

    assert_kind!(err, FetchErrorKind::InvalidSource { .. });
}

/// #16.6: `ssh-keyscan -H` writes hashed host names (`|1|salt|hash`), OpenSSH's default where
/// `HashKnownHosts yes`. They used to be refused as "not in known_hosts".
#[test]
fn a_hashed_known_hosts_from_ssh_keyscan_is_accepted() {
    let setup = setup();
    let head = setup.repo.commit("deploy/ssh.yaml", "via: ssh\n", "Hashed");
    let scan = std::process::Command::new("ssh-keyscan")
        .args(["-H", "-p", &setup.sshd.port().to_string(), "127.0.0.1"])
        .output()
        .expect("ssh-keyscan (openssh-client) runs");
    let known_hosts = String::from_utf8(scan.stdout).unwrap();
    assert!(
        known_hosts.lines().any(|line| line.starts_with("|1|")),
        "ssh-keyscan -H wrote hashed lines: {known_hosts}"
    );
    assert!(!known_hosts.contains("127.0.0.1"), "{known_hosts}");
    let credentials = deploy_key(&setup.key.private_key, known_hosts.clone());
    let app = source("app", &setup.url(), branch("main"), credentials);

    assert_eq!(setup.fetcher().fetch(&app).unwrap().commit, head);

    // The same hashed lines, marked @revoked, refuse the key.
    let revoked: String = known_hosts
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| format!("{line}\n@revoked {line}\n"))
        .collect();
    let err = fetch_error_with_known_hosts(&setup, revoked);
    assert_kind!(err, FetchErrorKind::HostKey(HostKeyError::Revoked { .. }));
}
