//! The labels and annotations a namespace receives from its parent or template.
//!
//! A namespace with an upstream (see [`super::namespace::Role`]) receives every label of the
//! upstream whose key matches `labelKeys`, and every annotation whose key matches
//! `annotationKeys`, except the hierarchy domain's own keys. A sub-namespace also receives the
//! labels and annotations of its SubNamespace's spec that match `subNamespaceLabelKeys` /
//! `subNamespaceAnnotationKeys` (these win over the parent's), and always its
//! `<domain>/parent` label.
//!
//! The values flow down the whole chain in one computation: the upstream's values are what it
//! would hold once it has itself received from its own upstream, so a grandchild of a root
//! gets the root's labels without waiting for the namespace between them to be updated first.
//! A key the upstream does not hold is not in the result; the controller applies the result
//! with server-side apply, so keys it set earlier and no longer sets are removed, while keys
//! set by others stay.

use std::collections::BTreeMap;

use super::config::{CREATED_BY_LABEL, PropagationRules};
use super::glob::KeyPatterns;
use super::namespace::{NamespaceState, RoleKind};
use super::subnamespace::SubNamespace;
use super::tree::{NamespaceTree, TreeError, UpstreamChain};

/// Labels and annotations to apply to a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceMetadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl NamespaceMetadata {
    /// Whether `namespace` already carries every label and annotation with these values.
    pub fn is_satisfied_by(&self, namespace: &NamespaceState) -> bool {
        contains_all(&namespace.labels, &self.labels)
            && contains_all(&namespace.annotations, &self.annotations)
    }
}

fn contains_all(have: &BTreeMap<String, String>, want: &BTreeMap<String, String>) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v))
}

/// What `namespace` should receive from its upstream, or `None` when it has no upstream (a
/// root, template or plain namespace that follows no template).
///
/// `sub_namespace` is the SubNamespace that created `namespace`, if any; it is used only when
/// it lives in the namespace's parent and has the namespace's name.
pub fn desired_metadata(
    rules: &PropagationRules,
    tree: &NamespaceTree,
    namespace: &str,
    sub_namespace: Option<&SubNamespace>,
) -> Result<Option<NamespaceMetadata>, TreeError> {
    let path = match tree.upstream_chain(namespace)? {
        UpstreamChain::Complete(path) => path,
        UpstreamChain::Dangling { path, missing } => {
            return Err(TreeError::MissingUpstream {
                namespace: path.last().cloned().unwrap_or_default(),
                upstream: missing,
            });
        }
        UpstreamChain::Cycle { members, .. } => {
            return Err(TreeError::Cycle {
                namespace: namespace.to_owned(),
                members,
            });
        }
    };
    let (top, below) = path.split_last().expect("a chain holds its start");
    if below.is_empty() {
        return Ok(None);
    }
    let existing = |name: &str| {
        tree.get(name)
            .expect("the chain only holds existing namespaces")
    };
    let top = existing(top);
    let mut upstream_effective = NamespaceMetadata {
        labels: top.labels.clone(),
        annotations: top.annotations.clone(),
    };
    for (depth, name) in below.iter().enumerate().rev() {
        let ns = existing(name);
        let upstream_name = &path[depth + 1];
        let spec = sub_namespace
            .filter(|_| depth == 0)
            .filter(|sub| sub.name == *name && sub.namespace == *upstream_name);
        let received = received_from(rules, &upstream_effective, ns, upstream_name, spec);
        if depth == 0 {
            return Ok(Some(received));
        }
        let mut effective = NamespaceMetadata {
            labels: ns.labels.clone(),
            annotations: ns.annotations.clone(),
        };
        effective.labels.extend(received.labels);
        effective.annotations.extend(received.annotations);
        upstream_effective = effective;
    }
    unreachable!("the loop returns at depth 0")
}

fn received_from(
    rules: &PropagationRules,
    upstream: &NamespaceMetadata,
    namespace: &NamespaceState,
    upstream_name: &str,
    spec: Option<&SubNamespace>,
) -> NamespaceMetadata {
    let mut labels = selected(rules, &upstream.labels, &rules.label_keys);
    let mut annotations = selected(rules, &upstream.annotations, &rules.annotation_keys);
    if namespace.role(&rules.keys).kind() == RoleKind::Sub {
        if let Some(spec) = spec {
            labels.extend(selected(
                rules,
                &spec.labels,
                &rules.sub_namespace_label_keys,
            ));
            annotations.extend(selected(
                rules,
                &spec.annotations,
                &rules.sub_namespace_annotation_keys,
            ));
        }
        if let Some(created_by) = &rules.created_by {
            labels.insert(CREATED_BY_LABEL.to_owned(), created_by.clone());
        }
        labels.insert(rules.keys.parent_label.clone(), upstream_name.to_owned());
    }
    NamespaceMetadata {
        labels,
        annotations,
    }
}

fn selected(
    rules: &PropagationRules,
    values: &BTreeMap<String, String>,
    patterns: &KeyPatterns,
) -> BTreeMap<String, String> {
    values
        .iter()
        .filter(|(k, _)| patterns.matches(k) && !rules.is_own_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{INNU_DOMAIN, Keys};
    use crate::propagation::config::PropagationConfig;

    #[test]
    fn own_keys_are_never_propagated_even_by_a_catch_all_pattern() {
        let keys = Keys::for_domain(INNU_DOMAIN).unwrap();
        let rules = PropagationConfig {
            label_keys: vec!["*".into(), "*/*".into()],
            annotation_keys: vec!["*".into(), "*/*".into()],
            ..Default::default()
        }
        .compile(&keys)
        .unwrap();
        let root = NamespaceState::new("root")
            .with_label(&keys.type_label, "root")
            .with_label(&keys.template_label, "tmpl")
            .with_label(keys.custom("managed"), "enabled")
            .with_label("team", "a")
            .with_annotation(&keys.propagate_annotation, "update")
            .with_annotation("example.com/owner", "b");
        let tree = NamespaceTree::new(
            &keys,
            [
                root,
                NamespaceState::new("tmpl").with_label(&keys.type_label, "template"),
                NamespaceState::new("sub").with_label(&keys.parent_label, "root"),
            ],
        );
        let got = desired_metadata(&rules, &tree, "sub", None)
            .unwrap()
            .unwrap();
        let labels: Vec<&str> = got.labels.keys().map(String::as_str).collect();
        assert_eq!(labels, ["innu.cybozu.com/parent", "team"]);
        let annotations: Vec<&str> = got.annotations.keys().map(String::as_str).collect();
        assert_eq!(annotations, ["example.com/owner"]);
    }

    #[test]
    fn sub_namespace_spec_of_another_parent_is_ignored() {
        let keys = Keys::default();
        let rules = PropagationConfig {
            sub_namespace_label_keys: vec!["app".into()],
            ..Default::default()
        }
        .compile(&keys)
        .unwrap();
        let tree = NamespaceTree::new(
            &keys,
            [
                NamespaceState::new("root").with_label(&keys.type_label, "root"),
                NamespaceState::new("sub").with_label(&keys.parent_label, "root"),
            ],
        );
        let mut foreign = SubNamespace::new("elsewhere", "sub");
        foreign.labels.insert("app".into(), "x".into());
        let got = desired_metadata(&rules, &tree, "sub", Some(&foreign))
            .unwrap()
            .unwrap();
        assert!(!got.labels.contains_key("app"));
    }
}
