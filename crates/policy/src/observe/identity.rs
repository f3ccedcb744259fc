//! The identity of an application resource: apiVersion, kind, namespace and name.
//!
//! The observer matches schema entries, applied resources and observed resources by this
//! identity, exactly (namespace included), so two resources that differ only in namespace
//! are two resources. The version is part of it because the schema observes the fields of
//! one served version.

use std::fmt;

use serde_json::Value;

use crate::object::{self, MissingField};

/// Which application resource a manifest entry, schema entry or live object is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId {
    pub api_version: String,
    pub kind: String,
    /// `None` for cluster-scoped resources.
    pub namespace: Option<String>,
    pub name: String,
}

impl ResourceId {
    /// Reads the identity of `resource`, or says which identifying field it lacks.
    pub fn of(resource: &Value) -> Result<Self, MissingField> {
        let field = |path: &[&str], missing| {
            object::str_at(resource, path)
                .map(str::to_owned)
                .ok_or(MissingField(missing))
        };
        Ok(Self {
            api_version: field(&["apiVersion"], "apiVersion")?,
            kind: field(&["kind"], "kind")?,
            namespace: object::namespace(resource).map(str::to_owned),
            name: field(&["metadata", "name"], "metadata.name")?,
        })
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.api_version, self.kind)?;
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_includes_version_and_namespace() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "web"}});
        let id = ResourceId::of(&deployment).unwrap();
        assert_eq!(id.to_string(), "apps/v1 Deployment web/nginx");
    }

    #[test]
    fn identity_names_the_missing_field() {
        let nameless = json!({"apiVersion": "v1", "kind": "Service", "metadata": {}});
        assert_eq!(
            ResourceId::of(&nameless),
            Err(MissingField("metadata.name"))
        );
    }
}
