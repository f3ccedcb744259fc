//! The namespace-tree rules an admission webhook enforces on Namespaces.
//!
//! Each function takes the request's namespace state(s) and the tree as it is now, and answers
//! [`Admission::Allowed`] or [`Admission::Denied`] with the [`TreeRule`] broken.
//!
//! | rule | refused |
//! |---|---|
//! | self-reference | a namespace whose parent or template is itself |
//! | sub-namespace shape | a sub-namespace that also carries a `type` or a `template` label |
//! | cycle | a parent or template link that closes a loop of links |
//! | dangling parent | a parent that does not exist or is neither a root nor a sub-namespace |
//! | dangling template | a template that does not exist or is not `type=template` |
//! | role removed with children | dropping `type=root` while sub-namespaces name it as parent, `type=template` while instances name it, or the parent link of a sub-namespace that has sub-namespaces (unless it becomes a root) |
//! | has children | deleting a root or sub-namespace that has sub-namespaces (unless cascading deletion is allowed), or a template that has instances (always: instances are not deleted with it) |
//!
//! An update is judged on what it changes: when the `type`, `parent` and `template` labels
//! are unchanged, it is allowed, so a namespace whose tree went wrong while the webhook was
//! down can still be edited (the controller reports the problem and halts propagation).

use std::fmt;

use super::namespace::{NamespaceState, NamespaceType};
use super::tree::{NamespaceTree, UpstreamChain};

/// An admission answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    Denied { rule: TreeRule, message: String },
}

impl Admission {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allowed)
    }

    /// The rule broken, if denied.
    pub fn rule(&self) -> Option<TreeRule> {
        match self {
            Self::Allowed => None,
            Self::Denied { rule, .. } => Some(*rule),
        }
    }

    pub(crate) fn from_result(result: Result<(), Denial>) -> Self {
        match result {
            Ok(()) => Self::Allowed,
            Err(Denial(rule, message)) => Self::Denied { rule, message },
        }
    }
}

/// The rules of the namespace tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TreeRule {
    SelfReference,
    SubNamespaceShape,
    Cycle,
    DanglingParent,
    DanglingTemplate,
    RoleRemovedWithChildren,
    HasChildren,
    ParentNotRootOrSub,
    NamingPolicy,
}

impl TreeRule {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SelfReference => "self-reference",
            Self::SubNamespaceShape => "sub-namespace-shape",
            Self::Cycle => "cycle",
            Self::DanglingParent => "dangling-parent",
            Self::DanglingTemplate => "dangling-template",
            Self::RoleRemovedWithChildren => "role-removed-with-children",
            Self::HasChildren => "has-children",
            Self::ParentNotRootOrSub => "parent-not-root-or-sub",
            Self::NamingPolicy => "naming-policy",
        }
    }
}

impl fmt::Display for TreeRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A broken rule and its message, for `?` inside the rule functions.
pub(crate) struct Denial(pub TreeRule, pub String);

pub(crate) fn deny<T>(rule: TreeRule, message: impl Into<String>) -> Result<T, Denial> {
    Err(Denial(rule, message.into()))
}

/// Creating `new`.
pub fn review_namespace_create(tree: &NamespaceTree, new: &NamespaceState) -> Admission {
    Admission::from_result(check_links(tree, new))
}

/// Changing `old` into `new`.
pub fn review_namespace_update(
    tree: &NamespaceTree,
    old: &NamespaceState,
    new: &NamespaceState,
) -> Admission {
    let keys = tree.keys();
    let hierarchy_labels = |ns: &NamespaceState| {
        (
            ns.label(&keys.type_label).map(str::to_owned),
            ns.parent(keys).map(str::to_owned),
            ns.template(keys).map(str::to_owned),
        )
    };
    if hierarchy_labels(old) == hierarchy_labels(new) {
        return Admission::Allowed;
    }
    Admission::from_result(
        check_roles_kept_while_referenced(tree, old, new).and_then(|()| check_links(tree, new)),
    )
}

