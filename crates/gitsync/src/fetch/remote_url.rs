//! Repository URLs: which transport they use, where they connect, how they appear in messages
//! (never with a password), and how an ssh URL is pointed at the local deadline relay.

/// How a repository is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// `file://`: libgit2's local transport, no network.
    Local,
    Http,
    Https,
    Ssh,
}

/// A parsed repository URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RemoteUrl {
    pub transport: Transport,
    /// The user named in the URL (`git` in `git@host:repo`), if any.
    pub user: Option<String>,
    /// The host name or address, without IPv6 brackets. Empty for `file://`.
    pub host: String,
    pub port: u16,
    /// The path as the server receives it (for scp-like URLs, relative paths stay relative).
    pub path: String,
    scp_like: bool,
}

impl RemoteUrl {
    /// Parses `url`, or says why it cannot be fetched from.
    pub fn parse(url: &str) -> Result<RemoteUrl, String> {
        if let Some(path) = url.strip_prefix("file://") {
            if path.is_empty() {
                return Err("a file:// URL needs a path".to_owned());
            }
            return Ok(RemoteUrl {
                transport: Transport::Local,
                user: None,
                host: String::new(),
                port: 0,
                path: path.to_owned(),
                scp_like: false,
            });
        }
        for (scheme, transport, default_port) in [
            ("https://", Transport::Https, 443),
            ("http://", Transport::Http, 80),
            ("ssh://", Transport::Ssh, 22),
        ] {
            if let Some(rest) = url.strip_prefix(scheme) {
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let (user, host, port) = split_authority(authority, default_port)?;
                return Ok(RemoteUrl {
                    transport,
                    user,
                    host,
                    port,
                    path: path.to_owned(),
                    scp_like: false,
                });
            }
        }
        if url.contains("://") {
            return Err("the URL scheme is not one of https, http, ssh or file".to_owned());
        }
        Self::parse_scp_like(url)
    }

    /// `[user@]host:path`, as git accepts it for ssh.
    fn parse_scp_like(url: &str) -> Result<RemoteUrl, String> {
        let not_a_url =
            || "the URL is neither scheme://… nor an scp-like [user@]host:path (ssh)".to_owned();
        let (user, rest) = match url.split_once('@') {
            Some((user, rest)) if !user.is_empty() && !user.contains(['/', ':']) => {
                (Some(user.to_owned()), rest)
            }
            Some(_) => return Err(not_a_url()),
            None => (None, url),
        };
        let (host, path) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (host, after) = bracketed.split_once("]:").ok_or_else(not_a_url)?;
            (host, after)
        } else {
            rest.split_once(':').ok_or_else(not_a_url)?
        };
        if host.is_empty() || host.contains('/') || path.is_empty() {
            return Err(not_a_url());
        }
        Ok(RemoteUrl {
            transport: Transport::Ssh,
            user,
            host: host.to_owned(),
            port: 22,
            path: path.to_owned(),
            scp_like: true,
        })
    }

    /// The host as `known_hosts` names it: `host` on port 22, `[host]:port` elsewhere.
    pub fn known_hosts_name(&self) -> String {
        if self.port == 22 {
            self.host.clone()
        } else {
            format!("[{}]:{}", self.host, self.port)
        }
    }

    /// The same plain http repository reached through a TCP relay listening on loopback
    /// `port`. User information is dropped: credentials come from [`Credentials`] only.
    ///
    /// [`Credentials`]: super::credentials::Credentials
    pub fn http_through_relay(&self, port: u16) -> String {
        format!("http://127.0.0.1:{port}{}", self.path)
    }

    /// The same ssh repository reached through a TCP relay listening on loopback `port`.
    ///
    /// scp-like URLs keep their (possibly relative) path by using libgit2's bracketed scp
    /// syntax `[user@host:port]:path`, which is the only scp form that carries a port.
    pub fn ssh_through_relay(&self, port: u16, user: &str) -> String {
        if self.scp_like {
            format!("[{user}@127.0.0.1:{port}]:{}", self.path)
        } else {
            format!("ssh://{user}@127.0.0.1:{port}{}", self.path)
        }
    }
}

