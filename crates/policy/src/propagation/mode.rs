//! The value of `<domain>/propagate`: how a source object is copied into the namespaces below.

use std::fmt;

use serde_json::Value;

use crate::keys::Keys;
use crate::object;

/// `create`: copies are made when missing and then left alone. `update`: copies are made
/// when missing, kept equal to the source, and deleted when the source goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PropagateMode {
    Create,
    Update,
}

impl PropagateMode {
    /// Parses an annotation value; anything but `create` or `update` propagates nothing.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "create" => Some(Self::Create),
            "update" => Some(Self::Update),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
        }
    }

    /// The mode `object` is annotated with.
    pub fn of(keys: &Keys, object: &Value) -> Option<Self> {
        object::annotation(object, &keys.propagate_annotation).and_then(Self::parse)
    }
}

impl fmt::Display for PropagateMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
