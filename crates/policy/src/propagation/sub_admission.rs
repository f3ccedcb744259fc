//! The namespace-tree rules an admission webhook enforces on SubNamespaces.
//!
//! | rule | refused |
//! |---|---|
//! | self-reference | a SubNamespace named like the namespace it lives in |
//! | parent not root or sub | a SubNamespace in a namespace that does not exist or is neither a root nor a sub-namespace |
//! | cycle / dangling parent | a SubNamespace whose namespace does not lead up to a root through parent links |
//! | naming policy | a name that breaks a naming policy of the root above it ([`super::naming`]) |
//! | has children | deleting a SubNamespace whose sub-namespace has sub-namespaces, unless cascading deletion is allowed |

use super::admission::{Admission, Denial, TreeRule, deny};
use super::config::PropagationRules;
use super::naming::check_naming;
use super::subnamespace::SubNamespace;
use super::tree::{NamespaceTree, TreeError};

/// Creating `sub_namespace`.
pub fn review_sub_namespace_create(
    rules: &PropagationRules,
    tree: &NamespaceTree,
    sub_namespace: &SubNamespace,
) -> Admission {
    Admission::from_result(check_create(rules, tree, sub_namespace))
}

fn check_create(
    rules: &PropagationRules,
    tree: &NamespaceTree,
    sub: &SubNamespace,
) -> Result<(), Denial> {
    let (parent, name) = (&sub.namespace, &sub.name);
    if parent == name {
        return deny(
            TreeRule::SelfReference,
            format!("SubNamespace {parent}/{name} would make namespace {name} its own parent"),
        );
    }
    let Some(role) = tree.role(parent) else {
        return deny(
            TreeRule::ParentNotRootOrSub,
            format!("namespace {parent} of SubNamespace {name} does not exist"),
        );
    };
    if !role.may_have_sub_namespaces() {
        return deny(
            TreeRule::ParentNotRootOrSub,
            format!(
                "namespace {parent} is a {} namespace, neither root nor sub; SubNamespace {name} cannot live there",
                role.kind()
            ),
        );
    }
    let root = match tree.root_of(parent) {
        Ok(root) => root,
        Err(TreeError::Cycle { members, .. }) => {
            return deny(
                TreeRule::Cycle,
                format!(
                    "namespace {parent} of SubNamespace {name} is on or below the cycle {}",
                    members.join(" -> ")
                ),
            );
        }
        Err(other) => {
            return deny(
                TreeRule::DanglingParent,
                format!("SubNamespace {parent}/{name}: {other}"),
            );
        }
    };
    check_naming(rules.naming_policies(), name, root)
        .or_else(|e| deny(TreeRule::NamingPolicy, e.to_string()))
}

/// Deleting `sub_namespace`; with `allow_cascading_deletion` its sub-namespace may go with
/// the sub-namespaces below it.
pub fn review_sub_namespace_delete(
    tree: &NamespaceTree,
    sub_namespace: &SubNamespace,
    allow_cascading_deletion: bool,
) -> Admission {
    let name = &sub_namespace.name;
    let is_its_child = tree
        .get(name)
        .is_some_and(|ns| ns.parent(tree.keys()) == Some(sub_namespace.namespace.as_str()));
    if allow_cascading_deletion || !is_its_child {
        return Admission::Allowed;
    }
    let subs = tree.sub_namespaces(name);
    if subs.is_empty() {
        Admission::Allowed
    } else {
        Admission::Denied {
            rule: TreeRule::HasChildren,
            message: format!(
                "SubNamespace {}/{name}: namespace {name} still has sub-namespaces: {} (cascading deletion is not allowed)",
                sub_namespace.namespace,
                subs.join(", ")
            ),
        }
    }
}
