//! The namespace-tree rules of seeds/001 on Namespaces and SubNamespaces, under the configured
//! key domain, decided by `arbor_policy::propagation`'s `review_*` functions against the tree as
//! the reflector holds it.

use arbor_policy::propagation::{
    Admission, NamespaceState, NamespaceTree, SubNamespace, review_namespace_create,
    review_namespace_delete, review_namespace_update, review_sub_namespace_create,
    review_sub_namespace_delete,
};
use kube::core::admission::Operation;
use serde_json::Value;

use super::shape::{ShapeError, check_metadata_maps};
use crate::review::ReviewInput;
use crate::review_outcome::Check;
use crate::settings::PolicySettings;

/// Rule id prefix of every tree rule.
const TREE_RULE: &str = "seeds/001 tree";

/// Which tree object is under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeKind {
    Namespace,
    SubNamespace,
}

/// Reviews a Namespace or SubNamespace change against `tree`.
pub fn review(
    settings: &PolicySettings,
    kind: TreeKind,
    input: &ReviewInput,
    tree: &NamespaceTree,
) -> Result<Option<Check>, ShapeError> {
    let cascading = settings.allow_cascading_deletion;
    let admission = match (kind, &input.operation) {
        (TreeKind::Namespace, Operation::Create) => {
            review_namespace_create(tree, &namespace(input.object.as_ref(), "object")?)
        }
        (TreeKind::Namespace, Operation::Update) => review_namespace_update(
            tree,
            &namespace(input.old_object.as_ref(), "oldObject")?,
            &namespace(input.object.as_ref(), "object")?,
        ),
        (TreeKind::Namespace, Operation::Delete) => {
            let old = match input.old_object.as_ref() {
                Some(old) => namespace(Some(old), "oldObject")?,
                // API servers before 1.15 send no oldObject on DELETE; the tree knows it.
                None => tree
                    .get(&input.name)
                    .cloned()
                    .unwrap_or_else(|| NamespaceState::new(&input.name)),
            };
            review_namespace_delete(tree, &old, cascading)
        }
        (TreeKind::SubNamespace, Operation::Create) => review_sub_namespace_create(
            &settings.rules,
            tree,
            &sub_namespace(input, input.object.as_ref(), "object")?,
        ),
        (TreeKind::SubNamespace, Operation::Delete) => review_sub_namespace_delete(
            tree,
            &sub_namespace(input, input.old_object.as_ref(), "oldObject")?,
            cascading,
        ),
        // A SubNamespace's name and namespace never change, so an update moves nothing in
        // the tree; CONNECT carries no object.
        (TreeKind::SubNamespace, Operation::Update) | (_, Operation::Connect) => return Ok(None),
    };
    Ok(Some(match admission {
        Admission::Allowed => Check::allow(
            TREE_RULE,
            format!(
                "{:?} of {kind:?} {} keeps the namespace tree valid",
                input.operation,
                input.object_name()
            ),
        ),
        Admission::Denied { rule, message } => Check::deny(format!("{TREE_RULE} {rule}"), message),
    }))
}

fn required<'a>(object: Option<&'a Value>, field: &'static str) -> Result<&'a Value, ShapeError> {
    let object = object.ok_or_else(|| ShapeError::missing(field))?;
    check_metadata_maps(object)?;
    Ok(object)
}

fn namespace(object: Option<&Value>, field: &'static str) -> Result<NamespaceState, ShapeError> {
    NamespaceState::from_object(required(object, field)?)
        .map_err(|missing| ShapeError::missing(missing.0))
}

fn sub_namespace(
    input: &ReviewInput,
    object: Option<&Value>,
    field: &'static str,
) -> Result<SubNamespace, ShapeError> {
    let object = required(object, field)?;
    // The request's namespace stands in for a metadata.namespace the client left out.
    let mut object = object.clone();
    if let (Some(namespace), Some(metadata)) = (
        input.namespace.as_deref(),
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        metadata
            .entry("namespace")
            .or_insert_with(|| Value::String(namespace.to_owned()));
    }
    SubNamespace::from_object(&object).map_err(|missing| ShapeError::missing(missing.0))
}
