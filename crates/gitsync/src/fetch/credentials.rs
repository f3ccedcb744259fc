//! Credentials for a fetch, given as values (the controller reads them from a Secret).
//!
//! `Debug` never prints a password, token, private key or passphrase.

use std::fmt;

/// The user name sent with a token when none is configured. GitHub, GitLab and Gitea all
/// accept a token as the password of HTTP basic authentication with any user name; this one is
/// GitHub's convention for installation tokens.
pub const DEFAULT_TOKEN_USERNAME: &str = "x-access-token";

/// The user name for ssh when the URL names none.
pub const DEFAULT_SSH_USERNAME: &str = "git";

/// How to authenticate to the repository.
#[derive(Clone, Default)]
pub enum Credentials {
    /// Anonymous access (public repositories, `file://`).
    #[default]
    None,
    /// HTTP basic authentication.
    Basic { username: String, password: String },
    /// A token, sent as the password of HTTP basic authentication with `username`, or
    /// [`DEFAULT_TOKEN_USERNAME`] when that is `None`.
    Token {
        token: String,
        username: Option<String>,
    },
    /// An ssh deploy key. `known_hosts` is the content of a `known_hosts` file; the server's
    /// host key must be listed there, or the fetch is refused.
    SshKey {
        private_key_pem: String,
        passphrase: Option<String>,
        known_hosts: String,
    },
}

impl Credentials {
    /// A token with the default user name.
    pub fn token(token: impl Into<String>) -> Self {
        Credentials::Token {
            token: token.into(),
            username: None,
        }
    }

    /// The user name and password to send with HTTP basic authentication, if these are
    /// HTTP credentials.
    pub(crate) fn http_basic(&self) -> Option<(&str, &str)> {
        match self {
            Credentials::Basic { username, password } => Some((username, password)),
            Credentials::Token { token, username } => {
                Some((username.as_deref().unwrap_or(DEFAULT_TOKEN_USERNAME), token))
            }
            Credentials::None | Credentials::SshKey { .. } => None,
        }
    }

    /// A short description for error messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Credentials::None => "no credentials",
            Credentials::Basic { .. } => "basic credentials",
            Credentials::Token { .. } => "a token",
            Credentials::SshKey { .. } => "an ssh key",
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const REDACTED: &str = "<redacted>";
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &REDACTED)
                .finish(),
            Credentials::Token { username, .. } => f
                .debug_struct("Token")
                .field("token", &REDACTED)
                .field("username", username)
                .finish(),
            Credentials::SshKey {
                passphrase,
                known_hosts,
                ..
            } => f
                .debug_struct("SshKey")
                .field("private_key_pem", &REDACTED)
                .field("passphrase", &passphrase.as_ref().map(|_| REDACTED))
                .field("known_hosts", known_hosts)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_contains_secrets() {
        let all = [
            Credentials::Basic {
                username: "bob".into(),
                password: "hunter2".into(),
            },
            Credentials::token("ghp_secret"),
            Credentials::SshKey {
                private_key_pem: "-----BEGIN KEY----- secretkey".into(),
                passphrase: Some("open-sesame".into()),
                known_hosts: "example.com ssh-ed25519 AAAA".into(),
            },
        ];
        for credentials in all {
            let printed = format!("{credentials:?}");
            for secret in ["hunter2", "ghp_secret", "secretkey", "open-sesame"] {
                assert!(!printed.contains(secret), "{printed} leaks {secret}");
            }
        }
    }

    #[test]
    fn a_token_is_sent_as_basic_auth_with_the_default_or_configured_user() {
        assert_eq!(
            Credentials::token("t").http_basic(),
            Some((DEFAULT_TOKEN_USERNAME, "t"))
        );
        let custom = Credentials::Token {
            token: "t".into(),
            username: Some("oauth2".into()),
        };
        assert_eq!(custom.http_basic(), Some(("oauth2", "t")));
        assert_eq!(Credentials::None.http_basic(), None);
    }
}