/// Splits `[user[:password]@]host[:port]`; IPv6 hosts are bracketed.
fn split_authority(
    authority: &str,
    default_port: u16,
) -> Result<(Option<String>, String, u16), String> {
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, authority),
    };
    let user = userinfo
        .map(|info| info.split(':').next().unwrap_or_default().to_owned())
        .filter(|user| !user.is_empty());
    let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or("the URL has an unterminated [IPv6] host")?;
        (host, after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".to_owned());
    }
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .map_err(|_| format!("the URL's port {port:?} is not a number"))?,
        None => default_port,
    };
    Ok((user, host.to_owned(), port))
}

/// `url` without the password (or token) of its user information, for messages and logs.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let authority_start = scheme_end + 3;
    let authority_end = url[authority_start..]
        .find('/')
        .map_or(url.len(), |end| authority_start + end);
    let authority = &url[authority_start..authority_end];
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!(
                "{}{user}:***@{host}{}",
                &url[..authority_start],
                &url[authority_end..]
            )
        }
        Some((_, host)) if !url.starts_with("ssh://") => {
            // A lone user information in an http(s) URL may itself be a token.
            format!(
                "{}***@{host}{}",
                &url[..authority_start],
                &url[authority_end..]
            )
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_urls_have_host_default_port_and_path() {
        let url = RemoteUrl::parse("https://example.com/org/repo.git").unwrap();
        assert_eq!(url.transport, Transport::Https);
        assert_eq!((url.host.as_str(), url.port), ("example.com", 443));
        assert_eq!(url.path, "/org/repo.git");
        assert_eq!(url.user, None);
    }

    #[test]
    fn plain_http_urls_keep_path_and_query_through_the_relay() {
        let url = RemoteUrl::parse("http://bob:pw@example.com:8080/org/repo.git?x=1").unwrap();
        assert_eq!(url.transport, Transport::Http);
        assert_eq!(
            url.http_through_relay(4000),
            "http://127.0.0.1:4000/org/repo.git?x=1"
        );
    }

    #[test]
    fn ssh_urls_carry_user_port_and_ipv6_hosts() {
        let url = RemoteUrl::parse("ssh://deploy@[::1]:2222/srv/repo.git").unwrap();
        assert_eq!(url.transport, Transport::Ssh);
        assert_eq!(url.user.as_deref(), Some("deploy"));
        assert_eq!((url.host.as_str(), url.port), ("::1", 2222));
        assert_eq!(url.known_hosts_name(), "[::1]:2222");
        assert_eq!(
            url.ssh_through_relay(4000, "deploy"),
            "ssh://deploy@127.0.0.1:4000/srv/repo.git"
        );
    }

    #[test]
    fn scp_like_urls_keep_their_relative_path_through_the_relay() {
        let url = RemoteUrl::parse("git@github.com:org/repo.git").unwrap();
        assert_eq!(url.transport, Transport::Ssh);
        assert_eq!(url.user.as_deref(), Some("git"));
        assert_eq!(url.known_hosts_name(), "github.com");
        assert_eq!(url.path, "org/repo.git");
        assert_eq!(
            url.ssh_through_relay(4000, "git"),
            "[git@127.0.0.1:4000]:org/repo.git"
        );
    }

    #[test]
    fn unusable_urls_are_refused_with_a_reason() {
        for url in [
            "ftp://host/repo",
            "just-a-name",
            "https://:443/x",
            "file://",
        ] {
            assert!(RemoteUrl::parse(url).is_err(), "{url} was accepted");
        }
        assert!(
            RemoteUrl::parse("https://host:99999/x")
                .unwrap_err()
                .contains("port")
        );
    }

    #[test]
    fn redaction_removes_passwords_and_tokens_but_keeps_the_location() {
        assert_eq!(
            redact("https://bob:hunter2@example.com/r.git"),
            "https://bob:***@example.com/r.git"
        );
        assert_eq!(
            redact("https://ghp_token@example.com/r.git"),
            "https://***@example.com/r.git"
        );
        assert_eq!(
            redact("ssh://git@example.com/r.git"),
            "ssh://git@example.com/r.git"
        );
        assert_eq!(redact("git@example.com:r.git"), "git@example.com:r.git");
    }
}
