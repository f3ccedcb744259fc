//! Server-side apply: merge the applied configuration, enforce and record ownership, and remove
//! what the applier stopped applying.
//!
//! The steps follow kube-apiserver's: (1) the configuration is merged over the live object;
//! (2) the merged object is compared with the live one, and every field the merge added or
//! changed that another manager owns is a conflict — unless `force`, in which case those managers
//! lose the field; fields whose value did not change are simply owned by both; (3) the applier's
//! entry becomes exactly the configuration's field set; (4) fields the applier applied last time,
//! no longer applies, and nobody else owns are removed from the object.

use std::cmp::Reverse;

use serde_json::{Map, Value, json};

use super::conflict::conflict_error;
use super::decode;
use super::fieldset::FieldSet;
use super::managed::{ManagedFields, ManagerId, Operation, Ownership};
use super::merge::merge;
use super::owned::{ownable_field_set, without_server_metadata};
use super::path::PathElement;
use super::schema::{ListSemantics, Schema};
use super::typed::{self, Strictness, compare};
use super::{PatchError, WriteContext};

/// Server-side apply. `live` is `None` when the object does not exist (apply creates). Returns
/// the new object with `metadata.managedFields` updated: the manager's Apply entry set to exactly
/// the fields in `body`; fields it applied before and no longer applies are removed from the
/// object when no other manager owns them; changing fields other managers own is a
/// [`PatchError::Conflict`] unless `ctx.force` (then ownership moves to this manager). On a kind
/// with a status subresource, applying to the main resource ignores `.status` and applying to
/// `/status` ignores everything else.
pub fn apply(
    live: Option<&Value>,
    body: &[u8],
    ctx: &WriteContext,
    lists: &ListSemantics,
) -> Result<Value, PatchError> {
    let schema = &lists.root;
    let config = scope_to_subresource(decode::apply_body(body, live.is_some())?, ctx, lists);
    let config = without_server_metadata(&config);
    let applied = ownable_field_set(&config, schema, Strictness::Reject).map_err(|error| {
        PatchError::Invalid(format!(
            "{} {:?} is invalid: {error}",
            config["kind"].as_str().unwrap_or_default(),
            config["metadata"]["name"].as_str().unwrap_or_default()
        ))
    })?;

    let live = live.cloned().unwrap_or_else(|| json!({}));
    let mut managed = ManagedFields::read(&live);
    let mut merged = merge(Some(&live), &config, schema);

    let live_clean = without_server_metadata(&live);
    let merged_clean = without_server_metadata(&merged);
    let comparison = compare(
        &live_clean,
        &tolerant_field_set(&live_clean, schema),
        &merged_clean,
        &tolerant_field_set(&merged_clean, schema),
        schema,
    );

    let me = ManagerId::new(
        &ctx.field_manager,
        Operation::Apply,
        &ctx.api_version,
        ctx.subresource.as_deref(),
    );
    let changed = comparison.changed();
    let conflicts: Vec<(ManagerId, Vec<Vec<PathElement>>)> = managed
        .managers
        .iter()
        .filter(|(id, _)| **id != me)
        .filter_map(|(id, ownership)| {
            let contested = ownership.fields.intersection(&changed);
            (!contested.is_empty()).then(|| (id.clone(), contested.members()))
        })
        .collect();
    if !conflicts.is_empty() && !ctx.force {
        return Err(conflict_error(&conflicts));
    }
    managed.release(&changed.union(&comparison.removed), Some(&me));

    let previous = managed.managers.remove(&me);
    let last_applied = previous
        .as_ref()
        .map(|ownership| ownership.fields.clone())
        .unwrap_or_default();
    managed.managers.insert(
        me.clone(),
        Ownership {
            api_version: ctx.api_version.clone(),
            time: None,
            fields: applied.clone(),
        },
    );
    let owned = managed.all_owned();
    let pruned = prune(
        &mut merged,
        schema,
        &last_applied.difference(&owned),
        &owned,
    );

    let object_changed = pruned || !changed.is_empty() || !comparison.removed.is_empty();
    let time = match previous {
        Some(previous) if !object_changed && previous.fields == applied => previous.time,
        _ => Some(ctx.now.clone()),
    };
    if let Some(mine) = managed.managers.get_mut(&me) {
        mine.time = time;
    }
    managed.write(&mut merged);
    Ok(merged)
}

fn tolerant_field_set(object: &Value, schema: &Schema) -> FieldSet {
    // Tolerant extraction turns unidentifiable lists into atomic ones instead of failing.
    ownable_field_set(object, schema, Strictness::Tolerate).unwrap_or_default()
}

/// Applying to `/status` applies only `.status`; applying to the main resource of a kind with a
/// status subresource ignores `.status`.
fn scope_to_subresource(mut config: Value, ctx: &WriteContext, lists: &ListSemantics) -> Value {
    let Some(object) = config.as_object_mut() else {
        return config;
    };
    match ctx.subresource.as_deref() {
        Some("status") => {
            let mut scoped = Map::new();
            for field in ["apiVersion", "kind", "status"] {
                if let Some(value) = object.get(field) {
                    scoped.insert(field.to_owned(), value.clone());
                }
            }
            let mut metadata = Map::new();
            for field in ["name", "namespace"] {
                if let Some(value) = config.pointer(&format!("/metadata/{field}")) {
                    metadata.insert(field.to_owned(), value.clone());
                }
            }
            scoped.insert("metadata".to_owned(), Value::Object(metadata));
            Value::Object(scoped)
        }
        None if lists.status_subresource => {
            object.shift_remove("status");
            config
        }
        _ => config,
    }
}

/// Removes the `released` fields nobody `owned` any more, deepest first, and the maps and lists
/// that become empty because of it. Returns whether anything was removed.
fn prune(object: &mut Value, schema: &Schema, released: &FieldSet, owned: &FieldSet) -> bool {
    let mut paths = released.members();
    paths.sort_by_key(|path| Reverse(path.len()));
    let mut removed_any = false;
    for path in paths {
        // An element someone still owns parts of stays, and so do the fields that identify it.
        if owned.has_member_at_or_below(&path) || is_key_field(&path) {
            continue;
        }
        if typed::remove(object, schema, &path) {
            removed_any = true;
            remove_emptied_ancestors(object, schema, &path, owned);
        }
    }
    removed_any
}

fn is_key_field(path: &[PathElement]) -> bool {
    match path {
        [.., PathElement::Key(keys), PathElement::Field(name)] => {
            keys.iter().any(|(key, _)| key == name)
        }
        _ => false,
    }
}

fn remove_emptied_ancestors(
    object: &mut Value,
    schema: &Schema,
    path: &[PathElement],
    owned: &FieldSet,
) {
    for depth in (1..path.len()).rev() {
        let ancestor = &path[..depth];
        let emptied = !owned.contains(ancestor)
            && typed::get(object, schema, ancestor).is_some_and(|value| match value {
                Value::Object(map) => map.is_empty(),
                Value::Array(list) => list.is_empty(),
                _ => false,
            });
        if !emptied || !typed::remove(object, schema, ancestor) {
            return;
        }
    }
}
