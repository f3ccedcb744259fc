//! Why an observer schema is refused: every problem, each with the resource and the exact
//! field it is about, and a stable reason code.

use std::fmt;

use super::path::FieldPath;

/// Which list of the application an erroneous entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `spec.observerSchema`, printed `resource[i]`.
    ObserverSchema,
    /// `spec.manifest`, printed `manifest[i]`.
    Manifest,
}

/// Why one part of a schema is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaErrorReason {
    /// A schema entry is not a mapping.
    ResourceNotAMapping,
    /// `apiVersion`, `kind` or `metadata.name` is absent or null.
    MissingIdentity { field: &'static str },
    /// An identifying field holds something other than a string.
    IdentityNotAString { field: &'static str },
    /// `metadata` is not a mapping.
    MetadataNotAMapping,
    /// An observed field holds a value; observed fields must be `null`.
    LeafNotNull,
    /// A list does not end with the control entry.
    MissingListControl,
    /// The control entry lacks a length key or has a key of its own.
    MalformedListControl { detail: String },
    /// A length is not an integer.
    ListLengthNotInteger { key: &'static str },
    /// A length is negative.
    NegativeListLength { key: &'static str },
    /// The minimum is above a (limited) maximum.
    MinAboveMax { min: u64, max: u64 },
    /// A (limited) maximum is below the number of elements the schema observes.
    MaxBelowObservedElements { max: u64, observed: usize },
    /// The schema has a mapping or list where the manifest has another kind of value.
    ShapeDiffersFromManifest {
        schema: &'static str,
        manifest: &'static str,
    },
    /// The schema names a resource the manifest does not declare.
    ResourceNotInManifest,
    /// Two schema entries name the same resource.
    DuplicateResource { first: usize },
}

impl SchemaErrorReason {
    /// A stable code for tooling and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ResourceNotAMapping => "ResourceNotAMapping",
            Self::MissingIdentity { .. } => "MissingIdentity",
            Self::IdentityNotAString { .. } => "IdentityNotAString",
            Self::MetadataNotAMapping => "MetadataNotAMapping",
            Self::LeafNotNull => "LeafNotNull",
            Self::MissingListControl => "MissingListControl",
            Self::MalformedListControl { .. } => "MalformedListControl",
            Self::ListLengthNotInteger { .. } => "ListLengthNotInteger",
            Self::NegativeListLength { .. } => "NegativeListLength",
            Self::MinAboveMax { .. } => "MinAboveMax",
            Self::MaxBelowObservedElements { .. } => "MaxBelowObservedElements",
            Self::ShapeDiffersFromManifest { .. } => "ShapeDiffersFromManifest",
            Self::ResourceNotInManifest => "ResourceNotInManifest",
            Self::DuplicateResource { .. } => "DuplicateResource",
        }
    }
}

impl fmt::Display for SchemaErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ResourceNotAMapping => f.write_str("a schema resource must be a mapping"),
            Self::MissingIdentity { field } => write!(f, "{field} is required"),
            Self::IdentityNotAString { field } => write!(f, "{field} must be a string"),
            Self::MetadataNotAMapping => f.write_str("metadata must be a mapping"),
            Self::LeafNotNull => f.write_str("an observed field must be null"),
            Self::MissingListControl => write!(
                f,
                "a list must end with {{{}, {}}}",
                super::LIST_MIN_LENGTH_KEY,
                super::LIST_MAX_LENGTH_KEY
            ),
            Self::MalformedListControl { detail } => {
                write!(f, "malformed list control entry: {detail}")
            }
            Self::ListLengthNotInteger { key } => write!(f, "{key} must be an integer"),
            Self::NegativeListLength { key } => write!(f, "{key} must not be negative"),
            Self::MinAboveMax { min, max } => write!(
                f,
                "minimum length {min} is above maximum length {max} (0 would mean unlimited)"
            ),
            Self::MaxBelowObservedElements { max, observed } => write!(
                f,
                "maximum length {max} is below the {observed} elements the schema observes"
            ),
            Self::ShapeDiffersFromManifest { schema, manifest } => write!(
                f,
                "the schema observes a {schema} where the manifest has a {manifest}"
            ),
            Self::ResourceNotInManifest => {
                f.write_str("the observed resource is not in the application's manifest")
            }
            Self::DuplicateResource { first } => {
                write!(f, "the resource is already observed by resource[{first}]")
            }
        }
    }
}

/// One problem in an observer schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    pub origin: Origin,
    /// Position of the entry in its list.
    pub index: usize,
    /// `apiVersion kind name` as far as the entry gives them (`?` for missing parts).
    pub resource: String,
    pub path: FieldPath,
    pub reason: SchemaErrorReason,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = match self.origin {
            Origin::ObserverSchema => "resource",
            Origin::Manifest => "manifest",
        };
        write!(
            f,
            "{origin}[{}] ({}) {}: {} [{}]",
            self.index,
            self.resource,
            self.path,
            self.reason,
            self.reason.code()
        )
    }
}

/// Every problem found in an observer schema, in document order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SchemaErrors(pub Vec<SchemaError>);

impl fmt::Display for SchemaErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid observer schema ({} errors)", self.0.len())?;
        for error in &self.0 {
            write!(f, "\n  {error}")?;
        }
        Ok(())
    }
}
