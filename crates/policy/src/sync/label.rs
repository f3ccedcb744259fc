//! "Has Label" (seeds/000): whether Arbor may update or delete a live object.
//!
//! Arbor updates or deletes only objects that carry the management label with its configured
//! value. A label with the right key and another value (`arbor.dev/managed=disabled`) is how an
//! operator takes one object out of Arbor's hands without removing it from git, so it counts as
//! absent.

use std::collections::BTreeMap;
use std::fmt;

use crate::keys::ManagementLabel;

/// Whether a live object is Arbor's to update or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The object carries the management label.
    Managed,
    /// The object does not; Arbor leaves it alone.
    Unmanaged(UnmanagedReason),
}

/// Why a live object is not managed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnmanagedReason {
    /// The label key is absent.
    NoLabel { key: String },
    /// The label key is present with another value.
    OtherValue {
        key: String,
        expected: String,
        found: String,
    },
}

impl Control {
    /// The decision for a live object with these labels.
    pub fn of(label: &ManagementLabel, live_labels: &BTreeMap<String, String>) -> Self {
        match live_labels.get(&label.key) {
            Some(found) if *found == label.value => Self::Managed,
            Some(found) => Self::Unmanaged(UnmanagedReason::OtherValue {
                key: label.key.clone(),
                expected: label.value.clone(),
                found: found.clone(),
            }),
            None => Self::Unmanaged(UnmanagedReason::NoLabel {
                key: label.key.clone(),
            }),
        }
    }

    pub fn may_update_or_delete(&self) -> bool {
        matches!(self, Self::Managed)
    }
}

impl fmt::Display for UnmanagedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLabel { key } => write!(f, "the object has no {key} label"),
            Self::OtherValue {
                key,
                expected,
                found,
            } => write!(f, "the object's {key} label is {found:?}, not {expected:?}"),
        }
    }
}

/// Whether Arbor may update or delete a live object with these labels.
pub fn may_update_or_delete(
    label: &ManagementLabel,
    live_labels: &BTreeMap<String, String>,
) -> bool {
    Control::of(label, live_labels).may_update_or_delete()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn object_with_the_management_label_is_managed() {
        let live = labels(&[("arbor.dev/managed", "enabled"), ("app", "web")]);
        assert!(may_update_or_delete(&ManagementLabel::arbor(), &live));
    }

    #[test]
    fn object_without_the_label_is_not_managed() {
        let live = labels(&[("app", "web")]);
        assert_eq!(
            Control::of(&ManagementLabel::arbor(), &live),
            Control::Unmanaged(UnmanagedReason::NoLabel {
                key: "arbor.dev/managed".into()
            })
        );
    }

    #[test]
    fn label_with_another_value_is_not_managed_and_says_what_it_found() {
        let live = labels(&[("nomos.dev/managed", "disabled")]);
        let control = Control::of(&ManagementLabel::nomos(), &live);
        assert!(!control.may_update_or_delete());
        let Control::Unmanaged(reason) = control else {
            panic!("managed with the wrong value");
        };
        assert_eq!(
            reason.to_string(),
            r#"the object's nomos.dev/managed label is "disabled", not "enabled""#
        );
    }

    #[test]
    fn another_systems_label_does_not_count() {
        let live = labels(&[("nomos.dev/managed", "enabled")]);
        assert!(!may_update_or_delete(&ManagementLabel::arbor(), &live));
    }
}
