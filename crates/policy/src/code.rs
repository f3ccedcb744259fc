//! Every stable error code Arbor reports, in one enum.
//!
//! Codes never change meaning and are never reused: tooling and people match on them. `ARB1xxx`
//! are errors of the files themselves (syntax, identity, names, subPath), valid in every layout;
//! `ARB2xxx` are rules of the hierarchical layout, and a fixture repository under
//! `tests/fixtures/repos/bad/` produces each of these two families exactly. `ARB3xxx` are the
//! running controller's: the cluster, the repository server or the source's spec, not the tree.
//! `docs/error-codes.md` documents each one (a test here holds it to that).

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! error_codes {
    ($($variant:ident = $code:literal, $summary:literal;)*) => {
        /// One kind of source error. See `docs/error-codes.md`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $(#[doc = $summary] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as written in reports, such as `ARB1001`.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// One line saying what the code means.
            pub fn summary(self) -> &'static str {
                match self { $(ErrorCode::$variant => $summary,)* }
            }

            /// The code written as `ARB1001`, if it is one.
            pub fn parse(code: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|c| c.as_str() == code)
            }
        }
    };
}

error_codes! {
    MalformedFile = "ARB1001", "a YAML or JSON file does not parse";
    MissingIdentity = "ARB1002", "a document is not an object with apiVersion, kind and metadata.name";
    InvalidName = "ARB1003", "an object name, namespace name or namespace directory name is invalid";
    DuplicateObject = "ARB1004", "two objects with the same kind and name are declared in one place";
    EmptySource = "ARB1005", "the tree at subPath declares no object at all";
    SubPathNotFound = "ARB1006", "subPath does not exist or is not a directory";
    InvalidSubPath = "ARB1007", "subPath is absolute or leaves the repository";
    NamespaceDirectoryHasSubdirectories = "ARB2001", "a namespace directory contains directories";
    KindNotAllowedInAbstractNamespace = "ARB2002", "an object whose kind has hierarchyMode none is in an abstract namespace";
    NamespaceContradictsDirectory = "ARB2003", "metadata.namespace contradicts the object's directory";
    NamespaceNameMismatch = "ARB2004", "a Namespace's name differs from its directory's name";
    DuplicateInAncestry = "ARB2005", "two objects of the same kind and name reach one namespace";
    AbstractNamespaceWithoutNamespace = "ARB2006", "an abstract namespace has no namespace below it";
    ClusterScopedInNamespaces = "ARB2007", "a cluster-scoped object is under namespaces/";
    NamespacedInCluster = "ARB2008", "a namespaced object is under cluster/";
    UnsyncedKind = "ARB2009", "an object's kind is declared by no Sync";
    UnknownScope = "ARB2010", "neither the built-in table nor a CustomResourceDefinition says the kind's scope";
    MisplacedConfigObject = "ARB2011", "a Repo, Sync or NamespaceSelector is outside the place it belongs";
    MisplacedObject = "ARB2012", "an object is in a directory where its kind cannot live";
    UnknownNamespaceSelector = "ARB2013", "the namespace-selector annotation names no NamespaceSelector in scope";
    SelectorOutsideAbstractNamespace = "ARB2014", "the namespace-selector annotation is on an object outside an abstract namespace";
    InvalidNamespaceSelector = "ARB2015", "a NamespaceSelector's selector is invalid";
    InvalidSync = "ARB2016", "a Sync is malformed";
    ConflictingSync = "ARB2017", "one kind is declared by more than one Sync entry";
    InvalidCustomResourceDefinition = "ARB2018", "a CustomResourceDefinition does not say its group, kind and scope";
    FetchFailed = "ARB3001", "fetching the repository failed";
    SecretInvalid = "ARB3002", "the credentials Secret is missing or lacks a key";
    KindNotServed = "ARB3003", "the cluster does not serve a declared kind";
    WriteFailed = "ARB3004", "a write (apply or delete) was refused or failed";
    MassPruneBlocked = "ARB3005", "a round would prune too much and waits for the allow annotation";
    UnmanagedObject = "ARB3006", "a declared object exists on the cluster without the management label";
    InvalidSpec = "ARB3007", "the source's spec is invalid";
    DiscoveryFailed = "ARB3008", "discovery itself failed (not \"kind not served\")";
    CheckoutFailed = "ARB3009", "the checkout or the local tree could not be read";
    RoundPanicked = "ARB3015", "a round panicked; caught and reported for its source alone";
    ManagementConflict = "ARB3020", "another source manages an object this source declares";
    DeletionBlocked = "ARB3021", "deleting the source (deletionPolicy: Delete) waits for the allow annotation";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} used twice");
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
            assert!(code.as_str().starts_with("ARB") && code.as_str().len() == 7);
        }
        assert_eq!(ErrorCode::parse("ARB9999"), None);
    }

    #[test]
    fn codes_are_in_numeric_order_and_each_is_documented() {
        let docs = include_str!("../../../docs/error-codes.md");
        for pair in ErrorCode::ALL.windows(2) {
            assert!(
                pair[0].as_str() < pair[1].as_str(),
                "{} before {}",
                pair[0],
                pair[1]
            );
        }
        for code in ErrorCode::ALL {
            assert!(
                docs.contains(&format!("\n## {code}\n")),
                "docs/error-codes.md has no section for {code}"
            );
        }
    }
}
