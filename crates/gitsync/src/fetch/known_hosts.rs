//! Verification of an ssh server's host key against the content of a `known_hosts` file.
//!
//! The rules are OpenSSH's, restricted to what a deploy configuration needs: host patterns
//! with `*` / `?` wildcards and `!` negation, `[host]:port` for ports other than 22, hashed
//! host names (`|1|<salt>|<hash>`, HMAC-SHA1 of the name keyed with the salt: what
//! `ssh-keyscan -H` and `HashKnownHosts yes` write), and the `@revoked` marker, which refuses a
//! key whether its line names the host plainly or hashed. A host that no line names, or names
//! only with keys of other types, is unknown; a host listed with a different key of the same
//! type is a mismatch. Both are refused.
//!
//! `@cert-authority` lines are read but cannot vouch for a server: the ssh transport (libssh2)
//! negotiates plain host keys only, never host certificates, so there is no certificate to
//! check against the authority. A host known only through such a line is refused with an error
//! that says so and asks for its plain key. Other hash kinds than `|1|` are refused when the
//! file is read.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::hmac;

/// Why a server's host key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostKeyError {
    #[error(
        "host key of {host} ({key_type}) is not in known_hosts{}{}",
        if *other_types_listed { " (known_hosts lists keys of other types for this host)" } else { "" },
        if *only_cert_authority {
            " (known_hosts trusts this host only through @cert-authority, which is not \
             supported: the ssh transport receives plain host keys, not certificates; list the \
             host's own key, e.g. from ssh-keyscan)"
        } else { "" }
    )]
    Unknown {
        host: String,
        key_type: String,
        other_types_listed: bool,
        only_cert_authority: bool,
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

/// The hosts a line names.
#[derive(Debug, Clone)]
enum Hosts {
    /// Comma-separated patterns, with wildcards and negations.
    Patterns(Vec<String>),
    /// `|1|salt|hash`: the HMAC-SHA1 of the host name, keyed with the salt.
    Hashed { salt: Vec<u8>, hash: Vec<u8> },
}

#[derive(Debug, Clone)]
struct Entry {
    marker: Marker,
    hosts: Hosts,
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
                hosts: parse_hosts(first).map_err(|reason| invalid(&reason))?,
                key_type: key_type.to_owned(),
                key,
            });
        }
        Ok(KnownHosts { entries })
    }

    /// Accepts `presented_key` (the ssh wire encoding of the public key, as in known_hosts
    /// after base64 decoding) for `host` (as [`known_hosts_name`] writes it), or says why not.
    ///
    /// [`known_hosts_name`]: arbor_policy::git_url::GitUrl::known_hosts_name
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
        let only_cert_authority = trusted.is_empty()
            && self
                .entries
                .iter()
                .any(|entry| entry.marker == Marker::CertAuthority && host_matches(entry, host));
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
            only_cert_authority,
        })
    }
}

/// The key type named inside an ssh public key blob (a length-prefixed string first).
fn wire_key_type(blob: &[u8]) -> Option<String> {
    let length = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
    let name = blob.get(4..4 + length)?;
    String::from_utf8(name.to_vec()).ok()
}

/// The hosts field of a line: `|1|salt|hash` or comma-separated patterns.
fn parse_hosts(field: &str) -> Result<Hosts, String> {
    let Some(hashed) = field.strip_prefix('|') else {
        return Ok(Hosts::Patterns(
            field.split(',').map(str::to_owned).collect(),
        ));
    };
    let mut parts = hashed.split('|');
    let (Some(kind), Some(salt), Some(hash), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a hashed host name must be |1|<salt>|<hash>".to_owned());
    };
    if kind != "1" {
        return Err(format!(
            "hashed host names of kind |{kind}| are not supported (only OpenSSH's |1|, \
             HMAC-SHA1)"
        ));
    }
    let decode = |what: &str, text: &str| {
        BASE64
            .decode(text)
            .map_err(|err| format!("the hashed host name's {what} is not base64: {err}"))
    };
    let (salt, hash) = (decode("salt", salt)?, decode("hash", hash)?);
    if hash.len() != 20 {
        return Err("the hashed host name's hash is not 20 bytes (HMAC-SHA1)".to_owned());
    }
    Ok(Hosts::Hashed { salt, hash })
}

/// Whether `host` matches the entry: its hash, or some positive pattern and no negated one.
fn host_matches(entry: &Entry, host: &str) -> bool {
    let patterns = match &entry.hosts {
        Hosts::Hashed { salt, hash } => {
            let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
            return hmac::verify(&key, host.as_bytes(), hash).is_ok();
        }
        Hosts::Patterns(patterns) => patterns,
    };
    let mut matched = false;
    for pattern in patterns {
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

    /// A hashed host field as OpenSSH writes it, with a fixed salt.
    fn hashed(host: &str) -> String {
        let salt = b"0123456789abcdefghij";
        let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
        let tag = hmac::sign(&key, host.as_bytes());
        format!("|1|{}|{}", BASE64.encode(salt), BASE64.encode(tag.as_ref()))
    }

    #[test]
    fn hashed_host_names_match_only_their_host() {
        let key = blob("ssh-ed25519", b"server");
        let known = KnownHosts::parse(&line(&hashed("[127.0.0.1]:2222"), &key)).unwrap();
        assert_eq!(known.verify("[127.0.0.1]:2222", &key), Ok(()));
        assert!(matches!(
            known.verify("[127.0.0.1]:2223", &key),
            Err(HostKeyError::Unknown { .. })
        ));
        let other = blob("ssh-ed25519", b"impostor");
        assert!(matches!(
            known.verify("[127.0.0.1]:2222", &other),
            Err(HostKeyError::Mismatch { .. })
        ));
    }

    #[test]
    fn a_hashed_revoked_line_refuses_the_key() {
        let key = blob("ssh-ed25519", b"server");
        let content = format!(
            "{}\n@revoked {}",
            line("git.example.com", &key),
            line(&hashed("git.example.com"), &key)
        );
        let known = KnownHosts::parse(&content).unwrap();
        assert!(matches!(
            known.verify("git.example.com", &key),
            Err(HostKeyError::Revoked { .. })
        ));
    }

    #[test]
    fn a_host_known_only_through_a_cert_authority_is_refused_saying_why() {
        let key = blob("ssh-ed25519", b"server");
        let authority = blob("ssh-ed25519", b"authority");
        let known = KnownHosts::parse(&format!(
            "@cert-authority {}",
            line("*.example.com", &authority)
        ))
        .unwrap();
        let err = known.verify("git.example.com", &key).unwrap_err();
        assert!(
            matches!(
                err,
                HostKeyError::Unknown {
                    only_cert_authority: true,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("@cert-authority"), "{err}");
    }

    #[test]
    fn unsupported_hash_kinds_are_refused_when_read() {
        let key = blob("ssh-ed25519", b"server");
        let err = KnownHosts::parse(&line("|2|c2FsdA==|aGFzaA==", &key)).unwrap_err();
        assert!(err.to_string().contains("|2|"), "{err}");
        assert!(KnownHosts::parse(&line("|1|c2FsdA==", &key)).is_err());
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
