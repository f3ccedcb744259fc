//! Verification of an ssh server's host key against the content of a `known_hosts` file.
//!
//! The rules are OpenSSH's, restricted to what a deploy configuration needs: host patterns
//! with `*` / `?` wildcards and `!` negation, `[host]:port` for ports other than 22, and the
//! `@revoked` marker. A host that no line names, or names only with keys of other types, is
//! unknown; a host listed with a different key of the same type is a mismatch. Both are refused.
//! Hashed host names (`|1|…`) and `@cert-authority` lines are not supported; they never match.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// Why a server's host key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostKeyError {
    #[error(
        "host key of {host} ({key_type}) is not in known_hosts{}",
        if *other_types_listed { " (known_hosts lists keys of other types for this host)" } else { "" }
    )]
    Unknown {
        host: String,
        key_type: String,
        other_types_listed: bool,
    },
    #[error("host key of {host} ({key_type}) does not match the key in known_hosts")]
    Mismatch { host: String, key_type: String },
    #[error("host key of {host} ({key_type}) is marked @revoked in known_hosts")]
    Revoked { host: String, key_type: String },
    #[error("the server {host} presented no usable host key")]
    NotPresented { host: String },
    #[error("known_hosts line {line}: {reason}")]
    InvalidKnownHosts { line: usize, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    None,
    Revoked,
    CertAuthority,
}

#[derive(Debug, Clone)]
struct Entry {
    marker: Marker,
    patterns: Vec<String>,
    key_type: String,
    key: Vec<u8>,
}

/// A parsed `known_hosts` file.
#[derive(Debug, Clone)]
pub(crate) struct KnownHosts {
    entries: Vec<Entry>,
}

impl KnownHosts {
    pub fn parse(content: &str) -> Result<KnownHosts, HostKeyError> {
        let mut entries = Vec::new();
        for (index, line) in content.lines().enumerate() {
            let invalid = |reason: &str| HostKeyError::InvalidKnownHosts {
                line: index + 1,
                reason: reason.to_owned(),
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let mut first = fields.next().unwrap_or_default();
            let marker = match first {
                "@revoked" => Marker::Revoked,
                "@cert-authority" => Marker::CertAuthority,
                other if other.starts_with('@') => return Err(invalid("unknown marker")),
                _ => Marker::None,
            };
            if marker != Marker::None {
                first = fields.next().ok_or_else(|| invalid("no host patterns"))?;
            }
            let key_type = fields.next().ok_or_else(|| invalid("no key type"))?;
            let key = fields.next().ok_or_else(|| invalid("no key"))?;
            let key = BASE64
                .decode(key)
                .map_err(|err| invalid(&format!("the key is not base64: {err}")))?;
            entries.push(Entry {
                marker,
                patterns: first.split(',').map(str::to_owned).collect(),
                key_type: key_type.to_owned(),
                key,
            });
        }
        Ok(KnownHosts { entries })
    }

    /// Accepts `presented_key` (the ssh wire encoding of the public key, as in known_hosts
    /// after base64 decoding) for `host` (as [`known_hosts_name`] writes it), or says why not.
    ///
    /// [`known_hosts_name`]: super::remote_url::RemoteUrl::known_hosts_name
    pub fn verify(&self, host: &str, presented_key: &[u8]) -> Result<(), HostKeyError> {
        let key_type = wire_key_type(presented_key).ok_or_else(|| HostKeyError::NotPresented {
            host: host.to_owned(),
        })?;
        let for_host: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|entry| entry.marker != Marker::CertAuthority && host_matches(entry, host))
            .collect();
        let refused =
            |make: fn(String, String) -> HostKeyError| Err(make(host.to_owned(), key_type.clone()));
        if for_host
            .iter()
            .any(|entry| entry.marker == Marker::Revoked && entry.key == presented_key)
        {
            return refused(|host, key_type| HostKeyError::Revoked { host, key_type });
        }
        let trusted: Vec<&&Entry> = for_host
            .iter()
            .filter(|entry| entry.marker == Marker::None)
            .collect();
        if trusted.iter().any(|entry| entry.key == presented_key) {
            return Ok(());
        }
        if trusted.iter().any(|entry| entry.key_type == key_type) {
            return refused(|host, key_type| HostKeyError::Mismatch { host, key_type });
        }
        Err(HostKeyError::Unknown {
            host: host.to_owned(),
            key_type,
            other_types_listed: !trusted.is_empty(),
        })
    }
}

/// The key type named inside an ssh public key blob (a length-prefixed string first).
fn wire_key_type(blob: &[u8]) -> Option<String> {
    let length = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
    let name = blob.get(4..4 + length)?;
    String::from_utf8(name.to_vec()).ok()
}

