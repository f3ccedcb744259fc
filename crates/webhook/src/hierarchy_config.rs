//! The hierarchy configuration file (`--hierarchy-config`), the same file arbor-hierarchy
//! reads: Accurate's format, parsed by [`PropagationConfig`]. The webhook uses its
//! `namingPolicies` when a SubNamespace is created, so a name the controller would refuse to
//! create a namespace for is refused before the SubNamespace is stored.
//!
//! The rules are compiled for the webhook's `--domain`: a naming policy is checked against the
//! root found through `<domain>/parent` labels, and a key list naming keys under that domain
//! is refused here exactly as arbor-hierarchy refuses it.

use std::path::{Path, PathBuf};

use arbor_policy::keys::Keys;
use arbor_policy::propagation::{ConfigError, PropagationConfig, PropagationRules};

/// Why the hierarchy configuration cannot be used; names the file.
#[derive(Debug, thiserror::Error)]
pub enum HierarchyConfigError {
    #[error("--hierarchy-config {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--hierarchy-config {path}: not a hierarchy configuration: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("--hierarchy-config {path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: ConfigError,
    },
}

/// The rules of the file at `path` for the domain of `keys`; without a file, no naming
/// policies (and nothing else) apply.
pub fn load_rules(
    path: Option<&Path>,
    keys: &Keys,
) -> Result<PropagationRules, HierarchyConfigError> {
    let Some(path) = path else {
        return Ok(PropagationRules::empty(keys));
    };
    let text = std::fs::read_to_string(path).map_err(|source| HierarchyConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    compile_text(path, &text, keys)
}

/// The rules of `text`, the content of `path`. An empty file is an empty configuration, as
/// for arbor-hierarchy (a ConfigMap key rendered from empty values).
pub fn compile_text(
    path: &Path,
    text: &str,
    keys: &Keys,
) -> Result<PropagationRules, HierarchyConfigError> {
    let config: PropagationConfig = if text.trim().is_empty() {
        PropagationConfig::default()
    } else {
        serde_saphyr::from_str(text).map_err(|error| HierarchyConfigError::Syntax {
            path: path.to_owned(),
            message: error.to_string(),
        })?
    };
    config
        .compile(keys)
        .map_err(|source| HierarchyConfigError::Invalid {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(text: &str, domain: &str) -> Result<PropagationRules, HierarchyConfigError> {
        let keys = Keys::for_domain(domain).unwrap();
        compile_text(Path::new("/etc/arbor/hierarchy/config.yaml"), text, &keys)
    }

    #[test]
    fn naming_policies_are_compiled_for_the_domain() {
        let text = "\
labelKeys: [team]
namingPolicies:
  - root: 'team-(?P<team>.*)'
    match: '${team}-.*'
";
        let rules = compile(text, "accurate.cybozu.com").unwrap();
        assert_eq!(rules.keys().domain(), "accurate.cybozu.com");
        assert_eq!(rules.naming_policies().len(), 1);
    }

    #[test]
    fn an_empty_file_has_no_policies() {
        assert!(
            compile("\n", "arbor.dev")
                .unwrap()
                .naming_policies()
                .is_empty()
        );
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let error = compile("labelKeys: ['arbor.dev/type']", "arbor.dev").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("/etc/arbor/hierarchy/config.yaml"), "{text}");
        assert!(text.contains("labelKeys"), "{text}");
        let error = compile("namingPolicy: []", "arbor.dev").unwrap_err();
        assert!(
            matches!(error, HierarchyConfigError::Syntax { .. }),
            "{error}"
        );
        let missing = load_rules(
            Some(Path::new("/nonexistent/config.yaml")),
            &Keys::default(),
        );
        assert!(matches!(missing, Err(HierarchyConfigError::Read { .. })));
    }
}
