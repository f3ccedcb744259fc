//! A view of every namespace and the links between them.
//!
//! Each namespace has at most one upstream link (see [`Role`]), so following upstream links
//! from any namespace either reaches a namespace without one, reaches a name that does not
//! exist, or runs into a cycle. [`NamespaceTree::upstream_chain`] reports which.
//!
//! Admission judges against the tree as it is about to be ([`NamespaceTree::about_to_be`]):
//! every SubNamespace whose namespace the hierarchy controller has not created yet already
//! stands in it as a sub-namespace of the SubNamespace's namespace. So a parent cannot be
//! deleted in the moment between a SubNamespace's creation and its namespace's, and a
//! namespace of that name cannot be made elsewhere meanwhile. A SubNamespace whose name is
//! taken by another namespace changes nothing (that namespace is never taken over).

use std::collections::BTreeMap;

use crate::keys::Keys;

use super::namespace::{NamespaceState, Role, RoleKind, Upstream};
use super::subnamespace::SubNamespace;

/// Every namespace of the cluster, read through one key domain.
///
/// Each namespace's downstream (the namespaces whose upstream link names it) is kept beside
/// the namespaces, so [`Self::children`] costs the number of children, not the size of the
/// cluster: the hierarchy asks it for every object event, so a scan of every namespace there
/// made one edit propagated to n namespaces cost n² role lookups.
#[derive(Debug, Clone)]
pub struct NamespaceTree {
    keys: Keys,
    namespaces: BTreeMap<String, NamespaceState>,
    /// Upstream name → the names of the namespaces linked to it, sorted.
    downstream: BTreeMap<String, Vec<String>>,
}

/// Why the tree cannot answer for a namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("namespace {0} does not exist")]
    UnknownNamespace(String),
    #[error("namespace {namespace}: its {upstream} does not exist")]
    MissingUpstream {
        namespace: String,
        upstream: Upstream,
    },
    #[error("namespace {namespace} is on or below the cycle {}", members.join(" -> "))]
    Cycle {
        namespace: String,
        members: Vec<String>,
    },
    #[error("namespace {namespace} is not below a root namespace: {reason}")]
    NoRoot { namespace: String, reason: String },
}

/// Where following upstream links from a namespace leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamChain {
    /// The namespaces from the start to the first one without an upstream, in that order.
    Complete(Vec<String>),
    /// The walk met a link to a namespace that does not exist; `path` ends with the namespace
    /// holding that link.
    Dangling {
        path: Vec<String>,
        missing: Upstream,
    },
    /// The walk came back to a namespace it had visited; `members` is the cycle in link order
    /// (each member's upstream is the next, the last one's is the first).
    Cycle {
        path: Vec<String>,
        members: Vec<String>,
    },
}

impl NamespaceTree {
    pub fn new(keys: &Keys, namespaces: impl IntoIterator<Item = NamespaceState>) -> Self {
        Self::linked(
            keys,
            namespaces
                .into_iter()
                .map(|ns| (ns.name.clone(), ns))
                .collect(),
        )
    }

    /// The tree of `namespaces` with each one's downstream found.
    fn linked(keys: &Keys, namespaces: BTreeMap<String, NamespaceState>) -> Self {
        let mut downstream: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // In name order, so each list comes out sorted.
        for namespace in namespaces.values() {
            if let Some(upstream) = namespace.role(keys).upstream() {
                downstream
                    .entry(upstream.name().to_owned())
                    .or_default()
                    .push(namespace.name.clone());
            }
        }
        Self {
            keys: keys.clone(),
            namespaces,
            downstream,
        }
    }

    /// The name `namespace` links to, if any.
    fn upstream_name(&self, namespace: &NamespaceState) -> Option<String> {
        namespace
            .role(&self.keys)
            .upstream()
            .map(|upstream| upstream.name().to_owned())
    }

