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
    self, DeclaredObject, DeclaredState, ErrorCode, FlatReader, Layout, ScopeTable, SourceError,
    SourceFile,
};

use crate::document::parse_documents;
use crate::error::LoadError;
use crate::files::{RawFile, SourceTree, read_tree, under};

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
    load_held(checkout, options, |declared| declared)
}

/// [`load`], keeping each object as `hold` makes it (see [`parse_tree_held`]).
pub fn load_held<O>(
    checkout: &Path,
    options: &LoadOptions,
    hold: impl FnMut(DeclaredObject) -> O,
) -> Result<DeclaredState<O>, LoadError> {
    let root = resolve_sub_path(checkout, &options.sub_path)?;
    let tree = read_tree(&root)?;
    parse_tree_held(&tree, options.layout, &options.known_scopes, hold).map_err(LoadError::Invalid)
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
    parse_tree_held(tree, layout, known, |declared| declared)
}

/// [`parse_tree_with`], keeping each object as `hold` makes it.
///
/// A flat tree is validated one file at a time ([`FlatReader`]): each file's parsed documents
/// are handed to `hold` and dropped before the next file is parsed, so the source is never
/// held parsed all at once. A hierarchical tree is parsed whole first, since where its objects
/// land depends on other files (namespace directories, the objects they inherit, Syncs and
/// selectors); its objects are held once it is validated.
pub fn parse_tree_held<O>(
    tree: &SourceTree,
    layout: Layout,
    known: &ScopeTable,
    hold: impl FnMut(DeclaredObject) -> O,
) -> Result<DeclaredState<O>, Vec<SourceError>> {
    let mut malformed = Vec::new();
    match layout {
        Layout::Flat => {
            let mut reader = FlatReader::new(hold);
            for file in &tree.files {
                // Once a file has not parsed, only parse errors are reported (see the module
                // docs): the files after it are parsed for theirs, and not held.
                if let Some(file) = parse_file(file, &mut malformed)
                    && malformed.is_empty()
                {
                    reader.read(file);
                }
            }
            if !malformed.is_empty() {
                return Err(layout::sorted_errors(malformed));
            }
            reader.finish()
        }
        Layout::Hierarchical => {
            let files: Vec<SourceFile> = tree
                .files
                .iter()
                .filter_map(|file| parse_file(file, &mut malformed))
                .collect();
            if !malformed.is_empty() {
                return Err(layout::sorted_errors(malformed));
            }
            layout::parse_files_with(layout, files, known).map(|state| state.hold_with(hold))
        }
    }
}

/// The documents of `file`, or `None` with its error added to `malformed`.
fn parse_file(file: &RawFile, malformed: &mut Vec<SourceError>) -> Option<SourceFile> {
    match parse_documents(&file.path, file.format, &file.bytes) {
        Ok(documents) => Some(SourceFile::new(file.path.clone(), documents)),
        Err(error) => {
            malformed.push(error);
            None
        }
    }
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

    #[test]
    fn a_tree_held_as_parsed_declares_what_parsing_it_whole_declares() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "flat/a.yaml", CONFIGMAP);
        write(
            dir.path(),
            "flat/b.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
        );
        write(dir.path(), "twice/a.yaml", CONFIGMAP);
        write(dir.path(), "twice/b.yaml", CONFIGMAP);
        write(dir.path(), "broken/a.yaml", CONFIGMAP);
        write(dir.path(), "broken/b.yaml", "kind: [");
        write(dir.path(), "broken/c.yaml", CONFIGMAP);
        let options = |sub_path: &str| LoadOptions {
            layout: Layout::Flat,
            sub_path: sub_path.into(),
            ..LoadOptions::default()
        };
        let sources = |declared: DeclaredObject| declared.source;

        let whole = load(dir.path(), &options("flat")).unwrap();
        let held = load_held(dir.path(), &options("flat"), sources).unwrap();
        assert_eq!(held.kinds, whole.kinds);
        assert_eq!(held.namespaces, whole.namespaces);
        let whole_sources: Vec<_> = whole
            .objects
            .iter()
            .map(|(key, declared)| (key.clone(), declared.source.clone()))
            .collect();
        let held_sources: Vec<_> = held.objects.into_iter().collect();
        assert_eq!(held_sources, whole_sources);

        for sub_path in ["twice", "broken"] {
            let whole = load(dir.path(), &options(sub_path))
                .unwrap_err()
                .to_string();
            let held = load_held(dir.path(), &options(sub_path), sources)
                .unwrap_err()
                .to_string();
            assert_eq!(held, whole, "{sub_path}");
        }
        assert_eq!(
            codes(load(dir.path(), &options("twice"))),
            [ErrorCode::DuplicateObject]
        );
        assert_eq!(
            codes(load(dir.path(), &options("broken"))),
            [ErrorCode::MalformedFile]
        );
    }
}
