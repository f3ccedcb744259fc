//! From a checked-out directory to the state it declares.
//!
//! [`load`] resolves the subPath, reads the tree and parses it in the source's layout. The
//! result is all or nothing: a declared state, or every error found. When a file does not parse
//! only the parse errors are reported, because validating a tree with a file missing from it
//! produces errors that are not really there (a Sync that did not parse makes every object of
//! its kinds look unsynced).

use std::fs;
use std::path::{Path, PathBuf};

use arbor_policy::layout::{
    self, DeclaredState, ErrorCode, Layout, ScopeTable, SourceError, SourceFile,
};

use crate::document::parse_documents;
use crate::error::LoadError;
use crate::files::{SourceTree, read_tree, under};

/// Which part of a checkout is the source, and how it is laid out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOptions {
    pub layout: Layout,
    /// The directory of the source inside the checkout, `/`-separated; empty or `.` for the
    /// whole checkout.
    pub sub_path: String,
    /// Scopes of kinds beyond the built-in table, such as those a cluster serves.
    pub known_scopes: ScopeTable,
}

/// Reads and validates the source at `options.sub_path` in `checkout`.
pub fn load(checkout: &Path, options: &LoadOptions) -> Result<DeclaredState, LoadError> {
    let root = resolve_sub_path(checkout, &options.sub_path)?;
    let tree = read_tree(&root)?;
    parse_tree_with(&tree, options.layout, &options.known_scopes).map_err(LoadError::Invalid)
}

/// Parses every file of `tree` and validates them in `layout`.
pub fn parse_tree(tree: &SourceTree, layout: Layout) -> Result<DeclaredState, Vec<SourceError>> {
    parse_tree_with(tree, layout, &ScopeTable::default())
}

/// [`parse_tree`], knowing the scopes in `known` beyond the built-in table.
pub fn parse_tree_with(
    tree: &SourceTree,
    layout: Layout,
    known: &ScopeTable,
) -> Result<DeclaredState, Vec<SourceError>> {
    let mut files = Vec::with_capacity(tree.files.len());
    let mut malformed = Vec::new();
    for file in &tree.files {
        match parse_documents(&file.path, file.format, &file.bytes) {
            Ok(documents) => files.push(SourceFile::new(file.path.clone(), documents)),
            Err(error) => malformed.push(error),
        }
    }
    if !malformed.is_empty() {
        return Err(layout::sorted_errors(malformed));
    }
    layout::parse_files_with(layout, files, known)
}

/// The directory `sub_path` names in `checkout`. It must stay inside the checkout (no absolute
/// path, no `..`, no symbolic link leading out) and be a directory.
pub fn resolve_sub_path(checkout: &Path, sub_path: &str) -> Result<PathBuf, LoadError> {
    let invalid = |code, message: String| {
        LoadError::Invalid(vec![SourceError::at_path(code, sub_path, message)])
    };
    if arbor_policy::layout::sub_path::check(sub_path).is_err() {
        return Err(invalid(
            ErrorCode::InvalidSubPath,
            "subPath must be a relative path inside the repository, without \"..\"".into(),
        ));
    }
    let root = fs::canonicalize(checkout).map_err(|e| LoadError::io(checkout, e))?;
    let not_found = || {
        invalid(
            ErrorCode::SubPathNotFound,
            format!("subPath {sub_path:?} is not a directory of the repository"),
        )
    };
    let resolved = fs::canonicalize(under(&root, sub_path)).map_err(|_| not_found())?;
    if !resolved.starts_with(&root) {
        return Err(invalid(
            ErrorCode::InvalidSubPath,
            "subPath leads out of the repository through a symbolic link".into(),
        ));
    }
    if !resolved.is_dir() {
        return Err(not_found());
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(result: Result<DeclaredState, LoadError>) -> Vec<ErrorCode> {
        match result {
            Err(LoadError::Invalid(errors)) => errors.iter().map(|e| e.code).collect(),
            other => panic!("expected source errors, got {other:?}"),
        }
    }

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    const CONFIGMAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: team\n";

    #[test]
    fn flat_source_at_sub_path_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "deploy/app/cm.yaml", CONFIGMAP);
        write(dir.path(), "other/cm.yaml", "not: [valid");
        let options = LoadOptions {
            layout: Layout::Flat,
            sub_path: "deploy/app".into(),
            ..LoadOptions::default()
        };
        let state = load(dir.path(), &options).unwrap();
        assert_eq!(state.objects.len(), 1);
        let (_, declared) = state.objects.iter().next().unwrap();
        assert_eq!(declared.source.path, "cm.yaml");
    }

    #[test]
    fn missing_or_escaping_sub_paths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "file.yaml", CONFIGMAP);
        let load_at = |sub_path: &str| {
            load(
                dir.path(),
                &LoadOptions {
                    layout: Layout::Flat,
                    sub_path: sub_path.into(),
                    ..LoadOptions::default()
                },
            )
        };
        assert_eq!(codes(load_at("absent")), [ErrorCode::SubPathNotFound]);
        assert_eq!(codes(load_at("file.yaml")), [ErrorCode::SubPathNotFound]);
        assert_eq!(codes(load_at("../x")), [ErrorCode::InvalidSubPath]);
        assert_eq!(codes(load_at("/etc")), [ErrorCode::InvalidSubPath]);
    }

    #[test]
    fn empty_sub_path_is_an_error_never_nothing_declared() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "empty/README.md", "nothing here");
        let options = LoadOptions {
            layout: Layout::Flat,
            sub_path: "empty".into(),
            ..LoadOptions::default()
        };
        assert_eq!(codes(load(dir.path(), &options)), [ErrorCode::EmptySource]);
    }

    #[test]
    fn malformed_files_are_reported_alone() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", "kind: [");
        write(dir.path(), "b.yaml", "apiVersion: v1\n");
        write(dir.path(), "c.json", "{");
        let options = LoadOptions {
            layout: Layout::Flat,
            sub_path: String::new(),
            ..LoadOptions::default()
        };
        assert_eq!(
            codes(load(dir.path(), &options)),
            [ErrorCode::MalformedFile, ErrorCode::MalformedFile]
        );
    }
}
