//! Authentication: who is asking. Either everyone is the cluster admin (no token file), or each
//! request must carry a bearer token from a static token file in kube-apiserver's
//! `--token-auth-file` format: `token,user,uid,"group1,group2"`.
//!
//! Tokens can also be minted while the server runs ([`Authenticator::issue`], behind
//! `KubeEmu::token_for` and `KubeEmu::service_account_token`), so a test can act as several
//! users. Without a token file an unknown or missing token is still the admin; a known token is
//! always its own user.
//!
//! A user named `system:serviceaccount:<namespace>:<name>` is a service account and carries the
//! groups kube gives service accounts (`system:serviceaccounts`,
//! `system:serviceaccounts:<namespace>`), whether it comes from the token file or is minted.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::RwLock;

use crate::error::Error;

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Extra attributes by key (`scopes`, ...), as an authenticator or impersonation gives them.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Identity {
    /// The user of a server without a token file: kube's bootstrap admin.
    pub fn admin() -> Identity {
        Identity {
            username: "system:admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            extra: BTreeMap::new(),
        }
    }

    /// A user with `groups`, plus `system:authenticated` (and the service-account groups when
    /// the name is a service account's).
    pub fn new(username: &str, uid: &str, groups: &[&str]) -> Identity {
        let mut all: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        if let Some((namespace, _)) = service_account_of(username) {
            all.push("system:serviceaccounts".into());
            all.push(format!("system:serviceaccounts:{namespace}"));
        }
        all.push("system:authenticated".into());
        all.dedup();
        Identity {
            username: username.to_owned(),
            uid: uid.to_owned(),
            groups: all,
            extra: BTreeMap::new(),
        }
    }

    /// The identity as an `authentication.k8s.io/v1` UserInfo, which admission reviews,
    /// TokenReviews and SelfSubjectReviews carry: empty fields left out, as Go's JSON does.
    pub fn user_info(&self) -> serde_json::Value {
        let mut info = serde_json::Map::new();
        info.insert("username".into(), self.username.clone().into());
        if !self.uid.is_empty() {
            info.insert("uid".into(), self.uid.clone().into());
        }
        if !self.groups.is_empty() {
            info.insert("groups".into(), self.groups.clone().into());
        }
        if !self.extra.is_empty() {
            info.insert("extra".into(), serde_json::json!(self.extra));
        }
        serde_json::Value::Object(info)
    }

    /// The identity of service account `name` in `namespace`.
    pub fn service_account(namespace: &str, name: &str) -> Identity {
        Identity::new(&service_account_username(namespace, name), "", &[])
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The namespace and name of a service-account username.
pub(crate) fn service_account_of(username: &str) -> Option<(&str, &str)> {
    username
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')
        .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty())
}

/// One line of a token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticToken {
    pub token: String,
    pub identity: Identity,
}

impl StaticToken {
    pub fn new(token: &str, username: &str, uid: &str, groups: &[&str]) -> StaticToken {
        StaticToken {
            token: token.to_owned(),
            identity: Identity::new(username, uid, groups),
        }
    }

    /// A token of service account `name` in `namespace`.
    pub fn service_account(token: &str, namespace: &str, name: &str) -> StaticToken {
        StaticToken {
            token: token.to_owned(),
            identity: Identity::service_account(namespace, name),
        }
    }
}

/// Splits one CSV record, honouring double quotes (`""` inside quotes is a quote).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut current)),
            other => current.push(other),
        }
    }
    fields.push(current);
    fields
}

/// Parses a token file's contents; `source` names the file in errors.
pub fn parse_token_file(contents: &str, source: &str) -> Result<Vec<StaticToken>, Error> {
    let mut tokens = Vec::new();
    for (index, line) in contents.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = csv_fields(line);
        if fields.len() < 3 || fields[0].is_empty() || fields[1].is_empty() {
            return Err(Error::TokenFile {
                path: source.to_owned(),
                line: index + 1,
                problem: "expected token,user,uid[,\"group1,group2\"]".into(),
            });
        }
        let groups: Vec<&str> = fields
            .get(3)
            .map(|groups| {
                groups
                    .split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        tokens.push(StaticToken::new(
            &fields[0], &fields[1], &fields[2], &groups,
        ));
    }
    Ok(tokens)
}

pub fn read_token_file(path: &Path) -> Result<Vec<StaticToken>, Error> {
    let contents = std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: format!("reading token file {}", path.display()),
        source,
    })?;
    parse_token_file(&contents, &path.display().to_string())
}

