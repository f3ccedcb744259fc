//! Field paths inside one resource, printed the way a user reads a manifest:
//! `.spec.template.spec.containers[0].image`, with `[-1]` naming a list's control entry.

use std::fmt;

/// One step from a value to one of its children.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A list element.
    Index(usize),
    /// The list control entry, always the last element of a schema list.
    ListControl,
}

/// A path from a resource's root to one of its fields. The empty path is the resource itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    pub fn root() -> Self {
        Self::default()
    }

    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// This path extended by a mapping key.
    pub fn key(&self, key: &str) -> Self {
        self.child(Segment::Key(key.to_owned()))
    }

    /// This path extended by a list index.
    pub fn index(&self, index: usize) -> Self {
        self.child(Segment::Index(index))
    }

    /// This path extended to the list's control entry.
    pub fn list_control(&self) -> Self {
        self.child(Segment::ListControl)
    }

    fn child(&self, segment: Segment) -> Self {
        let mut segments = self.0.clone();
        segments.push(segment);
        Self(segments)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(".");
        }
        for segment in &self.0 {
            match segment {
                Segment::Key(key) if is_plain_key(key) => write!(f, ".{key}")?,
                // Label keys such as `app.kubernetes.io/name` would read as nested fields.
                Segment::Key(key) => write!(f, "[{}]", serde_json::Value::from(key.as_str()))?,
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::ListControl => f.write_str("[-1]")?,
            }
        }
        Ok(())
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_manifest_fields() {
        let containers = FieldPath::root()
            .key("spec")
            .key("template")
            .key("spec")
            .key("containers");
        assert_eq!(
            containers.index(0).key("image").to_string(),
            ".spec.template.spec.containers[0].image"
        );
        assert_eq!(
            containers.list_control().to_string(),
            ".spec.template.spec.containers[-1]"
        );
        assert_eq!(FieldPath::root().to_string(), ".");
    }

    #[test]
    fn dotted_keys_are_quoted() {
        let path = FieldPath::root()
            .key("metadata")
            .key("labels")
            .key("app.kubernetes.io/name");
        assert_eq!(
            path.to_string(),
            r#".metadata.labels["app.kubernetes.io/name"]"#
        );
    }
}
