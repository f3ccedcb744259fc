//! Kubernetes name rules, as the API server applies them.
//!
//! Most kinds only forbid names that cannot be a URL path segment, which is why RBAC names such
//! as `system:aggregate-to-view` are valid. Namespaces, and therefore namespace directories, must
//! be DNS-1123 labels.

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
    fn namespace_names_are_dns_labels() {
        for ok in ["shipping-prod", "a", "a1"] {
            assert!(namespace_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Shipping", "-a", "a-", "a.b", "a_b", &"x".repeat(64)] {
            assert!(namespace_name(bad).is_err(), "{bad}");
        }
    }
}
