//! Field-level validation errors, shaped like the API server's own.
//!
//! The webhook turns a list of [`FieldError`]s into one admission denial; the controllers put
//! them into a `Stalled` condition. Each error names the field path (`spec.reference.branch`),
//! so a user can find what to fix without reading Arbor's code.

use std::fmt;

/// Why a field was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The field must be set.
    Required,
    /// The field is set to a value Arbor cannot use.
    Invalid,
    /// The field must not be set in this combination.
    Forbidden,
}

impl FieldErrorKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::Forbidden => "Forbidden",
        }
    }
}

/// One refused field: its path from the object root, the kind of problem and the detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {}: {detail}", .kind.as_str())]
pub struct FieldError {
    /// The field path, like `spec.auth.secretRef.name`.
    pub field: String,
    pub kind: FieldErrorKind,
    /// What is wrong and, where it helps, what is accepted.
    pub detail: String,
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Required, detail)
    }

    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Invalid, detail)
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Forbidden, detail)
    }

    fn new(field: impl Into<String>, kind: FieldErrorKind, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind,
            detail: detail.into(),
        }
    }
}

/// Joins errors into one line each, for admission messages and condition messages.
#[derive(Debug, Clone, Copy)]
pub struct DisplayErrors<'a>(pub &'a [FieldError]);

impl fmt::Display for DisplayErrors<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Collects errors while a validator walks an object, then yields the `Result` callers want.
#[derive(Debug, Default)]
pub(crate) struct Errors(Vec<FieldError>);

impl Errors {
    pub(crate) fn push(&mut self, error: FieldError) {
        self.0.push(error);
    }

    pub(crate) fn extend(&mut self, errors: impl IntoIterator<Item = FieldError>) {
        self.0.extend(errors);
    }

    pub(crate) fn check(&mut self, result: Result<(), FieldError>) {
        if let Err(error) = result {
            self.0.push(error);
        }
    }

    pub(crate) fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0)
        }
    }
}

/// Parses a Go-style duration (`30s`, `1m`, `1h30m`) that must be positive.
pub fn parse_positive_duration(
    field: &str,
    value: &str,
) -> Result<std::time::Duration, FieldError> {
    let parsed: kube::core::Duration = value.parse().map_err(|error| {
        FieldError::invalid(
            field,
            format!("{value:?} is not a duration like \"1m\": {error}"),
        )
    })?;
    if parsed.is_negative() || std::time::Duration::from(parsed).is_zero() {
        return Err(FieldError::invalid(
            field,
            format!("{value:?} must be longer than zero"),
        ));
    }
    Ok(parsed.into())
}

/// The field paths of a validation result, for tests that check which fields were refused.
#[cfg(test)]
pub(crate) fn refused_fields(result: Result<(), Vec<FieldError>>) -> Vec<String> {
    result
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|error| error.field)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_error_displays_path_kind_and_detail() {
        let error = FieldError::required("spec.reference", "set one of branch, tag, commit");
        assert_eq!(
            error.to_string(),
            "spec.reference: Required value: set one of branch, tag, commit"
        );
    }

    #[test]
    fn errors_join_with_semicolons() {
        let errors = [
            FieldError::invalid("spec.a", "bad"),
            FieldError::forbidden("spec.b", "no"),
        ];
        assert_eq!(
            DisplayErrors(&errors).to_string(),
            "spec.a: Invalid value: bad; spec.b: Forbidden: no"
        );
    }

    #[test]
    fn durations_parse_go_syntax() {
        assert_eq!(
            parse_positive_duration("spec.pollInterval", "1m30s").unwrap(),
            std::time::Duration::from_secs(90)
        );
    }

    #[test]
    fn zero_negative_and_unitless_durations_are_refused() {
        for bad in ["0s", "-1m", "10", "soon"] {
            let error = parse_positive_duration("spec.pollInterval", bad).unwrap_err();
            assert_eq!(error.field, "spec.pollInterval", "{bad}");
            assert_eq!(error.kind, FieldErrorKind::Invalid, "{bad}");
        }
    }
}
