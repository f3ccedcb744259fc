//! The validation every kind gets: object names per the kind's [`NameRule`], with
//! kube-apiserver's messages.

use serde_json::Value;

use crate::registry::NameRule;
use crate::status::Cause;

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// Why `name` is not a valid name under `rule`, if it is not.
pub fn name_problems(name: &str, rule: NameRule) -> Vec<String> {
    match rule {
        NameRule::Subdomain if !is_dns_subdomain(name) => {
            let mut problems = vec![SUBDOMAIN_MESSAGE.to_owned()];
            if name.len() > 253 {
                problems.insert(0, "must be no more than 253 characters".to_owned());
            }
            problems
        }
        NameRule::Label if !is_dns_label(name) => {
            let mut problems = vec![LABEL_MESSAGE.to_owned()];
            if name.len() > 63 {
                problems.insert(0, "must be no more than 63 characters".to_owned());
            }
            problems
        }
        NameRule::PathSegment => {
            let mut problems = Vec::new();
            if name == "." || name == ".." {
                problems.push(format!("may not be '{name}'"));
            }
            for forbidden in ["/", "%"] {
                if name.contains(forbidden) {
                    problems.push(format!("may not contain '{forbidden}'"));
                }
            }
            problems
        }
        _ => Vec::new(),
    }
}

/// Causes for an invalid `metadata.name`; empty when the name is fine.
pub fn validate_name(name: &str, rule: NameRule) -> Vec<Cause> {
    name_problems(name, rule)
        .into_iter()
        .map(|why| Cause::invalid("metadata.name", &Value::from(name), &why))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_allow_dots_but_not_capitals_or_underscores() {
        assert!(validate_name("web.example", NameRule::Subdomain).is_empty());
        assert!(!validate_name("Web", NameRule::Subdomain).is_empty());
        assert!(!validate_name("a_b", NameRule::Subdomain).is_empty());
        assert!(!validate_name("-a", NameRule::Subdomain).is_empty());
    }

    #[test]
    fn labels_refuse_dots() {
        assert!(validate_name("team-a", NameRule::Label).is_empty());
        assert!(!validate_name("team.a", NameRule::Label).is_empty());
        assert!(!validate_name(&"a".repeat(64), NameRule::Label).is_empty());
    }

    #[test]
    fn path_segments_refuse_slashes_and_dots() {
        assert!(validate_name("system:controller:x", NameRule::PathSegment).is_empty());
        assert!(!validate_name("a/b", NameRule::PathSegment).is_empty());
        assert!(!validate_name("..", NameRule::PathSegment).is_empty());
    }
}