    /// The tree of `namespaces` plus the `pending` SubNamespaces whose namespaces do not exist
    /// yet, each under its SubNamespace's namespace (see the [module docs](self)).
    pub fn about_to_be(
        keys: &Keys,
        namespaces: impl IntoIterator<Item = NamespaceState>,
        pending: impl IntoIterator<Item = SubNamespace>,
    ) -> Self {
        let mut namespaces: BTreeMap<String, NamespaceState> = namespaces
            .into_iter()
            .map(|ns| (ns.name.clone(), ns))
            .collect();
        for sub in pending {
            let state =
                NamespaceState::new(&sub.name).with_label(&keys.parent_label, &sub.namespace);
            namespaces.entry(sub.name).or_insert(state);
        }
        Self::linked(keys, namespaces)
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn get(&self, name: &str) -> Option<&NamespaceState> {
        self.namespaces.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.namespaces.contains_key(name)
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &NamespaceState> {
        self.namespaces.values()
    }

    /// The role of a namespace, if it exists.
    pub fn role(&self, name: &str) -> Option<Role> {
        self.get(name).map(|ns| ns.role(&self.keys))
    }

    /// This tree with `namespace` added or replacing the namespace of the same name: the tree
    /// as it would be if an admission request were allowed.
    pub fn with_namespace(&self, namespace: NamespaceState) -> Self {
        let mut tree = self.clone();
        let upstream = tree.upstream_name(&namespace);
        let name = namespace.name.clone();
        let replaced = tree.namespaces.insert(name.clone(), namespace);
        if let Some(before) = replaced.and_then(|old| tree.upstream_name(&old))
            && let Some(linked) = tree.downstream.get_mut(&before)
        {
            linked.retain(|linked| *linked != name);
            if linked.is_empty() {
                tree.downstream.remove(&before);
            }
        }
        if let Some(upstream) = upstream {
            let linked = tree.downstream.entry(upstream).or_default();
            if let Err(at) = linked.binary_search(&name) {
                linked.insert(at, name);
            }
        }
        tree
    }

    /// Namespaces whose `<domain>/parent` label names `name`.
    pub fn sub_namespaces(&self, name: &str) -> Vec<&str> {
        self.names_where(|ns| ns.parent(&self.keys) == Some(name))
    }

    /// Namespaces whose `<domain>/template` label names `name`.
    pub fn instances(&self, name: &str) -> Vec<&str> {
        self.names_where(|ns| ns.template(&self.keys) == Some(name))
    }

    /// Namespaces whose upstream is `name`: the namespaces that receive its labels,
    /// annotations and object copies.
    pub fn children(&self, name: &str) -> Vec<&str> {
        self.downstream
            .get(name)
            .map(|linked| linked.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    fn names_where(&self, keep: impl Fn(&NamespaceState) -> bool) -> Vec<&str> {
        self.namespaces
            .values()
            .filter(|ns| keep(ns))
            .map(|ns| ns.name.as_str())
            .collect()
    }

    /// Follows upstream links from `start` (which must exist).
    pub fn upstream_chain(&self, start: &str) -> Result<UpstreamChain, TreeError> {
        if !self.contains(start) {
            return Err(TreeError::UnknownNamespace(start.to_owned()));
        }
        Ok(follow_upstream(start, |name| self.role(name)))
    }

    /// Follows upstream links from `candidate` in this tree with `candidate` added or
    /// replacing the namespace of its name: [`Self::upstream_chain`] of
    /// [`Self::with_namespace`], without copying the tree. Admission asks this for every
    /// Namespace it judges, so its cost is the length of the chain, not the size of the tree.
    pub fn upstream_chain_with(&self, candidate: &NamespaceState) -> UpstreamChain {
        follow_upstream(&candidate.name, |name| {
            if name == candidate.name {
                Some(candidate.role(&self.keys))
            } else {
                self.role(name)
            }
        })
    }

    /// The root namespace above `name`: `name` itself when it is a root, otherwise the root
    /// reached through parent links. Roots that follow a template stop the walk, since a
    /// template link does not lead to a root.
    pub fn root_of(&self, name: &str) -> Result<&str, TreeError> {
        let no_root = |reason: String| TreeError::NoRoot {
            namespace: name.to_owned(),
            reason,
        };
        let mut seen: Vec<&str> = Vec::new();
        let mut current = name;
        loop {
            let ns = self
                .namespaces
                .get(current)
                .ok_or_else(|| no_root(format!("namespace {current} does not exist")))?;
            if seen.contains(&current) {
                return Err(TreeError::Cycle {
                    namespace: name.to_owned(),
                    members: seen.iter().map(|s| s.to_string()).collect(),
                });
            }
            seen.push(current);
            let role = ns.role(&self.keys);
            match (role.kind(), role.upstream()) {
                (RoleKind::Root, _) => return Ok(ns.name.as_str()),
                (RoleKind::Sub, Some(Upstream::Parent(_))) => {
                    current = ns.parent(&self.keys).expect("a sub-namespace has a parent");
                }
                (kind, _) => {
                    return Err(no_root(format!(
                        "namespace {current} is a {kind} namespace, neither root nor sub"
                    )));
                }
            }
        }
    }
}

/// Follows upstream links from `start`, whose role `role_of` must know, reading each
/// namespace's role through `role_of` (`None`: the namespace does not exist).
fn follow_upstream(start: &str, role_of: impl Fn(&str) -> Option<Role>) -> UpstreamChain {
    let mut path: Vec<String> = Vec::new();
    let mut current = start.to_owned();
    loop {
        if let Some(at) = path.iter().position(|seen| *seen == current) {
            let members = path[at..].to_vec();
            return UpstreamChain::Cycle { path, members };
        }
        let Some(role) = role_of(&current) else {
            let holder = path
                .last()
                .expect("the start exists, so the path is not empty");
            let missing = role_of(holder)
                .and_then(|r| r.upstream().cloned())
                .expect("the holder linked to the missing namespace");
            return UpstreamChain::Dangling { path, missing };
        };
        path.push(current);
        match role.upstream() {
            Some(up) => current = up.name().to_owned(),
            None => return UpstreamChain::Complete(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_sub_namespaces_join_the_tree_under_their_parent() {
        let keys = Keys::default();
        let root = NamespaceState::new("team").with_label(&keys.type_label, "root");
        let taken = NamespaceState::new("taken");
        let tree = NamespaceTree::about_to_be(
            &keys,
            vec![root, taken],
            vec![
                SubNamespace::new("team", "dev"),
                SubNamespace::new("team", "taken"),
                SubNamespace::new("team", "dev"),
            ],
        );
        assert_eq!(tree.sub_namespaces("team"), vec!["dev"]);
        assert_eq!(tree.get("dev").unwrap().parent(&keys), Some("team"));
        assert_eq!(tree.get("taken").unwrap().parent(&keys), None);
    }

    /// Name, type, parent and template of one namespace.
    type Links<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

    fn tree(links: &[Links]) -> NamespaceTree {
        let keys = Keys::default();
        NamespaceTree::new(
            &keys,
            links.iter().map(|(name, ty, parent, template)| {
                let mut ns = NamespaceState::new(*name);
                if let Some(t) = ty {
                    ns = ns.with_label(&keys.type_label, *t);
                }
                if let Some(p) = parent {
                    ns = ns.with_label(&keys.parent_label, *p);
                }
                if let Some(t) = template {
                    ns = ns.with_label(&keys.template_label, *t);
                }
                ns
            }),
        )
    }

    #[test]
    fn children_follow_the_upstream_link_of_each_role() {
        let t = tree(&[
            ("root", Some("root"), None, None),
            ("tmpl", Some("template"), None, None),
            ("a", None, Some("root"), None),
            ("b", None, None, Some("tmpl")),
            ("c", Some("root"), None, Some("tmpl")),
        ]);
        assert_eq!(t.children("root"), vec!["a"]);
        assert_eq!(t.children("tmpl"), vec!["b", "c"]);
        assert_eq!(t.sub_namespaces("root"), vec!["a"]);
        assert_eq!(t.instances("tmpl"), vec!["b", "c"]);
    }

    #[test]
    fn upstream_chain_reports_complete_dangling_and_cyclic_walks() {
        let t = tree(&[
            ("root", Some("root"), None, None),
            ("a", None, Some("root"), None),
            ("b", None, Some("a"), None),
            ("lost", None, Some("gone"), None),
            ("x", None, Some("y"), None),
            ("y", None, Some("x"), None),
            ("below", None, Some("x"), None),
        ]);
        assert_eq!(
            t.upstream_chain("b").unwrap(),
            UpstreamChain::Complete(vec!["b".into(), "a".into(), "root".into()])
        );
        assert_eq!(
            t.upstream_chain("lost").unwrap(),
            UpstreamChain::Dangling {
                path: vec!["lost".into()],
                missing: Upstream::Parent("gone".into())
            }
        );
        match t.upstream_chain("below").unwrap() {
            UpstreamChain::Cycle { members, .. } => assert_eq!(members, ["x", "y"]),
            other => panic!("expected a cycle, got {other:?}"),
        }
        assert!(t.upstream_chain("nope").is_err());
    }

    #[test]
    fn the_chain_with_a_candidate_is_the_chain_of_the_tree_holding_it() {
        let keys = Keys::default();
        let t = tree(&[
            ("root", Some("root"), None, None),
            ("a", None, Some("root"), None),
            ("b", None, Some("a"), None),
            ("tmpl", Some("template"), None, None),
        ]);
        let candidates = [
            NamespaceState::new("new").with_label(&keys.parent_label, "b"),
            NamespaceState::new("new").with_label(&keys.parent_label, "gone"),
            NamespaceState::new("root").with_label(&keys.parent_label, "b"),
            NamespaceState::new("a").with_label(&keys.template_label, "tmpl"),
            NamespaceState::new("tmpl").with_label(&keys.template_label, "tmpl"),
            NamespaceState::new("plain"),
        ];
        for candidate in candidates {
            assert_eq!(
                t.upstream_chain_with(&candidate),
                t.with_namespace(candidate.clone())
                    .upstream_chain(&candidate.name)
                    .unwrap(),
                "{candidate:?}"
            );
        }
    }

    #[test]
    fn root_of_walks_parents_up_to_the_root() {
        let t = tree(&[
            ("root", Some("root"), None, None),
            ("a", None, Some("root"), None),
            ("b", None, Some("a"), None),
            ("plain", None, None, None),
            ("orphan", None, Some("plain"), None),
        ]);
        assert_eq!(t.root_of("b").unwrap(), "root");
        assert_eq!(t.root_of("root").unwrap(), "root");
        assert!(matches!(t.root_of("orphan"), Err(TreeError::NoRoot { .. })));
    }
}
