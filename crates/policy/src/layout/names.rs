//! Kubernetes name rules, as the API server applies them, per kind ([`NameRule::of`]).
//!
//! | Kinds | Rule (kube-apiserver's validation) | Example refused |
//! |---|---|---|
//! | Namespace | DNS-1123 label (`ValidateNamespaceName`) | `Bad_Name`, `-lead`, `a.b` |
//! | Service | DNS-1035 label: a label starting with a letter (`ValidateServiceName`) | `1st` |
//! | Role, ClusterRole, RoleBinding, ClusterRoleBinding | path segment (`ValidateRBACName`) | `a/b` |
//! | every other kind, custom resources included | DNS-1123 subdomain (`NameIsDNSSubdomain`) | `Bad_Name`, `-lead` |
//!
//! The RBAC kinds only forbid names that cannot be a URL path segment, which is why names such
//! as `system:aggregate-to-view` are valid. Namespaces, and therefore namespace directories, must
//! be DNS-1123 labels. `arborctl vet` and gitsync's parse use the same rules, so a name the API
//! server would refuse is refused before anything is applied, naming the file and the rule.

/// Which rule a kind's names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A URL path segment (RBAC kinds).
    PathSegment,
    /// A DNS-1123 subdomain (most kinds).
    Subdomain,
    /// A DNS-1123 label (Namespace).
    Label,
    /// A DNS-1035 label (Service).
    Dns1035Label,
}

impl NameRule {
    /// The rule of `group`/`kind`'s names.
    pub fn of(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Namespace") => Self::Label,
            ("", "Service") => Self::Dns1035Label,
            (
                "rbac.authorization.k8s.io",
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
            ) => Self::PathSegment,
            _ => Self::Subdomain,
        }
    }

    /// Checks `name` against the rule.
    pub fn check(self, name: &str) -> Result<(), &'static str> {
        match self {
            Self::PathSegment => object_name(name),
            Self::Subdomain => subdomain(name),
            Self::Label => namespace_name(name),
            Self::Dns1035Label => {
                label(name).map_err(|_| DNS1035_MESSAGE)?;
                if name.starts_with(|c: char| c.is_ascii_digit()) {
                    return Err(DNS1035_MESSAGE);
                }
                Ok(())
            }
        }
    }
}

const DNS1035_MESSAGE: &str = "a Service name must be a DNS-1035 label: at most 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit";

/// The name rule of `group`/`kind`, applied to `name`.
pub fn name_for_kind(group: &str, kind: &str, name: &str) -> Result<(), &'static str> {
    NameRule::of(group, kind).check(name)
}

/// A DNS-1123 subdomain: at most 253 characters, DNS-1123 labels (lower-case letters, digits
/// and '-', starting and ending with a letter or digit) separated by '.'.
pub fn subdomain(name: &str) -> Result<(), &'static str> {
    const MESSAGE: &str = "a name must be a DNS-1123 subdomain: at most 253 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit";
    if name.is_empty() || name.len() > 253 {
        return Err(MESSAGE);
    }
    let valid = name.split('.').all(|part| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !part.starts_with('-')
            && !part.ends_with('-')
    });
    if valid { Ok(()) } else { Err(MESSAGE) }
}

fn label(name: &str) -> Result<(), ()> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid { Ok(()) } else { Err(()) }
}

/// The rule every object name follows: a non-empty URL path segment of at most 253 characters.
pub fn object_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a name must not be empty");
    }
    if name.len() > 253 {
        return Err("a name must be at most 253 characters");
    }
    if name == "." || name == ".." {
        return Err("a name must not be \".\" or \"..\"");
    }
    if name.contains(['/', '%']) {
        return Err("a name must not contain '/' or '%'");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a name must not contain whitespace or control characters");
    }
    Ok(())
}

/// A DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with
/// a letter or digit. Namespace names and namespace directory names follow it.
pub fn namespace_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 63 {
        return Err("a namespace name must be 1 to 63 characters");
    }
    let valid_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid_chars || name.starts_with('-') || name.ends_with('-') {
        return Err(
            "a namespace name must be lower-case letters, digits and '-', starting and ending with a letter or digit",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_follow_the_path_segment_rule() {
        for ok in ["a", "system:aggregate-to-view", "Mixed.Case_ok"] {
            assert!(object_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "50%", "a b", &"x".repeat(254)] {
            assert!(object_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_invalid_for_their_kind_are_refused_as_the_api_server_would() {
        for bad in ["Bad_Name", "-lead", "trail-", "a..b", "UPPER"] {
            assert!(name_for_kind("", "ConfigMap", bad).is_err(), "{bad}");
            assert!(name_for_kind("apps", "Deployment", bad).is_err(), "{bad}");
            assert!(name_for_kind("", "Namespace", bad).is_err(), "{bad}");
        }
        assert!(name_for_kind("", "ConfigMap", "app.settings-1").is_ok());
        assert!(name_for_kind("", "Namespace", "a.b").is_err());
        assert!(name_for_kind("", "Service", "1st").is_err());
        assert!(name_for_kind("", "Service", "web-1").is_ok());
        assert!(
            name_for_kind(
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "system:aggregate-to-view"
            )
            .is_ok()
        );
        assert!(name_for_kind("example.com", "Widget", "Bad_Name").is_err());
    }

    #[test]
    fn namespace_names_are_dns_labels() {
        for ok in ["shipping-prod", "a", "a1"] {
            assert!(namespace_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Shipping", "-a", "a-", "a.b", "a_b", &"x".repeat(64)] {
            assert!(namespace_name(bad).is_err(), "{bad}");
        }
    }
}
