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
//! # Removed keys are removed below
//!
//! A key the upstream no longer holds (removed from a template, a root, a parent or a
//! SubNamespace's spec) is not in the result, and it must leave every namespace below. Which
//! keys of a namespace were propagated is read from its `metadata.managedFields`
//! ([`PropagatedKeys`]): a key held by a propagating field manager (Arbor's own, or the
//! controller Arbor took over from under the same key domain, see
//! [`predecessor_field_managers`]) and by no other manager was put there by propagation. Such a
//! key that the desired set lacks is *stale* and is removed ([`metadata_change`]); a key any
//! other manager holds (a user's `kubectl label`, another controller) was not propagated and
//! stays, whatever its name. This is Accurate's behaviour, whose propagation is a forced
//! server-side apply of exactly the set it owns.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// The field manager of Accurate's controller; Innu is Accurate under its own key domain and
/// writes under the same name.
pub const ACCURATE_FIELD_MANAGER: &str = "accurate-controller";

/// The field managers that propagated under `domain` before Arbor took over: keys they alone
/// hold on a namespace were propagated, and Arbor removes them when they are no longer
/// propagated, as Accurate itself would have.
pub fn predecessor_field_managers(domain: &str) -> &'static [&'static str] {
    match domain {
        crate::keys::ACCURATE_DOMAIN | crate::keys::INNU_DOMAIN => &[ACCURATE_FIELD_MANAGER],
        _ => &[],
    }
}

/// The labels and annotations of a namespace that only propagating field managers hold, read
/// from its `metadata.managedFields`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropagatedKeys {
    #[serde(default)]
    pub labels: BTreeSet<String>,
    #[serde(default)]
    pub annotations: BTreeSet<String>,
}

impl PropagatedKeys {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }

    /// Reads `(manager, fieldsV1)` pairs of a namespace's managedFields: a key counts when a
    /// manager in `propagators` holds it and no other manager does.
    pub fn from_managed_fields<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a Value)>,
        propagators: &[&str],
    ) -> Self {
        let mut propagated = Self::default();
        let mut others = Self::default();
        for (manager, fields) in entries {
            let into = if propagators.contains(&manager) {
                &mut propagated
            } else {
                &mut others
            };
            into.labels.extend(field_keys(fields, "f:labels"));
            into.annotations.extend(field_keys(fields, "f:annotations"));
        }
        propagated.labels.retain(|k| !others.labels.contains(k));
        propagated
            .annotations
            .retain(|k| !others.annotations.contains(k));
        propagated
    }
}

/// The keys under `f:metadata.<map>` of a FieldsV1 set.
fn field_keys<'a>(fields: &'a Value, map: &str) -> impl Iterator<Item = String> + 'a {
    fields
        .get("f:metadata")
        .and_then(|metadata| metadata.get(map))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|keys| keys.keys())
        .filter_map(|key| key.strip_prefix("f:").map(str::to_owned))
}

/// Keys to take off a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleKeys {
    pub labels: BTreeSet<String>,
    pub annotations: BTreeSet<String>,
}

impl StaleKeys {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// What to write on a namespace so that it carries what it receives and nothing it no longer
/// receives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataChange {
    /// The set to apply, when the namespace lacks any of it (or holds a stale key, which the
    /// apply of the set removes when only Arbor held it).
    pub apply: Option<NamespaceMetadata>,
    /// Propagated keys no longer received.
    pub remove: StaleKeys,
}

impl MetadataChange {
    pub fn is_empty(&self) -> bool {
        self.apply.is_none() && self.remove.is_empty()
    }
}