/// Whether `host` matches the entry's patterns: some positive pattern matches and no negated
/// one does.
fn host_matches(entry: &Entry, host: &str) -> bool {
    let mut matched = false;
    for pattern in &entry.patterns {
        if let Some(negated) = pattern.strip_prefix('!') {
            if wildcard_match(negated.as_bytes(), host.as_bytes()) {
                return false;
            }
        } else if wildcard_match(pattern.as_bytes(), host.as_bytes()) {
            matched = true;
        }
    }
    matched
}

/// OpenSSH pattern matching: `*` is any sequence, `?` any one byte; host names compare
/// case-insensitively.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| wildcard_match(rest, &text[skip..])),
        Some((&expected, rest)) => match text.split_first() {
            Some((&actual, text_rest)) => {
                (expected == b'?' || expected.eq_ignore_ascii_case(&actual))
                    && wildcard_match(rest, text_rest)
            }
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake key blob of `key_type` whose body is `body`.
    fn blob(key_type: &str, body: &[u8]) -> Vec<u8> {
        let mut out = (key_type.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(key_type.as_bytes());
        out.extend_from_slice(body);
        out
    }

    fn line(hosts: &str, key: &[u8]) -> String {
        let key_type = wire_key_type(key).unwrap();
        format!("{hosts} {key_type} {} comment", BASE64.encode(key))
    }

    #[test]
    fn a_listed_key_is_accepted() {
        let key = blob("ssh-ed25519", b"server");
        let known = KnownHosts::parse(&line("git.example.com,10.0.0.1", &key)).unwrap();
        assert_eq!(known.verify("git.example.com", &key), Ok(()));
        assert_eq!(known.verify("10.0.0.1", &key), Ok(()));
    }

    #[test]
    fn an_unlisted_host_is_unknown() {
        let key = blob("ssh-ed25519", b"server");
        let known = KnownHosts::parse(&line("other.example.com", &key)).unwrap();
        assert!(matches!(
            known.verify("git.example.com", &key),
            Err(HostKeyError::Unknown {
                other_types_listed: false,
                ..
            })
        ));
    }

    #[test]
    fn a_different_key_of_the_same_type_is_a_mismatch() {
        let listed = blob("ssh-ed25519", b"listed");
        let presented = blob("ssh-ed25519", b"attacker");
        let known = KnownHosts::parse(&line("git.example.com", &listed)).unwrap();
        assert!(matches!(
            known.verify("git.example.com", &presented),
            Err(HostKeyError::Mismatch { .. })
        ));
    }

    #[test]
    fn a_key_of_another_type_only_is_unknown_and_says_so() {
        let listed = blob("ssh-rsa", b"listed");
        let presented = blob("ssh-ed25519", b"server");
        let known = KnownHosts::parse(&line("git.example.com", &listed)).unwrap();
        let err = known.verify("git.example.com", &presented).unwrap_err();
        assert!(err.to_string().contains("other types"), "{err}");
    }

    #[test]
    fn non_standard_ports_use_the_bracketed_form() {
        let key = blob("ssh-ed25519", b"server");
        let known = KnownHosts::parse(&line("[127.0.0.1]:2222", &key)).unwrap();
        assert_eq!(known.verify("[127.0.0.1]:2222", &key), Ok(()));
        assert!(known.verify("127.0.0.1", &key).is_err());
        assert!(known.verify("[127.0.0.1]:2223", &key).is_err());
    }

    #[test]
    fn wildcards_match_and_negations_exclude() {
        let key = blob("ssh-ed25519", b"server");
        let known = KnownHosts::parse(&line("*.example.com,!evil.example.com", &key)).unwrap();
        assert_eq!(known.verify("GIT.example.com", &key), Ok(()));
        assert!(known.verify("evil.example.com", &key).is_err());
        assert!(known.verify("example.org", &key).is_err());
    }

    #[test]
    fn a_revoked_key_is_refused_even_when_also_listed() {
        let key = blob("ssh-ed25519", b"server");
        let content = format!(
            "{}\n@revoked {}",
            line("git.example.com", &key),
            line("*", &key)
        );
        let known = KnownHosts::parse(&content).unwrap();
        assert!(matches!(
            known.verify("git.example.com", &key),
            Err(HostKeyError::Revoked { .. })
        ));
    }

    #[test]
    fn malformed_lines_are_reported_with_their_number() {
        let err = KnownHosts::parse("# comment\n\nhost ssh-ed25519 not*base64").unwrap_err();
        assert!(matches!(
            err,
            HostKeyError::InvalidKnownHosts { line: 3, .. }
        ));
        assert!(KnownHosts::parse("host-only").is_err());
    }
}
