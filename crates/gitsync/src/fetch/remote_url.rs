//! Pointing a repository URL at the local deadline relay. The URL grammar itself (which
//! transport, where it connects, redaction for messages) is arbor-policy's
//! [`git_url`](arbor_policy::git_url), shared with the API's validation.

pub(crate) use arbor_policy::git_url::{GitUrl, Transport, redact};

/// The same plain http repository reached through a TCP relay listening on loopback `port`.
/// User information is dropped: credentials come from [`Credentials`] only.
///
/// [`Credentials`]: super::credentials::Credentials
pub(crate) fn http_through_relay(url: &GitUrl, port: u16) -> String {
    format!("http://127.0.0.1:{port}{}", url.path)
}

/// The same ssh repository reached through a TCP relay listening on loopback `port`.
///
/// scp-like URLs keep their (possibly relative) path by using libgit2's bracketed scp syntax
/// `[user@host:port]:path`, which is the only scp form that carries a port.
pub(crate) fn ssh_through_relay(url: &GitUrl, port: u16, user: &str) -> String {
    if url.scp_like {
        format!("[{user}@127.0.0.1:{port}]:{}", url.path)
    } else {
        format!("ssh://{user}@127.0.0.1:{port}{}", url.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_urls_keep_path_and_query_through_the_relay() {
        let url = GitUrl::parse("http://bob:pw@example.com:8080/org/repo.git?x=1").unwrap();
        assert_eq!(
            http_through_relay(&url, 4000),
            "http://127.0.0.1:4000/org/repo.git?x=1"
        );
    }

    #[test]
    fn ssh_urls_keep_their_path_through_the_relay() {
        let url = GitUrl::parse("ssh://deploy@[::1]:2222/srv/repo.git").unwrap();
        assert_eq!(
            ssh_through_relay(&url, 4000, "deploy"),
            "ssh://deploy@127.0.0.1:4000/srv/repo.git"
        );
    }

    #[test]
    fn scp_like_urls_keep_their_relative_path_through_the_relay() {
        let url = GitUrl::parse("git@github.com:org/repo.git").unwrap();
        assert_eq!(
            ssh_through_relay(&url, 4000, "git"),
            "[git@127.0.0.1:4000]:org/repo.git"
        );
    }
}
