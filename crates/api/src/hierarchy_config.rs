//! The hierarchy configuration file, read once here for every program that uses it:
//! arbor-hierarchy (`--config`) propagates by it, and arbor-webhook (`--hierarchy-config`)
//! checks its `namingPolicies` when a SubNamespace is created. Both therefore accept and refuse
//! exactly the same files.
//!
//! The format is Accurate's, field for field ([`PropagationConfig`]); arbor-policy compiles it
//! for the key domain ([`PropagationConfig::compile`]). This module adds what a file needs:
//!
//! - no file, or an empty one (a ConfigMap key rendered from empty values), is the empty
//!   configuration: nothing is passed on and no name is checked;
//! - every error names the file, and the field when there is one: the YAML path of a value of
//!   the wrong shape or an unknown key (`watches[1].kind`), or the field a compiled pattern or
//!   naming policy comes from (`labelKeys`, `namingPolicies[0].root`).
//!
//! Reading the file is the one I/O in this crate: it belongs to the file's format, not to
//! either program.

use std::path::{Path, PathBuf};

use arbor_policy::keys::Keys;
use arbor_policy::propagation::{ConfigError, PropagationConfig, PropagationRules};

/// A configuration file as written, and compiled for one key domain.
#[derive(Debug, Clone)]
pub struct HierarchyConfig {
    pub config: PropagationConfig,
    pub rules: PropagationRules,
}

/// Why a hierarchy configuration file cannot be used; names the file, and the field.
#[derive(Debug, thiserror::Error)]
pub enum HierarchyConfigError {
    #[error("hierarchy configuration {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not YAML, or YAML that is not Accurate's format. `field` is the YAML path of the value
    /// that does not fit (`.` for the document itself).
    #[error("hierarchy configuration {path}: {field}: {message}")]
    Syntax {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// Well-formed, but a pattern or naming policy cannot be used under the key domain.
    #[error("hierarchy configuration {path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: ConfigError,
    },
}

/// Reads and compiles the file at `path` for the domain of `keys`; without a file, the empty
/// configuration.
pub fn load(path: Option<&Path>, keys: &Keys) -> Result<HierarchyConfig, HierarchyConfigError> {
    let Some(path) = path else {
        return Ok(HierarchyConfig {
            config: PropagationConfig::default(),
            rules: PropagationRules::empty(keys),
        });
    };
    let text = std::fs::read_to_string(path).map_err(|source| HierarchyConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &text, keys)
}

/// Parses and compiles `text`, the content of `path` (named in errors), for the domain of
/// `keys`.
pub fn parse(
    path: &Path,
    text: &str,
    keys: &Keys,
) -> Result<HierarchyConfig, HierarchyConfigError> {
    let config = if text.trim().is_empty() {
        PropagationConfig::default()
    } else {
        decode(path, text)?
    };
    let rules = config
        .compile(keys)
        .map_err(|source| HierarchyConfigError::Invalid {
            path: path.to_owned(),
            source,
        })?;
    Ok(HierarchyConfig { config, rules })
}

