//! Comparing the last applied manifest with the last observed one.
//!
//! Only observed fields are compared, so changes to anything the schema does not observe are
//! never differences. A resource applied but not observed is new (to be created); one
//! observed but no longer applied is deleted; one in both whose observed fields differ, or
//! one of whose observed lists has left its bounds, is modified.

use std::collections::BTreeMap;

use serde_json::Value;

use super::identity::ResourceId;
use super::path::FieldPath;
use super::project::list_elements;
use super::schema::{ListBounds, ObserverSchema, ResourceSchema, SchemaNode};

/// How one observed field differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// Both have the field, with different values.
    ValueChanged { applied: Value, observed: Value },
    /// The applied manifest has the field; the live resource no longer does.
    MissingInObserved,
    /// The live resource has the field; the applied manifest does not know its value yet.
    MissingInApplied,
    /// The live list's length is outside the bounds the schema allows.
    ListOutsideBounds { length: u64, bounds: ListBounds },
}

/// One observed field that differs, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDifference {
    pub path: FieldPath,
    pub difference: Difference,
}

/// A resource whose observed fields differ between applied and observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModifiedResource {
    pub id: ResourceId,
    pub differences: Vec<FieldDifference>,
}

/// What the controller must do to bring the observed resources back to the applied ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceDelta {
    /// Applied but not observed: create them.
    pub new: Vec<ResourceId>,
    /// Observed but not applied any more: delete them.
    pub deleted: Vec<ResourceId>,
    /// In both, with observed differences: apply them again.
    pub modified: Vec<ModifiedResource>,
}

impl ResourceDelta {
    /// Compares `last_applied` with `last_observed` through `schema`. Resources are matched
    /// by identity (apiVersion, kind, namespace, name); entries without one cannot be
    /// matched and are ignored. An applied resource the schema has no entry for is only
    /// checked for existence.
    pub fn between(
        schema: &ObserverSchema,
        last_applied: &[Value],
        last_observed: &[Value],
    ) -> Self {
        let applied = by_identity(last_applied);
        let observed = by_identity(last_observed);
        let mut delta = Self::default();
        for (id, applied_resource) in &applied {
            let Some(observed_resource) = observed.get(id) else {
                delta.new.push(id.clone());
                continue;
            };
            let identity_only;
            let resource_schema = match schema.resource(id) {
                Some(resource_schema) => resource_schema,
                None => {
                    identity_only = ResourceSchema::identity_only(id.clone());
                    &identity_only
                }
            };
            let differences =
                field_differences(resource_schema, applied_resource, observed_resource);
            if !differences.is_empty() {
                delta.modified.push(ModifiedResource {
                    id: id.clone(),
                    differences,
                });
            }
        }
        delta.deleted = observed
            .keys()
            .filter(|id| !applied.contains_key(id))
            .cloned()
            .collect();
        delta
    }

    /// Nothing to do: every applied resource is observed unchanged, and nothing else is.
    pub fn is_empty(&self) -> bool {
        self.new.is_empty() && self.deleted.is_empty() && self.modified.is_empty()
    }
}

/// The observed fields of one resource that differ between `applied` and `observed`.
pub fn field_differences(
    schema: &ResourceSchema,
    applied: &Value,
    observed: &Value,
) -> Vec<FieldDifference> {
    let mut differences = Vec::new();
    compare_node(
        &schema.root,
        Some(applied),
        Some(observed),
        &FieldPath::root(),
        &mut differences,
    );
    differences
}

fn by_identity(resources: &[Value]) -> BTreeMap<ResourceId, &Value> {
    resources
        .iter()
        .filter_map(|resource| Some((ResourceId::of(resource).ok()?, resource)))
        .collect()
}

fn compare_node(
    node: &SchemaNode,
    applied: Option<&Value>,
    observed: Option<&Value>,
    path: &FieldPath,
    out: &mut Vec<FieldDifference>,
) {
    let mut differ = |difference| {
        out.push(FieldDifference {
            path: path.clone(),
            difference,
        })
    };
    let (applied, observed) = match (applied, observed) {
        (None, None) => return,
        (Some(_), None) => return differ(Difference::MissingInObserved),
        (None, Some(_)) => return differ(Difference::MissingInApplied),
        (Some(applied), Some(observed)) => (applied, observed),
    };
    match (node, applied, observed) {
        (SchemaNode::Map(fields), Value::Object(_), Value::Object(_)) => {
            for (key, child) in fields {
                compare_node(
                    child,
                    applied.get(key),
                    observed.get(key),
                    &path.key(key),
                    out,
                );
            }
        }
        (SchemaNode::List { elements, bounds }, Value::Array(applied), Value::Array(observed)) => {
            let (applied, _) = list_elements(applied);
            let (observed, length) = list_elements(observed);
            for (index, child) in elements.iter().enumerate() {
                compare_node(
                    child,
                    applied.get(index),
                    observed.get(index),
                    &path.index(index),
                    out,
                );
            }
            if !bounds.contains(length) {
                out.push(FieldDifference {
                    path: path.clone(),
                    difference: Difference::ListOutsideBounds {
                        length,
                        bounds: *bounds,
                    },
                });
            }
        }
        // A leaf, or a value whose shape is not the observed one: compared whole.
        _ if applied != observed => differ(Difference::ValueChanged {
            applied: applied.clone(),
            observed: observed.clone(),
        }),
        _ => {}
    }
}
