//! Writing an Application's objects: server-side apply of the manifest, list bounds put back,
//! and deletion.
//!
//! Every object is applied with force under the `arbor-observer` field manager, so a field
//! someone changed by hand (and so took over) is taken back. Server-side apply leaves alone
//! what other managers own, though: an element added by hand to a merged list stays. When the
//! observer saw a list outside its bounds, the list is therefore replaced whole by a merge
//! patch with the applied value, which merge patches do for every list.

use arbor_api::keys::OBSERVER_FIELD_MANAGER;
use arbor_policy::observe::{
    Difference, ModifiedResource, ResourceId, Segment, without_list_lengths,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::resolve::Resolver;

/// Applies `object` and returns what the API answered.
pub async fn apply_object(resolver: &Resolver, object: &Value) -> Result<Value, Error> {
    let id = identity(object)?;
    let api = resolver.api_for(&id).await?;
    let params = PatchParams::apply(OBSERVER_FIELD_MANAGER).force();
    let applied = api
        .patch(&id.name, &params, &Patch::Apply(object))
        .await
        .map_err(|source| Error::Apply {
            object: id.clone(),
            source: Box::new(source),
        })?;
    to_value(&id, &applied)
}

/// Puts back every list of `modified` that the observer saw outside its bounds, with the
/// value `applied` (the last applied object) gives it; returns the object as the API answered,
/// or `None` when no list was outside its bounds.
pub async fn restore_list_bounds(
    resolver: &Resolver,
    applied: &Value,
    modified: &ModifiedResource,
) -> Result<Option<Value>, Error> {
    let mut patch = Value::Object(Map::new());
    let mut any = false;
    for difference in &modified.differences {
        if !matches!(difference.difference, Difference::ListOutsideBounds { .. }) {
            continue;
        }
        // A merge patch addresses mapping keys only: a list inside a list element is put back
        // by replacing the outer list.
        let keys: Vec<&str> = difference
            .path
            .segments()
            .iter()
            .map_while(|segment| match segment {
                Segment::Key(key) => Some(key.as_str()),
                Segment::Index(_) | Segment::ListControl => None,
            })
            .collect();
        let Some(value) = keys.iter().try_fold(applied, |value, key| value.get(key)) else {
            continue;
        };
        insert_at(&mut patch, &keys, without_list_lengths(value));
        any = true;
    }
    if !any {
        return Ok(None);
    }
    let id = modified.id.clone();
    let api = resolver.api_for(&id).await?;
    let params = PatchParams {
        field_manager: Some(OBSERVER_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patched = api
        .patch(&id.name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Apply {
            object: id.clone(),
            source: Box::new(source),
        })?;
    to_value(&id, &patched).map(Some)
}

/// Deletes the object `id` names; an object already gone is fine.
pub async fn delete_object(resolver: &Resolver, id: &ResourceId) -> Result<(), Error> {
    let api = resolver.api_for(id).await?;
    match api.delete(&id.name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Delete {
            object: id.clone(),
            source: Box::new(source),
        }),
    }
}

/// The identity of a manifest object (validated before it gets here).
fn identity(object: &Value) -> Result<ResourceId, Error> {
    ResourceId::of(object).map_err(|missing| Error::IncompleteObject { field: missing.0 })
}

fn to_value(id: &ResourceId, object: &kube::core::DynamicObject) -> Result<Value, Error> {
    serde_json::to_value(object).map_err(|source| Error::Encode {
        what: id.to_string(),
        source,
    })
}

fn insert_at(target: &mut Value, keys: &[&str], value: Value) {
    let Some((last, parents)) = keys.split_last() else {
        *target = value;
        return;
    };
    let mut node = target;
    for key in parents {
        let Value::Object(map) = node else { return };
        node = map
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(map) = node {
        map.insert((*last).to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_keys_build_a_merge_patch() {
        let mut patch = json!({});
        insert_at(&mut patch, &["spec", "ports"], json!([1]));
        insert_at(&mut patch, &["spec", "selector"], json!({"a": "b"}));
        assert_eq!(
            patch,
            json!({"spec": {"ports": [1], "selector": {"a": "b"}}})
        );
    }
}
