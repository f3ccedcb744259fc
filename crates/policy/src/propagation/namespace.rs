//! Namespaces as the hierarchy sees them, and the role each one plays.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::keys::Keys;
use crate::object::{self, MissingField};

use super::metadata::PropagatedKeys;

/// The parts of a Namespace that the hierarchy reads: its name, labels and annotations, and
/// which of those only a propagating controller holds (see [`PropagatedKeys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceState {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "PropagatedKeys::is_empty")]
    pub propagated: PropagatedKeys,
}

impl NamespaceState {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    pub fn with_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// Reads a Namespace object.
    pub fn from_object(namespace: &Value) -> Result<Self, MissingField> {
        Ok(Self {
            name: object::name(namespace)
                .ok_or(MissingField("metadata.name"))?
                .to_owned(),
            labels: object::labels(namespace),
            annotations: object::annotations(namespace),
            propagated: PropagatedKeys::default(),
        })
    }

    /// A label's value; an empty value counts as absent, as it does for Accurate, whose
    /// indexes ignore empty parent and template references.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The value of `<domain>/type` when it is one Arbor knows; other values are ignored.
    pub fn declared_type(&self, keys: &Keys) -> Option<NamespaceType> {
        self.label(&keys.type_label).and_then(NamespaceType::parse)
    }

    /// The value of `<domain>/parent`.
    pub fn parent(&self, keys: &Keys) -> Option<&str> {
        self.label(&keys.parent_label)
    }

    /// The value of `<domain>/template`.
    pub fn template(&self, keys: &Keys) -> Option<&str> {
        self.label(&keys.template_label)
    }

    /// The role this namespace plays in the tree; see [`Role`].
    pub fn role(&self, keys: &Keys) -> Role {
        if let Some(parent) = self.parent(keys) {
            return Role {
                kind: RoleKind::Sub,
                upstream: Some(Upstream::Parent(parent.to_owned())),
            };
        }
        let kind = match self.declared_type(keys) {
            Some(NamespaceType::Root) => RoleKind::Root,
            Some(NamespaceType::Template) => RoleKind::Template,
            None => RoleKind::Plain,
        };
        Role {
            kind,
            upstream: self
                .template(keys)
                .map(|template| Upstream::Template(template.to_owned())),
        }
    }
}

/// The values of `<domain>/type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NamespaceType {
    Root,
    Template,
}

impl NamespaceType {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "root" => Some(Self::Root),
            "template" => Some(Self::Template),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Root => "root",
            Self::Template => "template",
        }
    }
}

/// What a namespace is, by the precedence rules documented on [`Role`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoleKind {
    /// `<domain>/type=root`: the top of a tree of sub-namespaces.
    Root,
    /// `<domain>/type=template`: a namespace that other namespaces follow.
    Template,
    /// Carries `<domain>/parent`: a namespace created for a SubNamespace.
    Sub,
    /// None of the above.
    Plain,
}

impl RoleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Root => "root",
            Self::Template => "template",
            Self::Sub => "sub",
            Self::Plain => "plain",
        }
    }
}

impl fmt::Display for RoleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The namespace a namespace takes its labels, annotations and object copies from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Upstream {
    /// A sub-namespace's parent (`<domain>/parent`).
    Parent(String),
    /// The template an instance follows (`<domain>/template`).
    Template(String),
}

impl Upstream {
    pub fn name(&self) -> &str {
        match self {
            Self::Parent(name) | Self::Template(name) => name,
        }
    }

    /// `parent` or `template`, for messages.
    pub fn relation(&self) -> &'static str {
        match self {
            Self::Parent(_) => "parent",
            Self::Template(_) => "template",
        }
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} namespace {}", self.relation(), self.name())
    }
}

/// The role of a namespace and where it propagates from.
///
/// - A namespace with a non-empty `<domain>/parent` label is a **sub-namespace**, whatever else
///   it carries; its upstream is the parent. Its `type` and `template` labels are ignored (and
///   refused by the admission rules).
/// - Otherwise `<domain>/type=root` makes it a **root** and `<domain>/type=template` a
///   **template**; any other value, or none, makes it **plain**.
/// - A root, template or plain namespace with a non-empty `<domain>/template` label is also a
///   template **instance**; its upstream is that template. So a root can follow a template,
///   and templates can follow templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    kind: RoleKind,
    upstream: Option<Upstream>,
}

impl Role {
    pub fn kind(&self) -> RoleKind {
        self.kind
    }

    /// The parent of a sub-namespace or the template of an instance; `None` for a namespace
    /// that receives nothing.
    pub fn upstream(&self) -> Option<&Upstream> {
        self.upstream.as_ref()
    }

    /// Whether the namespace follows a template.
    pub fn is_instance(&self) -> bool {
        matches!(self.upstream, Some(Upstream::Template(_)))
    }

    /// Roots and sub-namespaces are the only namespaces that may hold SubNamespaces.
    pub fn may_have_sub_namespaces(&self) -> bool {
        matches!(self.kind, RoleKind::Root | RoleKind::Sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys() -> Keys {
        Keys::default()
    }

    #[test]
    fn parent_label_makes_a_sub_namespace_whatever_else_it_carries() {
        let keys = keys();
        let ns = NamespaceState::new("team-a")
            .with_label(&keys.parent_label, "root")
            .with_label(&keys.type_label, "root")
            .with_label(&keys.template_label, "tmpl");
        let role = ns.role(&keys);
        assert_eq!(role.kind(), RoleKind::Sub);
        assert_eq!(role.upstream(), Some(&Upstream::Parent("root".into())));
        assert!(!role.is_instance());
    }

    #[test]
    fn root_following_a_template_is_a_root_instance() {
        let keys = keys();
        let ns = NamespaceState::new("r")
            .with_label(&keys.type_label, "root")
            .with_label(&keys.template_label, "tmpl");
        let role = ns.role(&keys);
        assert_eq!(role.kind(), RoleKind::Root);
        assert!(role.is_instance());
        assert!(role.may_have_sub_namespaces());
    }

    #[test]
    fn unknown_type_and_empty_references_make_a_plain_namespace() {
        let keys = keys();
        let ns = NamespaceState::new("p")
            .with_label(&keys.type_label, "leaf")
            .with_label(&keys.parent_label, "")
            .with_label(&keys.template_label, "");
        let role = ns.role(&keys);
        assert_eq!(role.kind(), RoleKind::Plain);
        assert_eq!(role.upstream(), None);
    }

    #[test]
    fn namespace_state_reads_a_namespace_object() {
        let ns = NamespaceState::from_object(&json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "a", "labels": {"team": "x"}, "annotations": {"note": "y"}}}))
        .unwrap();
        assert_eq!(ns.name, "a");
        assert_eq!(ns.labels["team"], "x");
        assert_eq!(ns.annotations["note"], "y");
        assert!(NamespaceState::from_object(&json!({"metadata": {}})).is_err());
    }
}
