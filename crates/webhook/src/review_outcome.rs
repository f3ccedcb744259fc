//! The answer to a review: every rule that was evaluated, in order, and warnings.
//!
//! A review is allowed when every check allows it; the first refusing check is the decision
//! given to the API server and to tooling. Keeping all checks lets `Review` over gRPC show why a
//! request passed, not only why one failed.

use std::fmt;

/// One evaluated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Stable rule id, like `seeds/002 ownership GitTrack cross-namespace`.
    pub rule: String,
    pub allowed: bool,
    /// Why, for people.
    pub reason: String,
}

impl Check {
    pub fn allow(rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            allowed: true,
            reason: reason.into(),
        }
    }

    pub fn deny(rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            allowed: false,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.rule, self.reason)
    }
}

/// Rule id of the answer when no Arbor rule concerns the object.
pub const NO_RULE: &str = "arbor no-rule";

/// The outcome of a review.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewOutcome {
    pub checks: Vec<Check>,
    pub warnings: Vec<String>,
}

impl ReviewOutcome {
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    pub fn warn(&mut self, warning: impl Into<String>) {
        self.warnings.push(warning.into());
    }

    pub fn allowed(&self) -> bool {
        self.checks.iter().all(|check| check.allowed)
    }

    /// The check that decides: the first refusal, else the last check that allowed, else a
    /// synthetic "no rule applies".
    pub fn decision(&self) -> Check {
        self.deciding_check()
            .cloned()
            .unwrap_or_else(|| Check::allow(NO_RULE, "no Arbor rule concerns this object"))
    }

    /// The deciding rule's id and whether it allowed, without copying the check.
    pub fn deciding_rule(&self) -> (&str, bool) {
        self.deciding_check().map_or((NO_RULE, true), |check| {
            (check.rule.as_str(), check.allowed)
        })
    }

    fn deciding_check(&self) -> Option<&Check> {
        self.checks
            .iter()
            .find(|check| !check.allowed)
            .or_else(|| self.checks.last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_refusal_decides() {
        let mut verdict = ReviewOutcome::default();
        verdict.push(Check::allow("a", "fine"));
        verdict.push(Check::deny("b", "no"));
        verdict.push(Check::deny("c", "also no"));
        assert!(!verdict.allowed());
        assert_eq!(verdict.decision().rule, "b");
        assert_eq!(verdict.deciding_rule(), ("b", false));
    }

    #[test]
    fn without_a_refusal_the_last_check_decides() {
        let mut verdict = ReviewOutcome::default();
        verdict.push(Check::allow("a", "fine"));
        verdict.push(Check::allow("b", "also fine"));
        assert!(verdict.allowed());
        assert_eq!(verdict.decision().rule, "b");
        assert_eq!(verdict.deciding_rule(), ("b", true));
    }

    #[test]
    fn without_checks_no_rule_allows() {
        let verdict = ReviewOutcome::default();
        assert!(verdict.allowed());
        assert_eq!(verdict.decision().rule, NO_RULE);
        assert_eq!(verdict.deciding_rule(), (NO_RULE, true));
    }
}
