//! JSON patch (RFC 6902, `application/json-patch+json`).
//!
//! One deviation from the RFC, which kube-apiserver makes too: a `test` that expects `null` at a
//! path that does not exist passes. Clients rely on it; kube-rs' finalizer helper, for one,
//! tests `/metadata/finalizers` for `null` before adding the first finalizer.

use json_patch::PatchOperation;
use serde_json::Value;

use super::PatchError;
use super::decode::json_body;

/// Applies the operations in `body` to a copy of `live`. An undecodable body is a bad request; an
/// operation that fails (a `test` that does not match, a missing path) makes the patch invalid.
pub fn json_patch(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let operations: json_patch::Patch = serde_json::from_value(json_body(body, "JSON patch")?)
        .map_err(|error| PatchError::BadRequest(format!("error decoding JSON patch: {error}")))?;
    let mut out = live.clone();
    for operation in operations.iter() {
        if tests_absent_as_null(&out, operation) {
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(operation)).map_err(|error| {
            PatchError::Invalid(format!("JSON patch could not be applied: {error}"))
        })?;
    }
    Ok(out)
}

fn tests_absent_as_null(document: &Value, operation: &PatchOperation) -> bool {
    match operation {
        PatchOperation::Test(test) => {
            test.value.is_null() && document.pointer(test.path.as_str()).is_none()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn test_of_null_passes_on_a_missing_path() {
        let live = json!({"metadata": {"name": "a"}});
        let body = br#"[{"op": "test", "path": "/metadata/finalizers", "value": null},
                        {"op": "add", "path": "/metadata/finalizers", "value": ["x"]}]"#;
        let patched = json_patch(&live, body).unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["x"]));
    }

    #[test]
    fn test_of_null_fails_when_the_path_holds_a_value() {
        let live = json!({"metadata": {"finalizers": ["y"]}});
        let body = br#"[{"op": "test", "path": "/metadata/finalizers", "value": null}]"#;
        assert!(matches!(
            json_patch(&live, body),
            Err(PatchError::Invalid(_))
        ));
    }

    #[test]
    fn a_failing_operation_leaves_the_live_object_untouched() {
        let live = json!({"a": 1});
        let body = br#"[{"op": "replace", "path": "/a", "value": 2},
                        {"op": "test", "path": "/a", "value": 3}]"#;
        assert!(json_patch(&live, body).is_err());
        assert_eq!(live, json!({"a": 1}));
    }
}
