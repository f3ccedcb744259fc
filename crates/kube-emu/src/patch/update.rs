//! Ownership after a create, an update or a non-apply patch.
//!
//! As in kube-apiserver, the writer (operation `Update`) comes to own every field the write added
//! or changed, and those fields, as well as the fields the write removed, are taken from every
//! other manager. The ownership the write starts from is the new object's `managedFields` when
//! the client sent a readable, non-empty list, none when it sent `[]` (a reset), and the old
//! object's otherwise.

use serde_json::{Value, json};

use super::WriteContext;
use super::managed::{ManagedFields, ManagerId, Operation, Ownership};
use super::owned::{ownable_field_set, without_server_metadata};
use super::schema::ListSemantics;
use super::typed::{Strictness, compare};

/// Records ownership for a create / update / non-apply patch the way kube-apiserver does: the
/// fields that changed between `old` (`None` on create) and `new` become owned by
/// (`ctx.field_manager`, operation `Update`), and are taken away from other managers, as are the
/// fields the write removed. Writes `new.metadata.managedFields`.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    ctx: &WriteContext,
    lists: &ListSemantics,
) {
    let schema = &lists.root;
    let mut managed = starting_ownership(old, new);
    let old_clean = old.map_or_else(|| json!({}), without_server_metadata);
    let new_clean = without_server_metadata(new);
    let set_of = |object: &Value| {
        // Stored objects must stay manageable: unidentifiable lists count as atomic.
        ownable_field_set(object, schema, Strictness::Tolerate).unwrap_or_default()
    };
    let comparison = compare(
        &old_clean,
        &set_of(&old_clean),
        &new_clean,
        &set_of(&new_clean),
        schema,
    );
    let changed = comparison.changed();
    managed.release(&changed.union(&comparison.removed), None);
    if !changed.is_empty() {
        let me = ManagerId::new(
            &ctx.field_manager,
            Operation::Update,
            &ctx.api_version,
            ctx.subresource.as_deref(),
        );
        let mine = managed.managers.entry(me).or_insert_with(|| Ownership {
            api_version: ctx.api_version.clone(),
            time: None,
            fields: Default::default(),
        });
        mine.fields = mine.fields.union(&changed);
        mine.time = Some(ctx.now.clone());
    }
    managed.write(new);
}

fn starting_ownership(old: Option<&Value>, new: &Value) -> ManagedFields {
    match new.pointer("/metadata/managedFields") {
        Some(Value::Array(entries)) if entries.is_empty() => ManagedFields::default(),
        Some(entries) => match ManagedFields::parse(entries) {
            Ok(sent) if !sent.managers.is_empty() => sent,
            _ => old.map(ManagedFields::read).unwrap_or_default(),
        },
        None => old.map(ManagedFields::read).unwrap_or_default(),
    }
}