/// Maps requests to identities.
#[derive(Debug, Default)]
pub struct Authenticator {
    /// Whether a request needs a known token (a token file was given).
    required: bool,
    tokens: RwLock<HashMap<String, Identity>>,
    /// The audiences of tokens issued through TokenRequest; other tokens have none recorded
    /// and are valid for the server's own audience.
    audiences: RwLock<HashMap<String, Vec<String>>>,
}

impl Authenticator {
    pub fn new(tokens: Option<Vec<StaticToken>>) -> Authenticator {
        Authenticator {
            required: tokens.is_some(),
            tokens: RwLock::new(
                tokens
                    .into_iter()
                    .flatten()
                    .map(|token| (token.token, token.identity))
                    .collect(),
            ),
            audiences: RwLock::default(),
        }
    }

    /// Issues a token for `identity` bound to `audiences`, as a TokenRequest does.
    pub fn issue_for_audiences(&self, identity: Identity, audiences: Vec<String>) -> String {
        let token = self.issue(identity);
        self.audiences
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(token.clone(), audiences);
        token
    }

    /// A TokenReview's view of `token`: who it is and the audiences it was issued for
    /// (`None` for a token with no recorded audiences); `None` for a token nobody issued.
    pub fn review(&self, token: &str) -> Option<(Identity, Option<Vec<String>>)> {
        let identity = self
            .tokens
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(token)
            .cloned()?;
        let audiences = self
            .audiences
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(token)
            .cloned();
        Some((identity, audiences))
    }

    /// Adds a fresh random token for `identity` and returns it.
    pub fn issue(&self, identity: Identity) -> String {
        let token = format!("emu-{}", uuid::Uuid::new_v4().simple());
        self.tokens
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(token.clone(), identity);
        token
    }

    /// The identity behind an `Authorization` header value; `None` means 401.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<Identity> {
        let token = authorization
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        let known = token.and_then(|token| {
            self.tokens
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .get(token)
                .cloned()
        });
        match known {
            Some(identity) => Some(identity),
            None if self.required => None,
            None => Some(Identity::admin()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lines_carry_user_uid_and_quoted_groups() {
        let tokens = parse_token_file(
            "# comment\nsecret,alice,1001,\"dev,ops\"\nother,bob,1002\n",
            "tokens.csv",
        )
        .expect("valid");
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens[0].identity.username, "alice");
        assert_eq!(
            tokens[0].identity.groups,
            vec!["dev", "ops", "system:authenticated"]
        );
        assert_eq!(tokens[1].identity.groups, vec!["system:authenticated"]);
    }

    #[test]
    fn a_short_line_names_the_file_and_line() {
        let error = parse_token_file("ok,user,uid\nbroken\n", "tokens.csv").unwrap_err();
        assert!(error.to_string().contains("tokens.csv:2"), "{error}");
    }

    #[test]
    fn with_tokens_only_known_bearer_tokens_authenticate() {
        let auth = Authenticator::new(Some(vec![StaticToken::new("t", "alice", "1", &[])]));
        assert_eq!(
            auth.authenticate(Some("Bearer t")).map(|id| id.username),
            Some("alice".to_owned())
        );
        assert!(auth.authenticate(Some("Bearer nope")).is_none());
        assert!(auth.authenticate(None).is_none());
        assert!(Authenticator::new(None).authenticate(None).is_some());
    }

    #[test]
    fn service_account_users_carry_the_service_account_groups() {
        let tokens = parse_token_file(
            "t,system:serviceaccount:arbor-system:arbor-hierarchy,9\n",
            "tokens.csv",
        )
        .expect("valid");
        assert_eq!(
            tokens[0].identity.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:arbor-system",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn issued_tokens_authenticate_with_or_without_a_token_file() {
        for auth in [Authenticator::new(None), Authenticator::new(Some(vec![]))] {
            let token = auth.issue(Identity::service_account("ns", "robot"));
            let identity = auth
                .authenticate(Some(&format!("Bearer {token}")))
                .expect("known");
            assert_eq!(identity.username, "system:serviceaccount:ns:robot");
        }
        let open = Authenticator::new(None);
        assert_eq!(
            open.authenticate(Some("Bearer unknown")),
            Some(Identity::admin())
        );
    }
}
