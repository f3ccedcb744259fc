//! Errors of the controllers, each with the stable code reported on the source's status.

use arbor_policy::code::ErrorCode;
use arbor_runtime::api_error::Rendered;

use crate::apply::ApplyError;
use crate::fetch::{CheckoutError, FetchError};

// The codes the controller reports, named here for its call sites; [`ErrorCode`] holds them.
pub const FETCH_FAILED: &str = ErrorCode::FetchFailed.as_str();
pub const SECRET_INVALID: &str = ErrorCode::SecretInvalid.as_str();
pub const MASS_PRUNE_BLOCKED: &str = ErrorCode::MassPruneBlocked.as_str();
pub const UNMANAGED_OBJECT: &str = ErrorCode::UnmanagedObject.as_str();
pub const INVALID_SPEC: &str = ErrorCode::InvalidSpec.as_str();
pub const MANAGEMENT_CONFLICT: &str = ErrorCode::ManagementConflict.as_str();
pub const DELETION_BLOCKED: &str = ErrorCode::DeletionBlocked.as_str();
pub const CHECKOUT_FAILED: &str = ErrorCode::CheckoutFailed.as_str();
pub const ROUND_PANICKED: &str = ErrorCode::RoundPanicked.as_str();

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
    /// The source's shard is no longer worked on here (this replica stops, or gives the shard
    /// up): the round sends no further write, and the shard's next holder syncs the source.
    #[error(
        "the round stopped before its next write: this replica no longer works on the source's shard (it is stopping or gave the shard up)"
    )]
    ShardLeft,
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
            // Never reported: a round whose shard was left writes no status.
            Self::Kube { .. } | Self::ShardLeft => crate::apply::error::WRITE_FAILED,
        }
    }
}
