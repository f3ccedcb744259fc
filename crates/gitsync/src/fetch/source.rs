//! What is fetched: the identity of a source (which names its cache directory), the reference
//! it follows, and the repository URL with its credentials.

use std::fmt;
use std::str::FromStr;

use super::credentials::Credentials;

/// The kind of object that declares a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A namespaced `GitTrack`.
    GitTrack,
    /// A cluster-scoped `ClusterGitTrack`.
    ClusterGitTrack,
}

impl SourceKind {
    pub(crate) fn directory_prefix(self) -> &'static str {
        match self {
            SourceKind::GitTrack => "gittrack",
            SourceKind::ClusterGitTrack => "clustergittrack",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SourceKind::GitTrack => "GitTrack",
            SourceKind::ClusterGitTrack => "ClusterGitTrack",
        })
    }
}

/// The stable identity of a source: its kind, namespace (for a `GitTrack`) and name.
///
/// The identity, not the URL, names the cache directory (through a keyed hash, see the
/// `cache` module), so a source keeps its cache across fetches and two sources never share one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceId {
    kind: SourceKind,
    namespace: Option<String>,
    name: String,
}

impl SourceId {
    /// The identity of the `GitTrack` `namespace/name`.
    pub fn git_track(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        SourceId {
            kind: SourceKind::GitTrack,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The identity of the `ClusterGitTrack` `name`.
    pub fn cluster_git_track(name: impl Into<String>) -> Self {
        SourceId {
            kind: SourceKind::ClusterGitTrack,
            namespace: None,
            name: name.into(),
        }
    }

    pub fn kind(&self) -> SourceKind {
        self.kind
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The identity as one string: `<kind>_<namespace>_<name>` (`<kind>_<name>` for
    /// cluster-scoped sources). This is what the cache directory's keyed hash is taken of, never
    /// a path itself: a path derived from names would let a tenant who knows another source's
    /// name point a `file://` URL at its cache.
    ///
    /// Kubernetes names never contain `_`, and every byte outside `[a-z0-9.-]` is written as
    /// `%XX`, so the mapping is injective.
    pub fn canonical_name(&self) -> String {
        let mut out = String::from(self.kind.directory_prefix());
        for part in self.namespace.iter().chain(std::iter::once(&self.name)) {
            out.push('_');
            for byte in part.bytes() {
                if byte.is_ascii_lowercase()
                    || byte.is_ascii_digit()
                    || byte == b'.'
                    || byte == b'-'
                {
                    out.push(char::from(byte));
                } else {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
        }
        out
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// The git reference a source follows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GitReference {
    /// A branch, by its short name (`main`, `release/1.2`).
    Branch(String),
    /// A tag, by its short name (`v1.2.0`); annotated tags are peeled to their commit.
    Tag(String),
    /// A commit, by its full hexadecimal object id. A commit never changes, so once it is in
    /// the cache it is never fetched again.
    Commit(String),
    /// A short name resolved the way `git rev-parse` does on the remote: a tag of that name
    /// first, then a branch.
    Name(String),
}

impl GitReference {
    /// The full remote ref names this reference may match, in order of preference.
    pub(crate) fn candidate_refs(&self) -> Vec<String> {
        match self {
            GitReference::Branch(branch) => vec![format!("refs/heads/{branch}")],
            GitReference::Tag(tag) => vec![format!("refs/tags/{tag}")],
            GitReference::Name(name) => {
                vec![format!("refs/tags/{name}"), format!("refs/heads/{name}")]
            }
            GitReference::Commit(_) => Vec::new(),
        }
    }
}

impl fmt::Display for GitReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitReference::Branch(branch) => write!(f, "branch {branch}"),
            GitReference::Tag(tag) => write!(f, "tag {tag}"),
            GitReference::Commit(sha) => write!(f, "commit {sha}"),
            GitReference::Name(name) => write!(f, "reference {name}"),
        }
    }
}

/// Reads a reference as written in a source's `spec.reference`: `refs/heads/<b>` is a branch,
/// `refs/tags/<t>` a tag, a full object id (40 or 64 hexadecimal digits) a commit, and any other
/// string a [`GitReference::Name`].
impl FromStr for GitReference {
    type Err = InvalidReference;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err(InvalidReference {
                reference: text.to_owned(),
            });
        }
        if let Some(branch) = text.strip_prefix("refs/heads/") {
            return Ok(GitReference::Branch(branch.to_owned()));
        }
        if let Some(tag) = text.strip_prefix("refs/tags/") {
            return Ok(GitReference::Tag(tag.to_owned()));
        }
        let is_object_id =
            matches!(text.len(), 40 | 64) && text.bytes().all(|byte| byte.is_ascii_hexdigit());
        if is_object_id {
            return Ok(GitReference::Commit(text.to_ascii_lowercase()));
        }
        Ok(GitReference::Name(text.to_owned()))
    }
}

/// A reference string that names nothing (it is empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reference {reference:?} is empty")]
pub struct InvalidReference {
    pub reference: String,
}

/// Everything one fetch needs to know about a source.
#[derive(Clone, Debug)]
pub struct GitSource {
    pub id: SourceId,
    /// `https://…`, `http://…`, `ssh://[user@]host[:port]/path`, `[user@]host:path` or
    /// `file:///path`.
    pub url: String,
    pub reference: GitReference,
    pub credentials: Credentials,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_separate_namespace_and_name_unambiguously() {
        let a = SourceId::git_track("a-b", "c").canonical_name();
        let b = SourceId::git_track("a", "b-c").canonical_name();
        assert_eq!(a, "gittrack_a-b_c");
        assert_eq!(b, "gittrack_a_b-c");
        assert_eq!(
            SourceId::cluster_git_track("platform").canonical_name(),
            "clustergittrack_platform"
        );
    }

    #[test]
    fn canonical_names_escape_path_separators_and_unexpected_bytes() {
        let name = SourceId::git_track("ns", "../X_y").canonical_name();
        assert_eq!(name, "gittrack_ns_..%2F%58%5Fy");
        assert!(!name.contains('/'));
    }

    #[test]
    fn references_parse_as_branch_tag_commit_or_name() {
        let sha = "0123456789abcdef0123456789ABCDEF01234567";
        assert_eq!(
            "refs/heads/main".parse(),
            Ok(GitReference::Branch("main".into()))
        );
        assert_eq!("refs/tags/v1".parse(), Ok(GitReference::Tag("v1".into())));
        assert_eq!(
            sha.parse(),
            Ok(GitReference::Commit(sha.to_ascii_lowercase()))
        );
        assert_eq!("main".parse(), Ok(GitReference::Name("main".into())));
        assert_eq!("0123abc".parse(), Ok(GitReference::Name("0123abc".into())));
        assert!("  ".parse::<GitReference>().is_err());
    }

    #[test]
    fn a_short_name_prefers_a_tag_to_a_branch_like_git() {
        assert_eq!(
            GitReference::Name("v1".into()).candidate_refs(),
            vec!["refs/tags/v1".to_owned(), "refs/heads/v1".to_owned()]
        );
    }
}
