//! Values that many tracking records hold alike, kept once.
//!
//! Every tracking object of a source carries the same ownerReference and the same
//! deletion-policy annotation, and gitsync holds a record of every tracking object
//! ([`tracking_record`](super::tracking_record)). Decoded into owned values, those parts were
//! the larger share of a record (an annotation map alone allocates a B-tree node of over 500
//! bytes). So a record points at one shared copy instead: decoding looks the value up among the
//! recently seen ones and takes that copy when it is equal.
//!
//! Only equality is asked of the values (k8s-openapi's types are not `Hash`), so the lookup is
//! a short scan of the most recently used copies, the last one first: a watch or a list
//! delivers the tracking objects of one source together, so the first comparison nearly
//! always matches. A value not among them is kept anew (correct, only not shared).

use std::borrow::Borrow;
use std::sync::{Arc, Mutex, PoisonError};

/// How many distinct values are remembered per kind of value.
const REMEMBERED: usize = 16;

/// The recently seen copies of one kind of value, most recently used first.
#[derive(Debug)]
pub struct SharedValues<T: ?Sized> {
    recent: Mutex<Vec<Arc<T>>>,
}

impl<T: ?Sized + PartialEq> SharedValues<T> {
    pub const fn new() -> Self {
        Self {
            recent: Mutex::new(Vec::new()),
        }
    }

    /// A shared copy equal to `value`: a remembered one, or `value` itself, then remembered.
    pub fn share<V>(&self, value: V) -> Arc<T>
    where
        V: Borrow<T>,
        Arc<T>: From<V>,
    {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = recent.iter().position(|known| **known == *value.borrow()) {
            let shared = recent[found].clone();
            // Move to the front: the next record is most likely of the same source.
            recent[..=found].rotate_right(1);
            return shared;
        }
        let shared = Arc::from(value);
        if recent.len() == REMEMBERED {
            recent.pop();
        }
        recent.insert(0, shared.clone());
        shared
    }
}

impl<T: ?Sized + PartialEq> Default for SharedValues<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_copy_and_different_ones_do_not() {
        let values = SharedValues::<str>::new();
        let a = values.share("a".to_owned());
        let b = values.share("b".to_owned());
        let a_again = values.share("a".to_owned());
        assert!(Arc::ptr_eq(&a, &a_again));
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(&*b, "b");
    }

    #[test]
    fn a_value_not_seen_lately_is_kept_anew_and_still_equal() {
        let values = SharedValues::<String>::new();
        let first = values.share("0".to_owned());
        for n in 1..=REMEMBERED {
            values.share(n.to_string());
        }
        let again = values.share("0".to_owned());
        assert!(
            !Arc::ptr_eq(&first, &again),
            "forgotten after REMEMBERED others"
        );
        assert_eq!(first, again);
    }
}
