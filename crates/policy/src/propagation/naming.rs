//! Naming policies for sub-namespaces (Accurate's `namingPolicies`).
//!
//! A policy is a pair of regular expressions `{root, match}`. When a SubNamespace is created
//! below a root namespace whose name the `root` expression finds, the SubNamespace's name must
//! be found by the `match` expression. Every policy whose `root` applies must be satisfied.
//!
//! `match` may refer to the capture groups of `root` as `$1`, `${1}`, `$name` or `${name}`;
//! they are replaced by what the groups captured in the root's name before `match` is compiled.
//! With `root: ^app-(?P<team>.*)` and `match: ^app-${team}-.*`, a root named `app-team1`
//! requires sub-namespace names matching `^app-team1-.*`. As in Accurate (Go's `Expand`), a
//! name runs as far as it can, so `$1x` refers to a group named `1x`; write `${1}x`. When the
//! root expression is found several times in the root's name, the expansions are concatenated.
//!
//! Both expressions search rather than match whole names: anchor them with `^…$` to constrain
//! the whole name.

use regex::Regex;

/// One compiled naming policy.
#[derive(Debug, Clone)]
pub struct NamingPolicy {
    root: Regex,
    match_template: String,
}

/// Why a sub-namespace name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamingError {
    #[error(
        "sub-namespace {name} under root {root} does not match the naming policy root={root_pattern} match={match_pattern} (expanded: {expanded})"
    )]
    Mismatch {
        name: String,
        root: String,
        root_pattern: String,
        match_pattern: String,
        expanded: String,
    },
    #[error(
        "naming policy root={root_pattern} match={match_pattern} expands to {expanded:?} for root {root}, which is not a regular expression: {reason}"
    )]
    InvalidExpansion {
        root: String,
        root_pattern: String,
        match_pattern: String,
        expanded: String,
        reason: String,
    },
}

impl NamingPolicy {
    /// Compiles the `root` expression; `match` is compiled per root once expanded.
    pub fn new(root: &str, match_template: &str) -> Result<Self, regex::Error> {
        Ok(Self {
            root: Regex::new(root)?,
            match_template: match_template.to_owned(),
        })
    }

    /// The `match` expression for `root`, or `None` when this policy does not apply to it.
    pub fn expanded_for(&self, root: &str) -> Option<String> {
        let mut expanded = String::new();
        let mut applies = false;
        for captures in self.root.captures_iter(root) {
            applies = true;
            captures.expand(&self.match_template, &mut expanded);
        }
        applies.then_some(expanded)
    }

    /// Checks the name of a sub-namespace created below `root`.
    pub fn check(&self, name: &str, root: &str) -> Result<(), NamingError> {
        let Some(expanded) = self.expanded_for(root) else {
            return Ok(());
        };
        let matcher = Regex::new(&expanded).map_err(|e| NamingError::InvalidExpansion {
            root: root.to_owned(),
            root_pattern: self.root.as_str().to_owned(),
            match_pattern: self.match_template.clone(),
            expanded: expanded.clone(),
            reason: e.to_string(),
        })?;
        if matcher.is_match(name) {
            Ok(())
        } else {
            Err(NamingError::Mismatch {
                name: name.to_owned(),
                root: root.to_owned(),
                root_pattern: self.root.as_str().to_owned(),
                match_pattern: self.match_template.clone(),
                expanded,
            })
        }
    }
}

/// Checks `name` against every policy, reporting the first one it breaks.
pub fn check_naming(policies: &[NamingPolicy], name: &str, root: &str) -> Result<(), NamingError> {
    policies.iter().try_for_each(|p| p.check(name, root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_capture_is_substituted_into_match() {
        let policy = NamingPolicy::new("^app-(?P<team>.*)", "^app-${team}-.*").unwrap();
        assert_eq!(policy.expanded_for("app-team1").unwrap(), "^app-team1-.*");
        assert!(policy.check("app-team1-dev", "app-team1").is_ok());
        assert!(matches!(
            policy.check("app-team2-dev", "app-team1"),
            Err(NamingError::Mismatch { .. })
        ));
    }

    #[test]
    fn numbered_capture_is_substituted_into_match() {
        let policy = NamingPolicy::new("^(\\w+)-root$", "^${1}-[a-z]+$").unwrap();
        assert!(policy.check("shop-cart", "shop-root").is_ok());
        assert!(policy.check("cart", "shop-root").is_err());
    }

    #[test]
    fn policy_whose_root_does_not_apply_allows_any_name() {
        let policy = NamingPolicy::new("^foo$", "^foo-").unwrap();
        assert_eq!(policy.expanded_for("bar"), None);
        assert!(policy.check("anything", "bar").is_ok());
    }

    #[test]
    fn every_applying_policy_must_hold() {
        let policies = [
            NamingPolicy::new("^team", "-dev$|-prod$").unwrap(),
            NamingPolicy::new("^team-a$", "^a-").unwrap(),
        ];
        assert!(check_naming(&policies, "a-x-dev", "team-a").is_ok());
        assert!(check_naming(&policies, "b-x-dev", "team-a").is_err());
        assert!(check_naming(&policies, "b-x-dev", "team-b").is_ok());
    }

    #[test]
    fn expansion_that_is_not_a_regex_is_reported() {
        let policy = NamingPolicy::new("^(.*)$", "^${1}$").unwrap();
        assert!(matches!(
            policy.check("x", "a("),
            Err(NamingError::InvalidExpansion { .. })
        ));
    }
}
