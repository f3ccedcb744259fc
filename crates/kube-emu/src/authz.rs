//! Authorization: may this identity do this verb on this resource. The emulator allows
//! everything by default ([`AllowAll`]); [`DenyRules`] refuses chosen verbs on chosen resources
//! to chosen identities, so a controller's start-up permission checks and its behaviour when
//! forbidden can be tested. The same decision answers SelfSubjectAccessReviews.
//!
//! Deny rules are written as `deny user=<name> verb=<verb> resource=<resource> namespace=<ns>`
//! (fields optional, each may be `*` or a comma-separated list, also `group=` for a user group
//! and `apiGroup=`), or as YAML for `--deny-rules`:
//!
//! ```yaml
//! rules:
//!   - users: ["system:serviceaccount:arbor-system:arbor-hierarchy"]
//!     verbs: [delete]
//!     resources: [secrets]
//!     namespaces: ["*"]
//! ```
//!
//! A field left out (or empty) matches anything. `resources` entries are `plural`,
//! `plural/subresource`, `plural/*` or `*`; `namespaces` entries are names, `*`, or `""` for
//! cluster-scoped requests. Deny rules judge resource requests only; non-resource paths
//! (discovery, `/version`, OpenAPI) are judged by the authorizer alone.
//!
//! With `--authorization rbac` the authorizer is the `rbac` module's, which reads the stored
//! Roles, ClusterRoles and bindings; deny rules still come first.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::auth::Identity;
use crate::error::Error;
use crate::registry::ResourceId;
use crate::status::ApiError;

/// The question an authorizer answers, as in a SubjectAccessReview's resourceAttributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The path of a non-resource request (`/apis`, `/version`); `None` for resources.
    pub path: Option<String>,
}

impl Attributes {
    /// `resource` or `resource/subresource`, as messages name it.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// kube-apiserver's wording of a refusal (responsewriters' `forbiddenMessage`), with the
    /// authorizer's reason appended when it gave one.
    pub fn forbidden_message(&self, username: &str, reason: &str) -> String {
        let what = match &self.path {
            Some(path) => format!("User \"{username}\" cannot {} path \"{path}\"", self.verb),
            None => {
                let scope = if self.namespace.is_empty() {
                    "at the cluster scope".to_owned()
                } else {
                    format!("in the namespace \"{}\"", self.namespace)
                };
                format!(
                    "User \"{username}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
                    self.verb,
                    self.combined_resource(),
                    self.group
                )
            }
        };
        if reason.is_empty() {
            what
        } else {
            format!("{what}: {reason}")
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

pub trait Authorizer: Send + Sync + std::fmt::Debug {
    fn authorize(&self, identity: &Identity, attributes: &Attributes) -> Decision;

    /// Whether a refusal of `attributes` is an explicit denial (an access review's
    /// `status.denied`) rather than kube's "no opinion", which is all RBAC ever gives.
    fn denies_explicitly(&self, _identity: &Identity, _attributes: &Attributes) -> bool {
        true
    }

    /// The rules `identity` holds in `namespace`, for SelfSubjectRulesReview (`kubectl auth
    /// can-i --list`); an authorizer that cannot list them says the list is incomplete.
    fn rules_for(&self, _identity: &Identity, _namespace: &str) -> RuleList {
        RuleList {
            incomplete: true,
            ..RuleList::default()
        }
    }
}

/// The rules a SelfSubjectRulesReview lists: RBAC PolicyRule objects, resource and
/// non-resource ones together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleList {
    pub rules: Vec<serde_json::Value>,
    pub incomplete: bool,
    pub evaluation_error: String,
}

impl RuleList {
    /// Everything, as `*` rules.
    pub fn everything() -> RuleList {
        RuleList {
            rules: vec![
                serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
            ],
            incomplete: false,
            evaluation_error: String::new(),
        }
    }
}

/// Allows every request: the emulator's policy unless rules deny.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn rules_for(&self, _identity: &Identity, _namespace: &str) -> RuleList {
        RuleList::everything()
    }

