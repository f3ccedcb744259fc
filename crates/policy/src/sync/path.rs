//! Field paths: how a Sync's `compareFields` names a field, and how a drift report names the
//! field that differs.
//!
//! The syntax is the familiar dotted one, with list indices in brackets and keys that contain
//! dots or brackets quoted in brackets: `spec.template.spec.containers[0].image`,
//! `metadata.labels["app.kubernetes.io/name"]`. [`FieldPath`]'s `Display` writes the same
//! syntax back, so a path printed in a drift report can be pasted into `compareFields`.

use std::fmt;
use std::str::FromStr;

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathSegment {
    /// A key of an object.
    Key(String),
    /// An index into a list.
    Index(usize),
}

/// A path from the root of an object to one of its fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(Vec<PathSegment>);

/// Why a `compareFields` entry is not a field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field path {path:?} at byte {position}: {reason}")]
pub struct InvalidFieldPath {
    pub path: String,
    pub position: usize,
    pub reason: &'static str,
}

impl FieldPath {
    /// The path of the whole object.
    pub fn root() -> Self {
        Self::default()
    }

    pub fn segments(&self) -> &[PathSegment] {
        &self.0
    }

    /// This path extended by an object key.
    pub fn key(&self, key: &str) -> Self {
        self.with(PathSegment::Key(key.to_owned()))
    }

    /// This path extended by a list index.
    pub fn index(&self, index: usize) -> Self {
        self.with(PathSegment::Index(index))
    }

    fn with(&self, segment: PathSegment) -> Self {
        let mut segments = self.0.clone();
        segments.push(segment);
        Self(segments)
    }

    /// Whether this path is `prefix` or lies below it.
    pub fn starts_with(&self, prefix: &FieldPath) -> bool {
        self.0.starts_with(&prefix.0)
    }
}

impl From<Vec<PathSegment>> for FieldPath {
    fn from(segments: Vec<PathSegment>) -> Self {
        Self(segments)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                PathSegment::Index(index) => write!(f, "[{index}]")?,
                PathSegment::Key(key) if is_plain_key(key) => {
                    if position > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                PathSegment::Key(key) => {
                    f.write_str("[\"")?;
                    for c in key.chars() {
                        if matches!(c, '"' | '\\') {
                            f.write_str("\\")?;
                        }
                        write!(f, "{c}")?;
                    }
                    f.write_str("\"]")?;
                }
            }
        }
        Ok(())
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty() && !key.contains(['.', '[', ']', '"', '\\'])
}

impl FromStr for FieldPath {
    type Err = InvalidFieldPath;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PathParser { text, position: 0 }.parse()
    }
}

struct PathParser<'a> {
    text: &'a str,
    position: usize,
}

impl PathParser<'_> {
    fn parse(mut self) -> Result<FieldPath, InvalidFieldPath> {
        let mut segments = Vec::new();
        if self.text.is_empty() {
            return Err(self.error("a field path must not be empty"));
        }
        while self.position < self.text.len() {
            let at_start = segments.is_empty();
            match self.peek() {
                Some('[') => segments.push(self.bracketed()?),
                Some('.') if !at_start => {
                    self.position += 1;
                    segments.push(PathSegment::Key(self.plain_key()?));
                }
                _ if at_start => segments.push(PathSegment::Key(self.plain_key()?)),
                _ => return Err(self.error("expected '.' or '[' between path segments")),
            }
        }
        Ok(FieldPath(segments))
    }

    fn peek(&self) -> Option<char> {
        self.text[self.position..].chars().next()
    }

    fn plain_key(&mut self) -> Result<String, InvalidFieldPath> {
        let rest = &self.text[self.position..];
        let length = rest.find(['.', '[', ']', '"']).unwrap_or(rest.len());
        if length == 0 {
            return Err(self.error("expected a field name"));
        }
        self.position += length;
        Ok(rest[..length].to_owned())
    }

    fn bracketed(&mut self) -> Result<PathSegment, InvalidFieldPath> {
        self.position += 1;
        let segment = if self.peek() == Some('"') {
            PathSegment::Key(self.quoted()?)
        } else {
            let rest = &self.text[self.position..];
            let length = rest.find(']').unwrap_or(rest.len());
            let index = rest[..length]
                .parse()
                .map_err(|_| self.error("expected a list index or a quoted key inside [ ]"))?;
            self.position += length;
            PathSegment::Index(index)
        };
        if self.peek() != Some(']') {
            return Err(self.error("expected ']'"));
        }
        self.position += 1;
        Ok(segment)
    }

    fn quoted(&mut self) -> Result<String, InvalidFieldPath> {
        let opening_quote = self.position;
        self.position += 1;
        let mut key = String::new();
        let mut escaped = false;
        for (offset, c) in self.text[self.position..].char_indices() {
            match (escaped, c) {
                (true, _) => {
                    key.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    self.position += offset + 1;
                    return Ok(key);
                }
                (false, _) => key.push(c),
            }
        }
        self.position = opening_quote;
        Err(self.error("unterminated quoted key"))
    }

    fn error(&self, reason: &'static str) -> InvalidFieldPath {
        InvalidFieldPath {
            path: self.text.to_owned(),
            position: self.position,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> FieldPath {
        text.parse().unwrap()
    }

    #[test]
    fn dotted_path_with_index_parses_into_keys_and_index() {
        assert_eq!(
            parse("spec.containers[0].image").segments(),
            [
                PathSegment::Key("spec".into()),
                PathSegment::Key("containers".into()),
                PathSegment::Index(0),
                PathSegment::Key("image".into()),
            ]
        );
    }

    #[test]
    fn quoted_key_may_contain_dots_and_slashes() {
        let path = parse(r#"metadata.labels["app.kubernetes.io/name"]"#);
        assert_eq!(
            path.segments().last(),
            Some(&PathSegment::Key("app.kubernetes.io/name".into()))
        );
        assert_eq!(
            path.to_string(),
            r#"metadata.labels["app.kubernetes.io/name"]"#
        );
    }

    #[test]
    fn malformed_paths_are_refused_with_the_position() {
        for (bad, position) in [("", 0), ("a..b", 2), ("a[x]", 2), ("a[0", 3), ("a[\"b", 2)] {
            let error = bad.parse::<FieldPath>().unwrap_err();
            assert_eq!(error.position, position, "{bad:?}: {error}");
        }
        assert!("a]".parse::<FieldPath>().is_err());
        assert!(".a".parse::<FieldPath>().is_err());
    }

    fn segment() -> impl Strategy<Value = PathSegment> {
        prop_oneof![
            any::<String>().prop_map(PathSegment::Key),
            (0usize..1000).prop_map(PathSegment::Index),
        ]
    }

    proptest! {
        #[test]
        fn display_then_parse_is_the_identity(
            first in any::<String>(),
            rest in proptest::collection::vec(segment(), 0..6),
        ) {
            let mut segments = vec![PathSegment::Key(first)];
            segments.extend(rest);
            let path = FieldPath::from(segments);
            prop_assert_eq!(path.to_string().parse::<FieldPath>().unwrap(), path);
        }
    }
}
