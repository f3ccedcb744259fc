//! Patch types and the request content types that select them.

/// The kind of patch a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 JSON patch.
    Json,
    /// RFC 7386 JSON merge patch.
    Merge,
    /// Kubernetes strategic merge patch (built-in kinds only).
    StrategicMerge,
    /// Server-side apply.
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` header value (parameters such as `; charset=utf-8` are
    /// ignored). Apply accepts YAML and JSON bodies.
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = content_type.split(';').next()?.trim().to_ascii_lowercase();
        match media_type.as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_select_patch_types() {
        for (content_type, expected) in [
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::StrategicMerge),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            ("Application/Apply-Patch+JSON", Some(PatchType::Apply)),
            ("application/json", None),
        ] {
            assert_eq!(
                PatchType::from_content_type(content_type),
                expected,
                "{content_type}"
            );
        }
    }
}
