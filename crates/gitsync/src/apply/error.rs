//! Why applying one object failed. Each error names the object and has a stable code, so the
//! source's status can report it beside the parse errors (`docs/error-codes.md`).

use arbor_policy::code::ErrorCode;
use arbor_policy::object::GroupVersionKind;
use arbor_runtime::api_error::Rendered;

// The codes of applying, named here for their call sites; [`ErrorCode`] holds them.
pub const KIND_NOT_SERVED: &str = ErrorCode::KindNotServed.as_str();
pub const WRITE_FAILED: &str = ErrorCode::WriteFailed.as_str();
pub const DISCOVERY_FAILED: &str = ErrorCode::DiscoveryFailed.as_str();

/// A failure to apply, delete or read one object.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the cluster does not serve {gvk}")]
    KindNotServed { gvk: GroupVersionKind },
    #[error("discovering {gvk}: {}", Rendered(source))]
    Discovery {
        gvk: GroupVersionKind,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("{verb} {object}: {}", Rendered(source))]
    Write {
        verb: &'static str,
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
}

impl ApplyError {
    /// The stable error code reported on the source's status.
    pub fn code(&self) -> &'static str {
        match self {
            Self::KindNotServed { .. } => KIND_NOT_SERVED,
            Self::Discovery { .. } => DISCOVERY_FAILED,
            Self::Write { .. } => WRITE_FAILED,
        }
    }

    /// The HTTP status of a refused write, such as 409 for a conflict.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Write { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }
}
