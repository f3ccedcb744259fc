//! Well-known label and annotation keys.
//!
//! Every key Arbor reads or writes on someone else's objects lives under one configurable
//! domain. Choosing `accurate.cybozu.com` or `innu.cybozu.com` makes the hierarchy rules read
//! and write exactly the keys those systems use, so a cluster can switch over without being
//! re-annotated. The management label is configured separately because repositories written
//! for Nomos carry `nomos.dev/managed` regardless of the hierarchy domain.

use std::fmt;

/// The domain used when none is configured.
pub const DEFAULT_DOMAIN: &str = "arbor.dev";
/// The Accurate domain (seeds/001).
pub const ACCURATE_DOMAIN: &str = "accurate.cybozu.com";
/// The Innu domain (seeds/003).
pub const INNU_DOMAIN: &str = "innu.cybozu.com";

/// Why a domain cannot prefix Kubernetes label keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid key domain {domain:?}: {reason}")]
pub struct InvalidDomain {
    pub domain: String,
    pub reason: &'static str,
}

/// The label and annotation keys of one key domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    domain: String,
    /// `<domain>/type`: `root` or `template` on a namespace.
    pub type_label: String,
    /// `<domain>/template`: on a namespace, the template namespace it follows.
    pub template_label: String,
    /// `<domain>/parent`: on a sub-namespace, its parent namespace.
    pub parent_label: String,
    /// `<domain>/propagate`: `create` or `update` on an object to copy into descendants.
    pub propagate_annotation: String,
    /// `<domain>/propagate-generated`: on an owner, the mode its generated objects get.
    pub propagate_generated_annotation: String,
    /// `<domain>/from`: on a copy, the namespace it was copied from.
    pub from_annotation: String,
}

impl Keys {
    /// Builds the keys of `domain`, which must be a DNS subdomain (the prefix rule of label keys).
    pub fn for_domain(domain: &str) -> Result<Self, InvalidDomain> {
        validate_dns_subdomain(domain).map_err(|reason| InvalidDomain {
            domain: domain.to_owned(),
            reason,
        })?;
        let key = |name: &str| format!("{domain}/{name}");
        Ok(Self {
            domain: domain.to_owned(),
            type_label: key("type"),
            template_label: key("template"),
            parent_label: key("parent"),
            propagate_annotation: key("propagate"),
            propagate_generated_annotation: key("propagate-generated"),
            from_annotation: key("from"),
        })
    }

    /// The domain these keys live under.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// A key under this domain that is not one of the hierarchy keys, such as Arbor's own
    /// annotations.
    pub fn custom(&self, name: &str) -> String {
        format!("{}/{name}", self.domain)
    }
}

impl Default for Keys {
    fn default() -> Self {
        Self::for_domain(DEFAULT_DOMAIN).expect("the default domain is valid")
    }
}

/// The label whose presence tells Arbor that it may update or delete an object (seeds/000,
/// "Has Label").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementLabel {
    pub key: String,
    pub value: String,
}

impl ManagementLabel {
    /// `arbor.dev/managed=enabled`.
    pub fn arbor() -> Self {
        Self {
            key: "arbor.dev/managed".into(),
            value: "enabled".into(),
        }
    }

    /// `nomos.dev/managed=enabled`, for repositories written for Nomos.
    pub fn nomos() -> Self {
        Self {
            key: "nomos.dev/managed".into(),
            value: "enabled".into(),
        }
    }

    /// Parses `key=value`; a bare key means the value `enabled`.
    pub fn parse(spec: &str) -> Result<Self, InvalidDomain> {
        let (key, value) = spec.split_once('=').unwrap_or((spec, "enabled"));
        let invalid = |reason| InvalidDomain {
            domain: spec.to_owned(),
            reason,
        };
        let (prefix, name) = key.split_once('/').ok_or_else(|| {
            invalid("a management label needs a prefixed key, like arbor.dev/managed")
        })?;
        validate_dns_subdomain(prefix).map_err(invalid)?;
        if name.is_empty() || value.is_empty() {
            return Err(invalid("the label name and value must not be empty"));
        }
        Ok(Self {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }

    /// Whether an object with these labels carries the management label.
    pub fn is_on<'a>(&self, labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> bool {
        labels
            .into_iter()
            .any(|(k, v)| *k == self.key && *v == self.value)
    }
}

impl Default for ManagementLabel {
    fn default() -> Self {
        Self::arbor()
    }
}

/// The form every controller's `--management-label` flag takes: [`ManagementLabel::parse`].
impl std::str::FromStr for ManagementLabel {
    type Err = InvalidDomain;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        Self::parse(spec)
    }
}

impl fmt::Display for ManagementLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

fn validate_dns_subdomain(domain: &str) -> Result<(), &'static str> {
    if domain.is_empty() || domain.len() > 253 {
        return Err("must be 1 to 253 characters");
    }
    for label in domain.split('.') {
        let valid_chars = label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if label.is_empty() || !valid_chars || label.starts_with('-') || label.ends_with('-') {
            return Err("must be lower-case DNS labels separated by dots");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accurate_domain_yields_accurate_keys() {
        let keys = Keys::for_domain(ACCURATE_DOMAIN).unwrap();
        assert_eq!(keys.parent_label, "accurate.cybozu.com/parent");
        assert_eq!(
            keys.propagate_generated_annotation,
            "accurate.cybozu.com/propagate-generated"
        );
    }

    #[test]
    fn innu_domain_yields_innu_keys() {
        let keys = Keys::for_domain(INNU_DOMAIN).unwrap();
        assert_eq!(keys.type_label, "innu.cybozu.com/type");
        assert_eq!(keys.from_annotation, "innu.cybozu.com/from");
    }

    #[test]
    fn invalid_domains_are_refused() {
        for bad in ["", "Arbor.dev", "-a.dev", "a..dev", "a/b"] {
            assert!(Keys::for_domain(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn management_label_parses_key_and_value() {
        assert_eq!(
            ManagementLabel::parse("nomos.dev/managed").unwrap(),
            ManagementLabel::nomos()
        );
        let custom = ManagementLabel::parse("example.com/owned=yes").unwrap();
        assert_eq!(custom.to_string(), "example.com/owned=yes");
        assert!(ManagementLabel::parse("managed").is_err());
    }
}
