//! The configuration file, in Accurate's format (labelKeys, annotationKeys,
//! subNamespaceLabelKeys, subNamespaceAnnotationKeys, watches, propagateLabelKeyExcludes,
//! propagateAnnotationKeyExcludes, namingPolicies). Parsing and validation belong to
//! [`arbor_policy::propagation::PropagationConfig`]; this module reads the file and names it in
//! every error.

use std::path::{Path, PathBuf};

use arbor_policy::propagation::PropagationConfig;

/// Why the configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("configuration file {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// Reads the file at `path`; without a path the configuration is empty (no keys, no watches).
pub fn load(path: Option<&Path>) -> Result<PropagationConfig, ConfigFileError> {
    let Some(path) = path else {
        return Ok(PropagationConfig::default());
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &text)
}

/// Parses `text`, the content of `path`.
pub fn parse(path: &Path, text: &str) -> Result<PropagationConfig, ConfigFileError> {
    if text.trim().is_empty() {
        return Ok(PropagationConfig::default());
    }
    serde_saphyr::from_str(text).map_err(|e| ConfigFileError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let config = parse(Path::new("config.yaml"), text).unwrap();
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
        let config = parse(Path::new("config.yaml"), text).unwrap();
        assert_eq!(config.watches.len(), 4);
        assert_eq!(config.watches[3].kind, "ResourceQuota");
        assert_eq!(config.watches[3].group, "");
        assert_eq!(config.naming_policies.len(), 2);
        let keys = arbor_policy::keys::Keys::for_domain("accurate.cybozu.com").unwrap();
        config.compile(&keys).unwrap();
    }

    #[test]
    fn unknown_field_is_rejected_with_its_name_and_the_file() {
        let error = parse(Path::new("/etc/arbor/config.yaml"), "labelKey: [team]\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("/etc/arbor/config.yaml"), "{error}");
        assert!(error.contains("labelKey"), "{error}");
    }

    #[test]
    fn missing_file_is_named() {
        let error = load(Some(Path::new("/nonexistent/arbor.yaml")))
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/arbor.yaml"), "{error}");
    }

    #[test]
    fn no_file_means_an_empty_configuration() {
        assert_eq!(load(None).unwrap(), PropagationConfig::default());
    }
}
