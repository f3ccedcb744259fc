//! Fetching over http from git's own `git http-backend` behind basic authentication, and the
//! failures a network fetch can meet.

mod support;

use std::time::Duration;

use arbor_gitsync::fetch::{
    Credentials, FetchError, FetchErrorKind, FetchSettings, Fetcher, GitReference, GitSource,
};
use support::git_repo::GitRepo;
use support::http_server::GitHttpServer;
use support::silent_server::{SilentServer, closed_port};
use support::tls_server::UntrustedTlsServer;
use support::{assert_kind, branch, fetch_error, source, within};

const USER: &str = "arbor";
const PASSWORD: &str = "correct-horse";

fn basic(password: &str) -> Credentials {
    Credentials::Basic {
        username: USER.to_owned(),
        password: password.to_owned(),
    }
}

/// Fetches `reference` of `repository` from a server that serves one fresh repository, `repo`,
/// expecting the fetch to fail.
fn fetch_error_from_server(
    repository: &str,
    reference: GitReference,
    credentials: Credentials,
) -> FetchError {
    let repo = GitRepo::new("repo");
    let server = GitHttpServer::start(repo.root(), USER, PASSWORD);
    fetch_error(&source(
        "app",
        &server.url(repository),
        reference,
        credentials,
    ))
}

/// The source following `main` of `repo` on `server`, with the right password.
fn main_with_password(server: &GitHttpServer, repo: &GitRepo) -> GitSource {
    source(
        "app",
        &server.url(&repo.name()),
        branch("main"),
        basic(PASSWORD),
    )
}

fn fetcher(cache: &tempfile::TempDir) -> Fetcher {
    Fetcher::new(cache.path(), FetchSettings::default()).unwrap()
}

#[test]
fn fetches_a_branch_with_basic_auth_shallow() {
    let repo = GitRepo::new("repo");
    repo.commit("deploy/second.yaml", "s: 2\n", "Second");
    let server = GitHttpServer::start(repo.root(), USER, PASSWORD);
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = main_with_password(&server, &repo);

    let fetched = fetcher.fetch(&app).unwrap();

    assert_eq!(fetched.commit, repo.head());
    assert_eq!(fetched.summary, "Second");
    let cached = git2::Repository::open_bare(fetcher.cache_dir(&app.id).join("repo.git")).unwrap();
    assert!(cached.is_shallow(), "a depth-1 fetch was expected");
    let dir = fetcher
        .checkout(&app.id, &fetched.commit, "deploy")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("second.yaml")).unwrap(),
        "s: 2\n"
    );
}

#[test]
fn fetches_with_a_token_sent_as_basic_auth() {
    let repo = GitRepo::new("repo");
    let server = GitHttpServer::start(repo.root(), "x-access-token", "ghs_token");
    let cache = tempfile::tempdir().unwrap();

    let fetched = fetcher(&cache)
        .fetch(&source(
            "app",
            &server.url(&repo.name()),
            branch("main"),
            Credentials::token("ghs_token"),
        ))
        .unwrap();

    assert_eq!(fetched.commit, repo.head());
}

#[test]
fn an_unchanged_repository_is_not_downloaded_again_and_a_new_commit_is() {
    let repo = GitRepo::new("repo");
    let server = GitHttpServer::start(repo.root(), USER, PASSWORD);
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = main_with_password(&server, &repo);

    fetcher.fetch(&app).unwrap();
    let downloads = server.upload_pack_posts();
    let unchanged = fetcher.fetch(&app).unwrap();
    assert_eq!(
        server.upload_pack_posts(),
        downloads,
        "the pack was downloaded again"
    );
    assert_eq!(unchanged.received_objects, 0);

    let newer = repo.commit("deploy/app.yaml", "changed: true\n", "Change");
    let changed = fetcher.fetch(&app).unwrap();
    assert_eq!(changed.commit, newer);
    assert!(server.upload_pack_posts() > downloads);
}

#[test]
fn fetches_a_commit_by_id_from_a_server_that_only_serves_refs() {
    let repo = GitRepo::new("repo");
    let older = repo.head();
    repo.commit("deploy/newer.yaml", "n: 1\n", "Newer");
    let server = GitHttpServer::start(repo.root(), USER, PASSWORD);
    let cache = tempfile::tempdir().unwrap();

    let fetched = fetcher(&cache)
        .fetch(&source(
            "app",
            &server.url(&repo.name()),
            GitReference::Commit(older.clone()),
            basic(PASSWORD),
        ))
        .unwrap();

    assert_eq!(fetched.commit, older);
}