/// Deleting `old`; `allow_cascading_deletion` lets roots and sub-namespaces go with their
/// sub-namespaces.
pub fn review_namespace_delete(
    tree: &NamespaceTree,
    old: &NamespaceState,
    allow_cascading_deletion: bool,
) -> Admission {
    let keys = tree.keys();
    let name = &old.name;
    let result = (|| {
        if old.declared_type(keys) == Some(NamespaceType::Template) {
            let instances = tree.instances(name);
            if !instances.is_empty() {
                return deny(
                    TreeRule::HasChildren,
                    format!(
                        "template namespace {name} still has instances: {}",
                        instances.join(", ")
                    ),
                );
            }
        }
        let may_have_subs =
            old.parent(keys).is_some() || old.declared_type(keys) == Some(NamespaceType::Root);
        if may_have_subs && !allow_cascading_deletion {
            let subs = tree.sub_namespaces(name);
            if !subs.is_empty() {
                return deny(
                    TreeRule::HasChildren,
                    format!(
                        "namespace {name} still has sub-namespaces: {} (cascading deletion is not allowed)",
                        subs.join(", ")
                    ),
                );
            }
        }
        Ok(())
    })();
    Admission::from_result(result)
}

fn check_links(tree: &NamespaceTree, new: &NamespaceState) -> Result<(), Denial> {
    let keys = tree.keys();
    let name = &new.name;
    let parent = new.parent(keys);
    let template = new.template(keys);
    for (relation, target) in [("parent", parent), ("template", template)] {
        if target == Some(name.as_str()) {
            return deny(
                TreeRule::SelfReference,
                format!("namespace {name} names itself as its {relation}"),
            );
        }
    }
    if let Some(parent) = parent {
        if template.is_some() {
            return deny(
                TreeRule::SubNamespaceShape,
                format!("sub-namespace {name} (parent {parent}) cannot reference a template"),
            );
        }
        if let Some(ty) = new.label(&keys.type_label) {
            return deny(
                TreeRule::SubNamespaceShape,
                format!("sub-namespace {name} (parent {parent}) cannot have type {ty}"),
            );
        }
    }
    if let UpstreamChain::Cycle { members, .. } = tree.upstream_chain_with(new) {
        return deny(
            TreeRule::Cycle,
            format!(
                "namespace {name} would close the cycle {} -> {}",
                members.join(" -> "),
                members[0]
            ),
        );
    }
    if let Some(parent) = parent {
        let role = tree.role(parent);
        match role {
            None => {
                return deny(
                    TreeRule::DanglingParent,
                    format!("parent namespace {parent} of {name} does not exist"),
                );
            }
            Some(role) if !role.may_have_sub_namespaces() => {
                return deny(
                    TreeRule::DanglingParent,
                    format!(
                        "parent namespace {parent} of {name} is a {} namespace, neither root nor sub",
                        role.kind()
                    ),
                );
            }
            Some(_) => {}
        }
    }
    if let Some(template) = template {
        match tree.get(template) {
            None => {
                return deny(
                    TreeRule::DanglingTemplate,
                    format!("template namespace {template} of {name} does not exist"),
                );
            }
            Some(ns) if ns.declared_type(keys) != Some(NamespaceType::Template) => {
                return deny(
                    TreeRule::DanglingTemplate,
                    format!(
                        "namespace {template}, the template of {name}, is not labelled {}=template",
                        keys.type_label
                    ),
                );
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn check_roles_kept_while_referenced(
    tree: &NamespaceTree,
    old: &NamespaceState,
    new: &NamespaceState,
) -> Result<(), Denial> {
    let keys = tree.keys();
    let name = &new.name;
    let old_type = old.declared_type(keys);
    let new_type = new.declared_type(keys);
    // Finding a namespace's sub-namespaces and instances reads the whole tree: only when a
    // role that has them is given up (an admission review is answered while the API server
    // waits, and most updates give up no role).
    let gives_up_root = old_type == Some(NamespaceType::Root) && new_type != old_type;
    let stops_being_sub = old.parent(keys).is_some()
        && new.parent(keys).is_none()
        && new_type != Some(NamespaceType::Root);
    let subs = if gives_up_root || stops_being_sub {
        tree.sub_namespaces(name)
    } else {
        Vec::new()
    };
    if gives_up_root && !subs.is_empty() {
        return deny(
            TreeRule::RoleRemovedWithChildren,
            format!(
                "root namespace {name} cannot stop being a root while it has sub-namespaces: {}",
                subs.join(", ")
            ),
        );
    }
    if old_type == Some(NamespaceType::Template) && new_type != old_type {
        let instances = tree.instances(name);
        if !instances.is_empty() {
            return deny(
                TreeRule::RoleRemovedWithChildren,
                format!(
                    "template namespace {name} cannot stop being a template while it has instances: {}",
                    instances.join(", ")
                ),
            );
        }
    }
    if stops_being_sub && !subs.is_empty() {
        return deny(
            TreeRule::RoleRemovedWithChildren,
            format!(
                "sub-namespace {name} cannot lose its parent without becoming a root while it has sub-namespaces: {}",
                subs.join(", ")
            ),
        );
    }
    Ok(())
}