/// Compares what `namespace` should receive (`desired`, `None` when it has no upstream) with
/// what it holds. Nothing to do for a namespace in place, so an unchanged tree costs no write.
pub fn metadata_change(
    desired: Option<&NamespaceMetadata>,
    namespace: &NamespaceState,
) -> MetadataChange {
    let empty = NamespaceMetadata::default();
    let wanted = desired.unwrap_or(&empty);
    let stale = |held: &BTreeMap<String, String>,
                 propagated: &BTreeSet<String>,
                 wanted: &BTreeMap<String, String>| {
        propagated
            .iter()
            .filter(|k| held.contains_key(*k) && !wanted.contains_key(*k))
            .cloned()
            .collect::<BTreeSet<_>>()
    };
    let mut stale_labels = stale(
        &namespace.labels,
        &namespace.propagated.labels,
        &wanted.labels,
    );
    // The created-by label records who made the namespace (Accurate sets it on the
    // sub-namespaces it creates); nothing propagates it, so it is never stale.
    stale_labels.remove(CREATED_BY_LABEL);
    let remove = StaleKeys {
        labels: stale_labels,
        annotations: stale(
            &namespace.annotations,
            &namespace.propagated.annotations,
            &wanted.annotations,
        ),
    };
    let apply = desired
        .filter(|desired| !desired.is_satisfied_by(namespace) || !remove.is_empty())
        .cloned();
    MetadataChange { apply, remove }
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

    fn managed(entries: &[(&str, &[&str], &[&str])]) -> Vec<(String, Value)> {
        entries
            .iter()
            .map(|(manager, labels, annotations)| {
                let keys = |keys: &[&str]| {
                    keys.iter()
                        .map(|k| (format!("f:{k}"), serde_json::json!({})))
                        .collect::<serde_json::Map<_, _>>()
                };
                (
                    (*manager).to_owned(),
                    serde_json::json!({"f:metadata": {
                        "f:labels": keys(labels), "f:annotations": keys(annotations)}}),
                )
            })
            .collect()
    }

    fn propagated(entries: &[(String, Value)], propagators: &[&str]) -> PropagatedKeys {
        PropagatedKeys::from_managed_fields(
            entries.iter().map(|(m, f)| (m.as_str(), f)),
            propagators,
        )
    }

    #[test]
    fn keys_held_only_by_propagating_managers_count_as_propagated() {
        let entries = managed(&[
            ("arbor-hierarchy", &["team", "shared"], &["note"]),
            ("accurate-controller", &["old"], &[]),
            ("kubectl-label", &["shared", "own"], &[]),
        ]);
        let got = propagated(&entries, &["arbor-hierarchy", ACCURATE_FIELD_MANAGER]);
        assert_eq!(got.labels, BTreeSet::from(["old".into(), "team".into()]));
        assert_eq!(got.annotations, BTreeSet::from(["note".into()]));
        let arbor_only = propagated(&entries, &["arbor-hierarchy"]);
        assert_eq!(arbor_only.labels, BTreeSet::from(["team".into()]));
    }

    #[test]
    fn predecessors_are_accurate_s_controller_under_accurate_and_innu_domains_only() {
        assert_eq!(
            predecessor_field_managers(crate::keys::ACCURATE_DOMAIN),
            [ACCURATE_FIELD_MANAGER]
        );
        assert_eq!(
            predecessor_field_managers(INNU_DOMAIN),
            [ACCURATE_FIELD_MANAGER]
        );
        assert!(predecessor_field_managers("arbor.dev").is_empty());
    }

    fn held(labels: &[(&str, &str)], propagated_labels: &[&str]) -> NamespaceState {
        let mut ns = NamespaceState::new("sub");
        for (k, v) in labels {
            ns = ns.with_label(*k, *v);
        }
        ns.propagated.labels = propagated_labels.iter().map(|k| (*k).to_owned()).collect();
        ns
    }

    fn wanting(labels: &[(&str, &str)]) -> NamespaceMetadata {
        NamespaceMetadata {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn removed_keys_are_removed_below_and_keys_nobody_propagated_are_kept() {
        let ns = held(
            &[("team", "a"), ("gone", "x"), ("mine", "y")],
            &["team", "gone"],
        );
        let change = metadata_change(Some(&wanting(&[("team", "a")])), &ns);
        assert_eq!(change.remove.labels, BTreeSet::from(["gone".into()]));
        assert_eq!(change.apply, Some(wanting(&[("team", "a")])));
    }

    #[test]
    fn a_namespace_in_place_needs_no_write() {
        let ns = held(&[("team", "a"), ("mine", "y")], &["team"]);
        assert!(metadata_change(Some(&wanting(&[("team", "a")])), &ns).is_empty());
    }

    #[test]
    fn a_namespace_without_upstream_loses_every_propagated_key() {
        let ns = held(&[("team", "a"), ("mine", "y")], &["team"]);
        let change = metadata_change(None, &ns);
        assert_eq!(change.apply, None);
        assert_eq!(change.remove.labels, BTreeSet::from(["team".into()]));
    }

    #[test]
    fn the_created_by_record_is_never_stale() {
        let ns = held(
            &[("team", "a"), (CREATED_BY_LABEL, "accurate")],
            &["team", CREATED_BY_LABEL],
        );
        assert!(metadata_change(Some(&wanting(&[("team", "a")])), &ns).is_empty());
    }

    #[test]
    fn a_propagated_key_already_gone_is_not_removed_again() {
        let ns = held(&[("team", "a")], &["team", "gone"]);
        assert!(metadata_change(Some(&wanting(&[("team", "a")])), &ns).is_empty());
    }
}
