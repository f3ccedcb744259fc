//! Detecting two declarations of one object.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::error::SourceError;
use super::input::Identified;
use crate::code::ErrorCode;

/// Records `object` under `key`, or reports it as a duplicate of the object already there.
pub(crate) fn insert_unique<'o, 'a, K: Ord>(
    seen: &mut BTreeMap<K, &'o Identified<'a>>,
    key: K,
    object: &'o Identified<'a>,
    errors: &mut Vec<SourceError>,
) -> bool {
    match seen.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(object);
            true
        }
        Entry::Occupied(first) => {
            let first = first.get();
            errors.push(SourceError::at_object(
                ErrorCode::DuplicateObject,
                &object.location,
                object.display(),
                format!(
                    "{} is also declared in {} (document {})",
                    object.display(),
                    first.location.path,
                    first.location.document
                ),
            ));
            false
        }
    }
}
