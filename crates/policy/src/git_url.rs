//! The grammar of a source's `spec.repository`: which git URLs Arbor fetches, how each one
//! is reached, and how it appears in messages.
//!
//! ## Model
//!
//! A repository URL is one of
//!
//! - `https://[user[:password]@]host[:port]/path` and the same with `http://`,
//! - `ssh://[user@]host[:port]/path`,
//! - scp-like `[user@]host:path` (ssh on port 22; the path may be relative to the login's
//!   home, and a bracketed `[host]:path` carries an IPv6 address),
//! - `file:///path` (libgit2's local transport, no network).
//!
//! IPv6 hosts are bracketed in every form. [`GitUrl::parse`] is the one reader of that
//! grammar: the API's validation (which field is wrong, before anything is fetched) and
//! gitsync's fetch (where to connect) both call it, so a URL the API accepts is one the
//! fetcher can reach, and the other way round. A refused URL says which part of it is wrong
//! ([`GitUrlError::part`]); the caller names the field that held it.
//!
//! [`redact`] takes a password or token out of a URL for messages and logs.

use std::fmt;

/// How a repository is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// `file://`: libgit2's local transport, no network.
    File,
    Http,
    Https,
    /// `ssh://` and the scp-like form.
    Ssh,
}

impl Transport {
    /// Whether it is http or https (the transports of basic and token credentials).
    pub fn is_http(self) -> bool {
        matches!(self, Self::Http | Self::Https)
    }
}

/// A parsed repository URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitUrl {
    pub transport: Transport,
    /// The user named in the URL (`git` in `git@host:repo`), never its password.
    pub user: Option<String>,
    /// The host name or address, without IPv6 brackets. Empty for `file://`.
    pub host: String,
    /// The port to connect to: the URL's, else the transport's default (0 for `file://`).
    pub port: u16,
    /// The path as the server receives it (for scp-like URLs, relative paths stay relative;
    /// for http(s), the query too).
    pub path: String,
    /// Whether it was written in the scp-like form, which has no port of its own.
    pub scp_like: bool,
}

/// Why a string is not a repository URL Arbor can fetch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GitUrlError {
    #[error("the URL scheme {scheme:?} is not one of https, http, ssh or file")]
    UnknownScheme { scheme: String },
    #[error("a file:// URL needs a path")]
    NoPath,
    #[error("the URL has no host")]
    NoHost,
    #[error("the URL has an unterminated [IPv6] host")]
    UnterminatedHost,
    #[error("the URL's port {port:?} is not a number from 0 to 65535")]
    BadPort { port: String },
    #[error("the URL is neither scheme://... nor an scp-like [user@]host:path (ssh)")]
    NotScpLike,
}

impl GitUrlError {
    /// The part of the URL that is wrong.
    pub fn part(&self) -> UrlPart {
        match self {
            Self::UnknownScheme { .. } => UrlPart::Scheme,
            Self::NoPath => UrlPart::Path,
            Self::NoHost | Self::UnterminatedHost => UrlPart::Host,
            Self::BadPort { .. } => UrlPart::Port,
            Self::NotScpLike => UrlPart::Form,
        }
    }
}

/// A part of a repository URL, for saying which one is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlPart {
    Scheme,
    Host,
    Port,
    Path,
    /// The URL as a whole: no scheme, and not the scp-like form either.
    Form,
}

impl fmt::Display for UrlPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Scheme => "scheme",
            Self::Host => "host",
            Self::Port => "port",
            Self::Path => "path",
            Self::Form => "form",
        })
    }
}

const SCHEMES: [(&str, Transport, u16); 3] = [
    ("https://", Transport::Https, 443),
    ("http://", Transport::Http, 80),
    ("ssh://", Transport::Ssh, 22),
];

impl GitUrl {
    /// Parses `url`, or says which part of it keeps it from being fetched.
    pub fn parse(url: &str) -> Result<GitUrl, GitUrlError> {
        if let Some(path) = url.strip_prefix("file://") {
            if path.is_empty() {
                return Err(GitUrlError::NoPath);
            }
            return Ok(GitUrl {
                transport: Transport::File,
                user: None,
                host: String::new(),
                port: 0,
                path: path.to_owned(),
                scp_like: false,
            });
        }
        for (scheme, transport, default_port) in SCHEMES {
            if let Some(rest) = url.strip_prefix(scheme) {
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let (user, host, port) = split_authority(authority, default_port)?;
                return Ok(GitUrl {
                    transport,
                    user,
                    host,
                    port,
                    path: path.to_owned(),
                    scp_like: false,
                });
            }
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(GitUrlError::UnknownScheme {
                scheme: scheme.to_owned(),
            });
        }
        Self::parse_scp_like(url)
    }

    /// `[user@]host:path`, as git accepts it for ssh.
    fn parse_scp_like(url: &str) -> Result<GitUrl, GitUrlError> {
        let (user, rest) = match url.split_once('@') {
            Some((user, rest)) if !user.is_empty() && !user.contains(['/', ':']) => {
                (Some(user.to_owned()), rest)
            }
            Some(_) => return Err(GitUrlError::NotScpLike),
            None => (None, url),
        };
        let (host, path) = match rest.strip_prefix('[') {
            Some(bracketed) => bracketed.split_once("]:"),
            None => rest.split_once(':'),
        }
        .ok_or(GitUrlError::NotScpLike)?;
        if host.is_empty() || host.contains('/') || path.is_empty() {
            return Err(GitUrlError::NotScpLike);
        }
        Ok(GitUrl {
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
}

/// Splits `[user[:password]@]host[:port]`; IPv6 hosts are bracketed.
fn split_authority(
    authority: &str,
    default_port: u16,
) -> Result<(Option<String>, String, u16), GitUrlError> {
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
            .ok_or(GitUrlError::UnterminatedHost)?;
        (host, after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(GitUrlError::NoHost);
    }
    let port = match port {
        Some(port) => port.parse::<u16>().map_err(|_| GitUrlError::BadPort {
            port: port.to_owned(),
        })?,
        None => default_port,
    };
    Ok((user, host.to_owned(), port))
}

/// `url` without the password (or token) of its user information, for messages and logs.
pub fn redact(url: &str) -> String {
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
