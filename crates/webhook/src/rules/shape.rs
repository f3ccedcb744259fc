//! Objects whose shape a rule cannot read are refused with the field that is wrong.
//!
//! The API server validates built-in kinds before webhooks see them, but a webhook must not
//! trust that (a CRD without a schema, a `Review` from a tool): a missing name or labels that
//! are not a map become a denial naming the field, never a panic or a silent allow.

use serde_json::Value;

use crate::review_outcome::Check;

/// Rule id of a denial for an unreadable object.
pub const SHAPE_RULE: &str = "arbor object-shape";

/// A field a rule needs is missing or of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {detail}")]
pub struct ShapeError {
    /// The field path, like `metadata.ownerReferences[0].kind`.
    pub field: String,
    pub detail: String,
}

impl ShapeError {
    pub fn missing(field: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            detail: "required field is missing".into(),
        }
    }

    pub fn wrong_type(field: impl Into<String>, expected: &str) -> Self {
        Self {
            field: field.into(),
            detail: format!("must be {expected}"),
        }
    }

    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            detail: detail.into(),
        }
    }

    /// The denial for an object that is called `what` in messages.
    pub fn into_check(self, what: &str) -> Check {
        Check::deny(
            SHAPE_RULE,
            format!("{what}: cannot read the object: {self}"),
        )
    }
}

/// The string at `path`: `None` when absent or null, an error when of another type.
pub fn string_at<'a>(object: &'a Value, path: &[&str]) -> Result<Option<&'a str>, ShapeError> {
    let mut value = object;
    for key in path {
        match value.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(next) => value = next,
        }
    }
    value
        .as_str()
        .map(Some)
        .ok_or_else(|| ShapeError::wrong_type(path.join("."), "a string"))
}

/// Checks that `metadata.labels` and `metadata.annotations` are maps of strings, the shape
/// every rule reads them in.
pub fn check_metadata_maps(object: &Value) -> Result<(), ShapeError> {
    if !object.is_object() {
        return Err(ShapeError::wrong_type("(object)", "a JSON object"));
    }
    for map in ["labels", "annotations"] {
        match object
            .get("metadata")
            .and_then(|metadata| metadata.get(map))
        {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                if let Some((key, _)) = entries.iter().find(|(_, v)| !v.is_string()) {
                    return Err(ShapeError::wrong_type(
                        format!("metadata.{map}[{key:?}]"),
                        "a string",
                    ));
                }
            }
            Some(_) => {
                return Err(ShapeError::wrong_type(
                    format!("metadata.{map}"),
                    "a map of strings",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_at_tells_absent_from_wrong_type() {
        let object = json!({"metadata": {"name": "a", "namespace": 3}});
        assert_eq!(string_at(&object, &["metadata", "name"]), Ok(Some("a")));
        assert_eq!(string_at(&object, &["spec", "x"]), Ok(None));
        assert_eq!(
            string_at(&object, &["metadata", "namespace"])
                .unwrap_err()
                .field,
            "metadata.namespace"
        );
    }

    #[test]
    fn metadata_maps_must_hold_strings() {
        assert!(check_metadata_maps(&json!({"metadata": {"labels": {"a": "b"}}})).is_ok());
        let error = check_metadata_maps(&json!({"metadata": {"labels": {"a": 1}}})).unwrap_err();
        assert_eq!(error.field, "metadata.labels[\"a\"]");
        let error = check_metadata_maps(&json!({"metadata": {"annotations": []}})).unwrap_err();
        assert_eq!(error.field, "metadata.annotations");
        assert!(check_metadata_maps(&json!(7)).is_err());
    }
}
