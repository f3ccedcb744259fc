//! The errors of reading a source tree and of writing hydrated output.

use std::io;
use std::path::PathBuf;

use arbor_policy::layout::SourceError;

/// Why a source tree yields no declared state.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The tree could not be read (a file system problem, not a problem of the repository).
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A directory nests deeper than [`crate::files::MAX_DEPTH`]; the tree is not read further.
    #[error(
        "directory {path:?} is nested more than {limit} directories deep; Arbor reads at most {limit}"
    )]
    TooDeep { path: String, limit: usize },
    /// The tree was read but is invalid; every error found, in a stable order.
    #[error("{} error(s) in the source, first: {}", .0.len(), .0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid(Vec<SourceError>),
}

impl LoadError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// The source errors, when the tree was read but is invalid.
    pub fn source_errors(&self) -> Option<&[SourceError]> {
        match self {
            Self::Invalid(errors) => Some(errors),
            Self::Io { .. } | Self::TooDeep { .. } => None,
        }
    }
}

/// Why hydrated output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum HydrateError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Hydrate never overwrites or mixes with files it did not write.
    #[error("output directory {0} exists and is not empty")]
    OutputNotEmpty(PathBuf),
    /// `cluster/` holds the cluster-scoped objects, so a namespace of that name has no directory.
    #[error(
        "namespace \"cluster\" cannot be hydrated: its directory would be the cluster-scoped objects' cluster/"
    )]
    NamespaceNamedCluster,
    #[error("cannot render {object}: {message}")]
    Render { object: String, message: String },
}
