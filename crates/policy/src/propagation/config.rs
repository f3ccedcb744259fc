//! The hierarchy configuration, field for field as in Accurate's configuration file, and its
//! compiled form.
//!
//! | field | used for |
//! |---|---|
//! | `labelKeys`, `annotationKeys` | namespace labels / annotations passed from a parent or template to the namespaces below it |
//! | `subNamespaceLabelKeys`, `subNamespaceAnnotationKeys` | labels / annotations a SubNamespace's spec may put on its sub-namespace |
//! | `watches` | the namespaced kinds whose objects are copied |
//! | `propagateLabelKeyExcludes`, `propagateAnnotationKeyExcludes` | labels / annotations left out of object copies |
//! | `namingPolicies` | [`super::naming`] |
//!
//! As in Accurate, the key lists may not name keys under the hierarchy's own domain: those
//! keys describe each namespace's place in the tree and are never passed on.

use serde::{Deserialize, Serialize};

use crate::keys::Keys;

use super::glob::{KeyPatterns, PatternError};
use super::naming::NamingPolicy;

/// The configuration file as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropagationConfig {
    #[serde(default)]
    pub label_keys: Vec<String>,
    #[serde(default)]
    pub annotation_keys: Vec<String>,
    #[serde(default)]
    pub sub_namespace_label_keys: Vec<String>,
    #[serde(default)]
    pub sub_namespace_annotation_keys: Vec<String>,
    #[serde(default)]
    pub watches: Vec<WatchedKind>,
    #[serde(default)]
    pub propagate_label_key_excludes: Vec<String>,
    #[serde(default)]
    pub propagate_annotation_key_excludes: Vec<String>,
    #[serde(default)]
    pub naming_policies: Vec<NamingPolicySpec>,
}

/// A namespaced kind whose objects are propagated.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchedKind {
    /// Empty for the core group.
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// One naming policy as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamingPolicySpec {
    pub root: String,
    #[serde(rename = "match")]
    pub match_pattern: String,
}

/// Why a configuration cannot be used; names the field and the offending entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: {source}")]
    MalformedPattern {
        field: &'static str,
        #[source]
        source: PatternError,
    },
    #[error("{field}: {pattern:?} names keys under {domain}/, which are never propagated")]
    ReservedKey {
        field: &'static str,
        pattern: String,
        domain: String,
    },
    #[error("namingPolicies[{index}].root: {reason}")]
    InvalidNamingPolicy { index: usize, reason: String },
}

/// The compiled configuration together with the key domain: everything the propagation
/// functions need to know.
#[derive(Debug, Clone)]
pub struct PropagationRules {
    pub(crate) keys: Keys,
    pub(crate) label_keys: KeyPatterns,
    pub(crate) annotation_keys: KeyPatterns,
    pub(crate) sub_namespace_label_keys: KeyPatterns,
    pub(crate) sub_namespace_annotation_keys: KeyPatterns,
    pub(crate) label_excludes: KeyPatterns,
    pub(crate) annotation_excludes: KeyPatterns,
    pub(crate) naming_policies: Vec<NamingPolicy>,
    pub(crate) created_by: Option<String>,
}

/// The standard label a copy or a created sub-namespace carries to say which program made it.
pub const CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";

