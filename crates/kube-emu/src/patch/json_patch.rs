//! JSON patch (RFC 6902, `application/json-patch+json`).

use serde_json::Value;

use super::PatchError;
use super::decode::json_body;

/// Applies the operations in `body` to a copy of `live`. An undecodable body is a bad request; an
/// operation that fails (a `test` that does not match, a missing path) makes the patch invalid.
pub fn json_patch(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let operations: json_patch::Patch = serde_json::from_value(json_body(body, "JSON patch")?)
        .map_err(|error| PatchError::BadRequest(format!("error decoding JSON patch: {error}")))?;
    let mut out = live.clone();
    json_patch::patch(&mut out, &operations).map_err(|error| {
        PatchError::Invalid(format!("JSON patch could not be applied: {error}"))
    })?;
    Ok(out)
}