    fn authorize(&self, _identity: &Identity, _attributes: &Attributes) -> Decision {
        Decision {
            allowed: true,
            reason: "arbor-kube-emu allows every request".into(),
        }
    }
}

/// The 403 for a refused request, as kube-apiserver's authorization filter writes it.
pub(crate) fn refusal(identity: &Identity, attributes: &Attributes, reason: &str) -> ApiError {
    let message = attributes.forbidden_message(&identity.username, reason);
    match attributes.path {
        Some(_) => ApiError::forbidden_path(&message),
        None => ApiError::forbidden(
            &ResourceId::new(&attributes.group, &attributes.resource),
            &attributes.name,
            &message,
        ),
    }
}

/// Asks `authorizer`; a refusal is kube-apiserver's 403.
pub(crate) fn check(
    authorizer: &dyn Authorizer,
    identity: &Identity,
    attributes: &Attributes,
) -> Result<(), ApiError> {
    let decision = authorizer.authorize(identity, attributes);
    if decision.allowed {
        return Ok(());
    }
    tracing::debug!(
        user = %identity.username,
        reason = %decision.reason,
        "forbidden: {}",
        attributes.forbidden_message(&identity.username, "")
    );
    Err(refusal(identity, attributes, &decision.reason))
}

/// One rule: the requests it matches are denied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DenyRule {
    pub users: Vec<String>,
    pub groups: Vec<String>,
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub namespaces: Vec<String>,
}

/// An empty list or `*` matches anything.
fn any_or(patterns: &[String], matches: impl Fn(&str) -> bool) -> bool {
    patterns.is_empty()
        || patterns
            .iter()
            .any(|pattern| pattern == "*" || matches(pattern))
}

impl DenyRule {
    /// Parses `deny user=a verb=delete,patch resource=secrets namespace=*`.
    pub fn parse(text: &str) -> Result<DenyRule, String> {
        let mut words = text.split_whitespace();
        if words.next() != Some("deny") {
            return Err(format!("a deny rule starts with \"deny\": {text:?}"));
        }
        let mut rule = DenyRule::default();
        for word in words {
            let (field, values) = word
                .split_once('=')
                .ok_or_else(|| format!("expected field=value, got {word:?} in {text:?}"))?;
            let values: Vec<String> = values.split(',').map(str::to_owned).collect();
            let list = match field {
                "user" => &mut rule.users,
                "group" => &mut rule.groups,
                "verb" => &mut rule.verbs,
                "apiGroup" => &mut rule.api_groups,
                "resource" => &mut rule.resources,
                "namespace" => &mut rule.namespaces,
                other => return Err(format!("unknown field {other:?} in {text:?}")),
            };
            list.extend(values);
        }
        Ok(rule)
    }

    pub fn matches(&self, identity: &Identity, attributes: &Attributes) -> bool {
        attributes.path.is_none()
            && any_or(&self.users, |user| user == identity.username)
            && any_or(&self.groups, |group| {
                identity.groups.iter().any(|held| held == group)
            })
            && any_or(&self.verbs, |verb| verb == attributes.verb)
            && any_or(&self.api_groups, |group| group == attributes.group)
            && any_or(&self.resources, |pattern| {
                resource_matches(pattern, &attributes.resource, &attributes.subresource)
            })
            && any_or(&self.namespaces, |namespace| {
                namespace == attributes.namespace
            })
    }
}

/// `plural`, `plural/sub`, `plural/*`, `*/sub`.
fn resource_matches(pattern: &str, resource: &str, subresource: &str) -> bool {
    let (wanted_resource, wanted_sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    (wanted_resource == "*" || wanted_resource == resource)
        && (wanted_sub == subresource || (wanted_sub == "*" && !subresource.is_empty()))
}

impl fmt::Display for DenyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deny")?;
        for (field, values) in [
            ("user", &self.users),
            ("group", &self.groups),
            ("verb", &self.verbs),
            ("apiGroup", &self.api_groups),
            ("resource", &self.resources),
            ("namespace", &self.namespaces),
        ] {
            if !values.is_empty() {
                write!(f, " {field}={}", values.join(","))?;
            }
        }
        Ok(())
    }
}