impl PropagationConfig {
    /// Checks every pattern and compiles the naming policies for the domain of `keys`.
    pub fn compile(&self, keys: &Keys) -> Result<PropagationRules, ConfigError> {
        let selected = |field, patterns: &[String]| {
            let reserved_prefix = format!("{}/", keys.domain());
            if let Some(pattern) = patterns.iter().find(|p| p.starts_with(&reserved_prefix)) {
                return Err(ConfigError::ReservedKey {
                    field,
                    pattern: pattern.clone(),
                    domain: keys.domain().to_owned(),
                });
            }
            parse(field, patterns)
        };
        let naming_policies = self
            .naming_policies
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                NamingPolicy::new(&spec.root, &spec.match_pattern).map_err(|e| {
                    ConfigError::InvalidNamingPolicy {
                        index,
                        reason: e.to_string(),
                    }
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(PropagationRules {
            keys: keys.clone(),
            label_keys: selected("labelKeys", &self.label_keys)?,
            annotation_keys: selected("annotationKeys", &self.annotation_keys)?,
            sub_namespace_label_keys: selected(
                "subNamespaceLabelKeys",
                &self.sub_namespace_label_keys,
            )?,
            sub_namespace_annotation_keys: selected(
                "subNamespaceAnnotationKeys",
                &self.sub_namespace_annotation_keys,
            )?,
            label_excludes: parse(
                "propagateLabelKeyExcludes",
                &self.propagate_label_key_excludes,
            )?,
            annotation_excludes: parse(
                "propagateAnnotationKeyExcludes",
                &self.propagate_annotation_key_excludes,
            )?,
            naming_policies,
            created_by: None,
        })
    }
}

fn parse(field: &'static str, patterns: &[String]) -> Result<KeyPatterns, ConfigError> {
    KeyPatterns::parse(patterns).map_err(|source| ConfigError::MalformedPattern { field, source })
}

impl PropagationRules {
    /// Rules that pass nothing on and check no names, for `keys`' domain.
    pub fn empty(keys: &Keys) -> Self {
        PropagationConfig::default()
            .compile(keys)
            .expect("an empty configuration is valid")
    }

    /// Marks copies and created sub-namespaces with `app.kubernetes.io/created-by=<value>`.
    /// Off by default, so that taking over copies made by another program (whose value
    /// differs) does not rewrite every copy.
    pub fn with_created_by(mut self, value: impl Into<String>) -> Self {
        self.created_by = Some(value.into());
        self
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn naming_policies(&self) -> &[NamingPolicy] {
        &self.naming_policies
    }

    /// Whether `key` is one of the hierarchy domain's own keys, which are never passed on.
    pub(crate) fn is_own_key(&self, key: &str) -> bool {
        key.strip_prefix(self.keys.domain())
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::ACCURATE_DOMAIN;

    #[test]
    fn accurate_configuration_file_is_read_field_for_field() {
        let config: PropagationConfig = serde_json::from_value(serde_json::json!({
            "labelKeys": ["team"],
            "annotationKeys": ["*.example.com/*"],
            "subNamespaceLabelKeys": ["app"],
            "subNamespaceAnnotationKeys": ["note"],
            "watches": [{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "Role"},
                        {"version": "v1", "kind": "Secret"}],
            "propagateLabelKeyExcludes": ["*kubernetes.io/*"],
            "propagateAnnotationKeyExcludes": ["*kubernetes.io/*"],
            "namingPolicies": [{"root": "^app-(?P<team>.*)", "match": "^app-${team}-.*"}]
        }))
        .unwrap();
        assert_eq!(config.watches[1].group, "");
        assert_eq!(config.naming_policies[0].match_pattern, "^app-${team}-.*");
        let rules = config
            .compile(&Keys::for_domain(ACCURATE_DOMAIN).unwrap())
            .unwrap();
        assert!(rules.label_keys.matches("team"));
        assert_eq!(rules.naming_policies().len(), 1);
    }

    #[test]
    fn unknown_configuration_fields_are_refused() {
        let parsed: Result<PropagationConfig, _> =
            serde_json::from_value(serde_json::json!({"labelKey": ["team"]}));
        assert!(parsed.is_err());
    }

    #[test]
    fn patterns_naming_the_domain_are_refused_with_their_field() {
        let keys = Keys::for_domain(ACCURATE_DOMAIN).unwrap();
        let config = PropagationConfig {
            annotation_keys: vec!["accurate.cybozu.com/*".into()],
            ..Default::default()
        };
        let err = config.compile(&keys).unwrap_err();
        assert!(err.to_string().starts_with("annotationKeys:"), "{err}");
    }

    #[test]
    fn malformed_patterns_and_policies_name_their_field() {
        let keys = Keys::default();
        let bad_glob = PropagationConfig {
            propagate_label_key_excludes: vec!["[".into()],
            ..Default::default()
        };
        assert!(matches!(
            bad_glob.compile(&keys),
            Err(ConfigError::MalformedPattern {
                field: "propagateLabelKeyExcludes",
                ..
            })
        ));
        let bad_regex = PropagationConfig {
            naming_policies: vec![NamingPolicySpec {
                root: "(".into(),
                match_pattern: "x".into(),
            }],
            ..Default::default()
        };
        assert!(matches!(
            bad_regex.compile(&keys),
            Err(ConfigError::InvalidNamingPolicy { index: 0, .. })
        ));
    }

    #[test]
    fn own_keys_are_recognised_by_their_domain_prefix() {
        let rules = PropagationRules::empty(&Keys::default());
        assert!(rules.is_own_key("arbor.dev/type"));
        assert!(rules.is_own_key("arbor.dev/managed"));
        assert!(!rules.is_own_key("arbor.development/x"));
        assert!(!rules.is_own_key("team"));
    }
}
