//! Turning a libgit2 failure into a [`FetchErrorKind`].
//!
//! What Arbor itself observed wins over libgit2's message: a passed deadline is a timeout, a
//! refusal recorded by a callback keeps its reason, and a server the relay could not reach is
//! a network error. Only then is libgit2's error read, by code, class and (where libgit2 offers
//! nothing better) the wording of the server's answer.

use std::time::Duration;

use git2::{ErrorClass, ErrorCode};

use super::error::FetchErrorKind;
use super::remote_url::Transport;

/// What Arbor saw of a failed libgit2 call besides the error itself.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub deadline_passed: bool,
    pub callback_failure: Option<FetchErrorKind>,
    pub upstream_error: Option<String>,
}

pub(crate) fn classify(
    error: &git2::Error,
    transport: Transport,
    observed: Observed,
    timeout: Duration,
) -> FetchErrorKind {
    if observed.deadline_passed {
        return FetchErrorKind::Timeout { after: timeout };
    }
    if let Some(kind) = observed.callback_failure {
        return kind;
    }
    if let Some(detail) = observed.upstream_error {
        return FetchErrorKind::Network { detail };
    }
    classify_git_error(error, transport)
}

fn classify_git_error(error: &git2::Error, transport: Transport) -> FetchErrorKind {
    let detail = error.message().trim().to_owned();
    let lower = detail.to_ascii_lowercase();
    let names_missing_repository = [
        "does not appear to be a git repository",
        "repository not found",
        "could not find repository",
        "failed to resolve path",
        "no such file or directory",
        "not a git repository",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase));

    if error.code() == ErrorCode::Auth
        || lower.contains("status code: 401")
        || lower.contains("status code: 403")
        || lower.contains("authentication")
    {
        return FetchErrorKind::Authentication { detail };
    }
    if lower.contains("status code: 404") || names_missing_repository {
        return FetchErrorKind::RepositoryNotFound { detail };
    }
    if transport == Transport::File && error.code() == ErrorCode::NotFound {
        return FetchErrorKind::RepositoryNotFound { detail };
    }
    match error.class() {
        ErrorClass::Net
        | ErrorClass::Os
        | ErrorClass::Ssh
        | ErrorClass::Ssl
        | ErrorClass::Http
        | ErrorClass::Callback => FetchErrorKind::Network { detail },
        _ => FetchErrorKind::Other { detail },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::Error;

    fn git_error(code: ErrorCode, class: ErrorClass, message: &str) -> Error {
        Error::new(code, class, message)
    }

    #[test]
    fn a_passed_deadline_is_a_timeout_whatever_libgit2_says() {
        let error = git_error(ErrorCode::GenericError, ErrorClass::Net, "early EOF");
        let observed = Observed {
            deadline_passed: true,
            upstream_error: Some("connection reset".into()),
            ..Observed::default()
        };
        assert!(matches!(
            classify(&error, Transport::Https, observed, Duration::from_secs(5)),
            FetchErrorKind::Timeout { .. }
        ));
    }

    #[test]
    fn an_unreachable_server_is_a_network_error() {
        let error = git_error(ErrorCode::GenericError, ErrorClass::Net, "early EOF");
        let observed = Observed {
            upstream_error: Some("connecting to host:22: connection refused".into()),
            ..Observed::default()
        };
        assert!(matches!(
            classify(&error, Transport::Ssh, observed, Duration::from_secs(5)),
            FetchErrorKind::Network { detail } if detail.contains("refused")
        ));
    }

    #[test]
    fn http_statuses_map_to_authentication_and_missing_repository() {
        let forbidden = git_error(
            ErrorCode::GenericError,
            ErrorClass::Http,
            "unexpected http status code: 403",
        );
        let missing = git_error(
            ErrorCode::GenericError,
            ErrorClass::Http,
            "unexpected http status code: 404",
        );
        assert!(matches!(
            classify_git_error(&forbidden, Transport::Https),
            FetchErrorKind::Authentication { .. }
        ));
        assert!(matches!(
            classify_git_error(&missing, Transport::Https),
            FetchErrorKind::RepositoryNotFound { .. }
        ));
    }

    #[test]
    fn a_missing_local_repository_is_not_found() {
        let error = git_error(
            ErrorCode::NotFound,
            ErrorClass::Repository,
            "could not find repository at '/nope'",
        );
        assert!(matches!(
            classify_git_error(&error, Transport::File),
            FetchErrorKind::RepositoryNotFound { .. }
        ));
    }
}