/// The YAML file of `--deny-rules`.
#[derive(Debug, Clone, Default, Deserialize)]
struct DenyRuleFile {
    #[serde(default)]
    rules: Vec<DenyRule>,
}

/// Reads a `--deny-rules` YAML file.
pub fn read_deny_rules(path: &Path) -> Result<Vec<DenyRule>, Error> {
    let contents = std::fs::read_to_string(path).map_err(|source| Error::Io {
        what: format!("reading deny rules {}", path.display()),
        source,
    })?;
    let file: DenyRuleFile =
        serde_saphyr::from_str(&contents).map_err(|error| Error::DenyRules {
            path: path.display().to_string(),
            problem: error.to_string(),
        })?;
    Ok(file.rules)
}

/// Denies what any rule matches and asks `then` about the rest.
#[derive(Debug)]
pub struct DenyRules {
    rules: Vec<DenyRule>,
    then: Arc<dyn Authorizer>,
}

impl DenyRules {
    pub fn new(rules: Vec<DenyRule>, then: Arc<dyn Authorizer>) -> DenyRules {
        DenyRules { rules, then }
    }
}

impl Authorizer for DenyRules {
    fn denies_explicitly(&self, identity: &Identity, attributes: &Attributes) -> bool {
        self.rules
            .iter()
            .any(|rule| rule.matches(identity, attributes))
            || self.then.denies_explicitly(identity, attributes)
    }

    /// The rules of the authorizer behind; incomplete when a deny rule may take some away
    /// (rules cannot say "except").
    fn rules_for(&self, identity: &Identity, namespace: &str) -> RuleList {
        let mut list = self.then.rules_for(identity, namespace);
        list.incomplete |= !self.rules.is_empty();
        list
    }

    fn authorize(&self, identity: &Identity, attributes: &Attributes) -> Decision {
        match self
            .rules
            .iter()
            .find(|rule| rule.matches(identity, attributes))
        {
            Some(rule) => Decision {
                allowed: false,
                reason: format!("denied by the arbor-kube-emu rule \"{rule}\""),
            },
            None => self.then.authorize(identity, attributes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(verb: &str, resource: &str, namespace: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn a_rule_denies_only_what_it_names() {
        let rule = DenyRule::parse(
            "deny user=system:serviceaccount:arbor-system:arbor-hierarchy verb=delete resource=secrets namespace=*",
        )
        .expect("parses");
        let robot = Identity::service_account("arbor-system", "arbor-hierarchy");
        let rules = DenyRules::new(vec![rule], Arc::new(AllowAll));
        let denied = rules.authorize(&robot, &attributes("delete", "secrets", "team"));
        assert!(!denied.allowed);
        assert!(denied.reason.contains("verb=delete"), "{}", denied.reason);
        assert!(
            rules
                .authorize(&robot, &attributes("get", "secrets", "team"))
                .allowed
        );
        assert!(
            rules
                .authorize(&Identity::admin(), &attributes("delete", "secrets", "team"))
                .allowed
        );
    }

    #[test]
    fn subresource_patterns() {
        assert!(resource_matches("pods/status", "pods", "status"));
        assert!(!resource_matches("pods", "pods", "status"));
        assert!(resource_matches("pods/*", "pods", "status"));
        assert!(!resource_matches("pods/*", "pods", ""));
        assert!(resource_matches("*", "secrets", ""));
    }

    #[test]
    fn group_rules_match_any_held_group() {
        let rule = DenyRule::parse("deny group=system:serviceaccounts:team").expect("parses");
        assert!(rule.matches(
            &Identity::service_account("team", "x"),
            &attributes("list", "pods", "team")
        ));
        assert!(!rule.matches(&Identity::admin(), &attributes("list", "pods", "team")));
    }

    #[test]
    fn malformed_rules_say_why() {
        assert!(DenyRule::parse("allow user=x").is_err());
        assert!(
            DenyRule::parse("deny colour=red")
                .unwrap_err()
                .contains("colour")
        );
    }
}
