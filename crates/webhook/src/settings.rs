//! The decision-relevant configuration of one installation, built from the flags.

use arbor_policy::keys::Keys;
use arbor_policy::ownership::WatchScope;
use arbor_policy::propagation::PropagationRules;

use crate::rules::drift::DriftSettings;

/// Everything the rules need to know about this installation.
#[derive(Debug, Clone)]
pub struct PolicySettings {
    /// `--gittrack-mode`, `--clustergittrack-mode`, `--namespace`.
    pub scope: WatchScope,
    /// `--domain`: the hierarchy keys and Arbor's own annotations.
    pub keys: Keys,
    /// Naming policies for SubNamespaces, from `--hierarchy-config` (none without it).
    pub rules: PropagationRules,
    /// `--allow-cascading-deletion`.
    pub allow_cascading_deletion: bool,
    /// `--prevent-drift`; `None` when off.
    pub drift: Option<DriftSettings>,
}

impl PolicySettings {
    /// Settings with the given scope and keys, no cascading deletion, no drift prevention.
    pub fn new(scope: WatchScope, keys: Keys) -> Self {
        Self {
            rules: PropagationRules::empty(&keys),
            scope,
            keys,
            allow_cascading_deletion: false,
            drift: None,
        }
    }

    /// These settings judging SubNamespace names by `rules` (compiled for the same domain).
    pub fn with_rules(mut self, rules: PropagationRules) -> Self {
        self.rules = rules;
        self
    }
}
