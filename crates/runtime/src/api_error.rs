//! API server errors in the words people read.
//!
//! kube-rs displays a refused request as `ApiError: <message> (Status { status: ..., code: ...
//! })`, a Rust struct dump. What kube-apiserver says is already the readable part: its
//! `Status.message` names the object and the problem (`namespaces "shop" not found`), and
//! `reason` with the HTTP code says what kind of refusal it was. [`Rendered`] shows exactly that,
//! and any other client error (connection, TLS, decoding) as kube-rs describes it.

use std::fmt;

/// Displays a [`kube::Error`] as kube-apiserver's Status message, with its reason and code.
#[derive(Debug, Clone, Copy)]
pub struct Rendered<'a>(pub &'a kube::Error);

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kube::Error::Api(status) = self.0 else {
            return self.0.fmt(f);
        };
        let reason = status.reason.as_str();
        match (status.message.is_empty(), reason.is_empty()) {
            (false, false) => write!(f, "{} ({reason}, HTTP {})", status.message, status.code),
            (false, true) => write!(f, "{} (HTTP {})", status.message, status.code),
            (true, false) => write!(f, "{reason} (HTTP {})", status.code),
            (true, true) => write!(f, "the API server answered HTTP {}", status.code),
        }
    }
}

/// [`Rendered`] as a `String`.
pub fn render(error: &kube::Error) -> String {
    Rendered(error).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn a_refusal_reads_as_the_api_servers_message() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "message": "namespaces \"shop\" not found",
            "reason": "NotFound",
            "details": {"name": "shop", "kind": "namespaces"},
            "code": 404,
        }))
        .unwrap();
        let error = kube::Error::Api(Box::new(status));
        assert_eq!(
            render(&error),
            "namespaces \"shop\" not found (NotFound, HTTP 404)"
        );
        assert!(!render(&error).contains("Status {"));
    }
}