/// The configuration as written, or the YAML path of the first value that does not fit.
fn decode(path: &Path, text: &str) -> Result<PropagationConfig, HierarchyConfigError> {
    let mut field = None;
    serde_saphyr::with_deserializer_from_str(text, |deserializer| {
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            field = Some(error.path().to_string());
            error.into_inner()
        })
    })
    .map_err(|error| {
        let message = error.to_string();
        HierarchyConfigError::Syntax {
            path: path.to_owned(),
            field: field.unwrap_or_else(|| ".".to_owned()),
            // The parser starts every message so; after the file and the field it says nothing.
            message: message
                .strip_prefix("error: ")
                .unwrap_or(&message)
                .to_owned(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/etc/arbor/hierarchy/config.yaml";

    fn compile(text: &str, domain: &str) -> Result<HierarchyConfig, HierarchyConfigError> {
        parse(Path::new(FILE), text, &Keys::for_domain(domain).unwrap())
    }

    #[test]
    fn accurate_configuration_is_read_field_for_field() {
        let text = "\
labelKeys: [team]
annotationKeys: ['foo.bar/*']
subNamespaceLabelKeys: [app]
subNamespaceAnnotationKeys: [note]
watches:
  - group: rbac.authorization.k8s.io
    version: v1
    kind: Role
  - version: v1
    kind: Secret
propagateLabelKeyExcludes: ['*kubernetes.io/*']
propagateAnnotationKeyExcludes: ['*kubernetes.io/*']
namingPolicies:
  - root: foo
    match: foo-.*
";
        let config = compile(text, "arbor.dev").unwrap().config;
        assert_eq!(config.label_keys, ["team"]);
        assert_eq!(config.watches.len(), 2);
        assert_eq!(config.watches[1].group, "");
        assert_eq!(config.naming_policies[0].match_pattern, "foo-.*");
    }

    /// #17.2: a file as Accurate's Helm chart renders it (every key of Accurate's schema,
    /// `watches` entries without `group` for the core group, Go-style named captures in
    /// naming policies) is read unchanged and compiles under Accurate's domain.
    #[test]
    fn accurate_rendered_configuration_is_read_unchanged_and_compiles() {
        let text = "\
labelKeys: 
  - team
annotationKeys: 
  - metallb.universe.tf/address-pool
subNamespaceLabelKeys: 
  - app
subNamespaceAnnotationKeys: 
  - foo.bar/baz
watches: 
  - group: rbac.authorization.k8s.io
    kind: Role
    version: v1
  - group: rbac.authorization.k8s.io
    kind: RoleBinding
    version: v1
  - kind: Secret
    version: v1
  - kind: ResourceQuota
    version: v1
propagateLabelKeyExcludes: 
  - '*kubernetes.io/*'
propagateAnnotationKeyExcludes: 
  - '*kubernetes.io/*'
namingPolicies: 
  - match: foo_.*
    root: foo
  - match: ^app-${team}-.*
    root: ^app-(?P<team>.*)
";
        let loaded = compile(text, "accurate.cybozu.com").unwrap();
        assert_eq!(loaded.config.watches.len(), 4);
        assert_eq!(loaded.config.watches[3].kind, "ResourceQuota");
        assert_eq!(loaded.config.watches[3].group, "");
        assert_eq!(loaded.rules.keys().domain(), "accurate.cybozu.com");
        assert_eq!(loaded.rules.naming_policies().len(), 2);
    }

    #[test]
    fn the_shipped_example_loads() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/examples/hierarchy-config.yaml");
        let loaded = load(Some(&example), &Keys::default()).unwrap();
        assert!(!loaded.config.watches.is_empty());
    }

    #[test]
    fn no_file_and_an_empty_file_are_the_empty_configuration() {
        let keys = Keys::default();
        for loaded in [
            load(None, &keys).unwrap(),
            compile("\n", "arbor.dev").unwrap(),
        ] {
            assert_eq!(loaded.config, PropagationConfig::default());
            assert!(loaded.rules.naming_policies().is_empty());
        }
    }

    #[test]
    fn a_missing_file_is_named() {
        let error = load(Some(Path::new("/nonexistent/arbor.yaml")), &Keys::default()).unwrap_err();
        assert!(
            matches!(error, HierarchyConfigError::Read { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("/nonexistent/arbor.yaml"),
            "{error}"
        );
    }

    /// Bad input of every kind: which error, and the field it names (besides the file).
    #[test]
    fn bad_input_names_the_file_and_the_field() {
        #[derive(Debug, PartialEq)]
        enum Kind {
            Syntax,
            Invalid,
        }
        let cases = [
            ("labelKey: [team]", Kind::Syntax, "labelKey"),
            ("labelKeys: team", Kind::Syntax, "labelKeys"),
            ("labelKeys: [team", Kind::Syntax, "labelKeys"),
            ("- team", Kind::Syntax, "."),
            (
                "watches:\n  - version: v1\n    kind: Secret\n    grup: x",
                Kind::Syntax,
                "watches[0].grup",
            ),
            (
                "watches:\n  - group: apps\n    version: v1",
                Kind::Syntax,
                "watches[0]",
            ),
            (
                "namingPolicies:\n  - root: foo",
                Kind::Syntax,
                "namingPolicies[0]",
            ),
            ("labelKeys: ['arbor.dev/type']", Kind::Invalid, "labelKeys"),
            (
                "annotationKeys: ['team-[a']",
                Kind::Invalid,
                "annotationKeys",
            ),
            (
                "propagateLabelKeyExcludes: ['x\\']",
                Kind::Invalid,
                "propagateLabelKeyExcludes",
            ),
            (
                "namingPolicies:\n  - root: '('\n    match: x",
                Kind::Invalid,
                "namingPolicies[0].root",
            ),
        ];
        for (text, kind, field) in cases {
            let error = match compile(text, "arbor.dev") {
                Ok(_) => panic!("{text:?} was accepted"),
                Err(error) => error,
            };
            let found = match error {
                HierarchyConfigError::Syntax { .. } => Kind::Syntax,
                HierarchyConfigError::Invalid { .. } => Kind::Invalid,
                HierarchyConfigError::Read { .. } => panic!("{text:?}: {error}"),
            };
            assert_eq!(found, kind, "{text:?}: {error}");
            let message = error.to_string();
            assert!(message.contains(FILE), "{text:?}: {message}");
            assert!(
                message.contains(field),
                "{text:?} should name {field}: {message}"
            );
        }
    }
}
