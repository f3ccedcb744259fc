//! Detecting two declarations of one object.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::error::SourceError;
use super::input::{Identified, Location};
use crate::code::ErrorCode;

/// What a duplicate's error names of a declaration.
pub(crate) trait Declaration {
    fn location(&self) -> &Location;
    /// `Kind.group/name`, the way errors name objects.
    fn display(&self) -> String;
}

impl Declaration for Identified<'_> {
    fn location(&self) -> &Location {
        &self.location
    }

    fn display(&self) -> String {
        Identified::display(self)
    }
}

impl<D: Declaration + ?Sized> Declaration for &D {
    fn location(&self) -> &Location {
        (**self).location()
    }

    fn display(&self) -> String {
        (**self).display()
    }
}

/// Records `object` under `key`, or reports it as a duplicate of the object already there.
pub(crate) fn insert_unique<K: Ord, D: Declaration>(
    seen: &mut BTreeMap<K, D>,
    key: K,
    object: D,
    errors: &mut Vec<SourceError>,
) -> bool {
    match seen.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(object);
            true
        }
        Entry::Occupied(first) => {
            let first = first.get().location();
            errors.push(SourceError::at_object(
                ErrorCode::DuplicateObject,
                object.location(),
                object.display(),
                format!(
                    "{} is also declared in {} (document {})",
                    object.display(),
                    first.path,
                    first.document
                ),
            ));
            false
        }
    }
}
