//! A source error: what is wrong, with its code, file and object.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::input::Location;
use crate::code::ErrorCode;

/// One problem found in a source tree. A tree with any of them declares nothing.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, thiserror::Error,
)]
pub struct SourceError {
    pub code: ErrorCode,
    /// The file (or, for directory rules, the directory; for subPath rules, the subPath),
    /// relative to the source root and `/`-separated.
    pub path: String,
    /// The 1-based line, when the parser knows it.
    pub line: Option<u64>,
    /// The object concerned, as `Kind.group/name` or `document N` when it has no identity.
    pub object: Option<String>,
    pub message: String,
}

impl SourceError {
    /// An error about a file or directory as a whole.
    pub fn at_path(code: ErrorCode, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            path: path.into(),
            line: None,
            object: None,
            message: message.into(),
        }
    }

    /// An error about one object of a file.
    pub fn at_object(
        code: ErrorCode,
        location: &Location,
        object: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            object: Some(object.into()),
            ..Self::at_path(code, location.path.clone(), message)
        }
    }

    /// Adds the line the error was found on.
    pub fn with_line(mut self, line: Option<u64>) -> Self {
        self.line = line;
        self
    }
}

/// `ARB2005 namespaces/a/x.yaml:3: RoleBinding.rbac.authorization.k8s.io/pod-creator: message`:
/// the code first, so that tools can pick it out of the line.
impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.path)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(object) = &self.object {
            write!(f, ": {object}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Puts errors in a stable order (by file, then line, then code) and drops exact repeats, so
/// that reports do not change from run to run.
pub fn sorted(mut errors: Vec<SourceError>) -> Vec<SourceError> {
    errors.sort_by(|a, b| {
        (&a.path, a.line, a.code, &a.object, &a.message)
            .cmp(&(&b.path, b.line, b.code, &b.object, &b.message))
    });
    errors.dedup();
    errors
}