#[test]
fn a_wrong_password_is_an_authentication_error_that_never_shows_the_password() {
    let err = fetch_error_from_server("repo", branch("main"), basic("wrong-guess"));

    assert_kind!(err, FetchErrorKind::Authentication { .. });
    assert!(!format!("{err} {err:?}").contains("wrong-guess"), "{err:?}");
}

#[test]
fn missing_credentials_are_an_authentication_error() {
    let err = fetch_error_from_server("repo", branch("main"), Credentials::None);

    assert_kind!(err, FetchErrorKind::Authentication { .. });
}

#[test]
fn a_password_in_the_url_is_neither_shown_nor_used() {
    let repo = GitRepo::new("repo");
    let server = GitHttpServer::start(repo.root(), USER, PASSWORD);
    let url = server
        .url(&repo.name())
        .replace("http://", &format!("http://{USER}:in-url-secret@"));

    let err = fetch_error(&source("app", &url, branch("main"), Credentials::None));

    // Credentials come from the source's credentials only, never from the URL.
    assert_kind!(err, FetchErrorKind::Authentication { .. });
    assert!(
        !format!("{err} {err:?}").contains("in-url-secret"),
        "{err:?}"
    );
    assert!(err.url().contains("127.0.0.1"), "{}", err.url());
}

#[test]
fn a_missing_branch_is_reference_not_found() {
    let err = fetch_error_from_server("repo", branch("nope"), basic(PASSWORD));

    assert_kind!(err, FetchErrorKind::ReferenceNotFound { .. });
}

#[test]
fn a_missing_repository_is_repository_not_found() {
    let err = fetch_error_from_server("absent", branch("main"), basic(PASSWORD));

    assert_kind!(err, FetchErrorKind::RepositoryNotFound { .. });
}

#[test]
fn a_server_that_is_down_is_a_network_error() {
    let url = format!("http://127.0.0.1:{}/repo", closed_port());

    let err = fetch_error(&source("app", &url, branch("main"), Credentials::None));

    assert_kind!(err, FetchErrorKind::Network { .. });
}

#[test]
fn https_reaches_the_server_and_refuses_an_untrusted_certificate() {
    let server = UntrustedTlsServer::start();
    let url = format!("https://127.0.0.1:{}/repo", server.port());

    let err = fetch_error(&source("app", &url, branch("main"), basic(PASSWORD)));

    assert_kind!(err, FetchErrorKind::Network { .. });
    assert!(err.to_string().contains("certificate"), "{err}");
    assert!(
        server.connections() > 0,
        "the fetch never reached the TLS server"
    );
}

#[test]
fn https_to_a_server_that_is_down_is_a_network_error() {
    let url = format!("https://127.0.0.1:{}/repo", closed_port());

    let err = fetch_error(&source("app", &url, branch("main"), Credentials::None));

    assert_kind!(err, FetchErrorKind::Network { .. });
}

/// Fetches from a server that accepts connections and never answers, with a 2 s timeout; fails
/// the test if the fetch is not back within a minute.
fn fetch_error_from_silent_server(scheme: &str) -> FetchError {
    let server = SilentServer::start();
    let cache = tempfile::tempdir().unwrap();
    let settings = FetchSettings {
        timeout: Duration::from_secs(2),
        ..FetchSettings::default()
    };
    let fetcher = Fetcher::new(cache.path(), settings).unwrap();
    let url = format!("{scheme}://127.0.0.1:{}/repo", server.port());
    let app = source("app", &url, branch("main"), Credentials::None);
    within(Duration::from_secs(60), move || fetcher.fetch(&app)).unwrap_err()
}

#[test]
fn a_server_that_never_answers_times_out() {
    let err = fetch_error_from_silent_server("http");

    assert_kind!(err, FetchErrorKind::Timeout { .. });
}

#[test]
fn an_https_server_that_never_answers_times_out() {
    let err = fetch_error_from_silent_server("https");

    assert_kind!(err, FetchErrorKind::Timeout { .. });
}
