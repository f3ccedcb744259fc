//! Decoding request bodies: JSON for every patch type, YAML (a superset) for apply.

use serde_json::Value;

use super::PatchError;

/// Parses a JSON body.
pub fn json_body(body: &[u8], what: &str) -> Result<Value, PatchError> {
    serde_json::from_slice(body)
        .map_err(|error| PatchError::BadRequest(format!("error decoding {what}: {error}")))
}

/// Parses an apply body, YAML or JSON, and checks it is a well-formed object: a map with
/// `apiVersion`, `kind`, and no `metadata.managedFields`. `metadata.name` may be left out when
/// the object exists (the URL names it; kube-rs's own cluster tests apply such partial
/// bodies), not when the apply creates it.
pub fn apply_body(body: &[u8], exists: bool) -> Result<Value, PatchError> {
    let text = std::str::from_utf8(body).map_err(|error| {
        PatchError::BadRequest(format!("error decoding apply patch: not UTF-8: {error}"))
    })?;
    let value: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|error| {
            PatchError::BadRequest(format!("error decoding apply patch as JSON: {error}"))
        })?
    } else {
        serde_saphyr::from_str(text).map_err(|error| {
            PatchError::BadRequest(format!("error decoding apply patch as YAML: {error}"))
        })?
    };
    let Value::Object(object) = &value else {
        return Err(PatchError::BadRequest(format!(
            "apply patch must be an object, found {value}"
        )));
    };
    for field in ["apiVersion", "kind"] {
        if object
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(PatchError::BadRequest(format!(
                "apply patch: {field} must be set to a non-empty string"
            )));
        }
    }
    let metadata = object.get("metadata").and_then(Value::as_object);
    if !exists
        && metadata
            .and_then(|metadata| metadata.get("name"))
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        return Err(PatchError::BadRequest(
            "apply patch: metadata.name must be set to a non-empty string".to_owned(),
        ));
    }
    if metadata.is_some_and(|metadata| {
        metadata
            .get("managedFields")
            .is_some_and(|fields| !fields.is_null())
    }) {
        return Err(PatchError::BadRequest(
            "apply patch: metadata.managedFields must be nil".to_owned(),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_and_json_bodies_decode_alike() {
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  port: \"80\"\n  n: 3\n";
        let json_text = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"port":"80","n":3}}"#;
        assert_eq!(
            apply_body(yaml, false).unwrap(),
            apply_body(json_text, false).unwrap()
        );
        assert_eq!(apply_body(yaml, false).unwrap()["data"]["n"], json!(3));
    }

    #[test]
    fn bodies_without_identity_are_bad_requests() {
        for body in [
            &b"kind: ConfigMap\nmetadata:\n  name: x\n"[..],
            b"apiVersion: v1\nkind: ConfigMap\n",
            b"- a\n- b\n",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  managedFields: []\n",
            b"{not json",
        ] {
            assert!(matches!(
                apply_body(body, false),
                Err(PatchError::BadRequest(_))
            ));
        }
    }

    #[test]
    fn an_apply_to_an_existing_object_may_leave_the_name_to_the_url() {
        let partial = b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n";
        assert!(apply_body(partial, true).is_ok());
        assert!(matches!(
            apply_body(partial, false),
            Err(PatchError::BadRequest(_))
        ));
    }
}
