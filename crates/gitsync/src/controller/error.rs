//! Errors of the controllers, each with the stable code reported on the source's status.

use arbor_runtime::api_error::Rendered;

use crate::apply::ApplyError;
use crate::fetch::{CheckoutError, FetchError};

/// Code: fetching the repository failed.
pub const FETCH_FAILED: &str = "ARB3001";
/// Code: the credentials Secret is missing or lacks a key.
pub const SECRET_INVALID: &str = "ARB3002";
/// Code: a round would prune too much and waits for the allow annotation.
pub const MASS_PRUNE_BLOCKED: &str = "ARB3005";
/// Code: a declared object exists on the cluster without the management label.
pub const UNMANAGED_OBJECT: &str = "ARB3006";
/// Code: the source's spec is invalid.
pub const INVALID_SPEC: &str = "ARB3007";
/// Code: another source manages an object this source declares (a management conflict).
pub const MANAGEMENT_CONFLICT: &str = "ARB3020";
/// Code: deleting the source (`deletionPolicy: Delete`) waits for the allow annotation.
pub const DELETION_BLOCKED: &str = "ARB3021";
/// Code: the checkout or the local tree could not be read.
pub const CHECKOUT_FAILED: &str = "ARB3009";
/// Code: a round panicked; caught and reported for its source alone.
pub const ROUND_PANICKED: &str = "ARB3015";

/// Every code the controller reports, in order; each has a section in `docs/error-codes.md`.
pub const CODES: [&str; 12] = [
    FETCH_FAILED,
    SECRET_INVALID,
    crate::apply::error::KIND_NOT_SERVED,
    crate::apply::error::WRITE_FAILED,
    MASS_PRUNE_BLOCKED,
    UNMANAGED_OBJECT,
    INVALID_SPEC,
    crate::apply::error::DISCOVERY_FAILED,
    CHECKOUT_FAILED,
    MANAGEMENT_CONFLICT,
    DELETION_BLOCKED,
    ROUND_PANICKED,
];

/// A failure that ends a round or a finalizer early; the next attempt retries.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Fetch(#[from] Box<FetchError>),
    #[error(transparent)]
    Checkout(#[from] Box<CheckoutError>),
    #[error("reading the checkout: {0}")]
    Load(String),
    #[error("credentials secret {secret}: {problem}")]
    Secret { secret: String, problem: String },
    #[error(transparent)]
    Apply(#[from] Box<ApplyError>),
    #[error("{verb} {object}: {}", Rendered(source))]
    Kube {
        verb: &'static str,
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("the git worker stopped: {0}")]
    Worker(String),
    /// kube-runtime's finalizer helper cannot address the object (it has no name, or the
    /// finalizer's place in its list cannot be written as a JSON pointer).
    #[error("finalizer of {object}: {problem}")]
    Finalizer { object: String, problem: String },
}

impl From<ApplyError> for ControllerError {
    fn from(error: ApplyError) -> Self {
        Self::Apply(Box::new(error))
    }
}

impl From<FetchError> for ControllerError {
    fn from(error: FetchError) -> Self {
        Self::Fetch(Box::new(error))
    }
}

impl From<CheckoutError> for ControllerError {
    fn from(error: CheckoutError) -> Self {
        Self::Checkout(Box::new(error))
    }
}

impl ControllerError {
    pub fn kube(verb: &'static str, object: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            verb,
            object: object.into(),
            source: Box::new(source),
        }
    }

    /// The stable code for the status.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Fetch(_) => FETCH_FAILED,
            Self::Checkout(_) | Self::Load(_) | Self::Worker(_) => CHECKOUT_FAILED,
            Self::Secret { .. } => SECRET_INVALID,
            Self::Apply(error) => error.code(),
            Self::Kube { .. } | Self::Finalizer { .. } => crate::apply::error::WRITE_FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_code_is_distinct_and_documented() {
        let docs = include_str!("../../../../docs/error-codes.md");
        for (index, code) in CODES.iter().enumerate() {
            assert!(
                !CODES[..index].contains(code),
                "{code} is listed twice in CODES"
            );
            assert!(
                docs.contains(&format!("\n## {code}\n")),
                "docs/error-codes.md has no section for {code}"
            );
        }
    }
}
