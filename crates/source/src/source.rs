//! From a checked-out directory to the state it declares.
//!
//! [`load`] resolves the subPath, reads the tree and parses it in the source's layout. The
//! result is all or nothing: a declared state, or every error found. When a file does not parse
//! only the parse errors are reported, because validating a tree with a file missing from it
//! produces errors that are not really there (a Sync that did not parse makes every object of
//! its kinds look unsynced).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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
/// are handed to `hold` and dropped, in file order, while the parse threads are at most a file
/// ahead each ([`parse_in_order`]), so the source is never held parsed all at once. A hierarchical tree is parsed whole first, since where its objects
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
            parse_in_order(&tree.files, |parsed| match parsed {
                // Once a file has not parsed, only parse errors are reported (see the module
                // docs): the files after it are parsed for theirs, and not held.
                Ok(file) if malformed.is_empty() => reader.read(file),
                Ok(_) => {}
                Err(error) => malformed.push(error),
            });
            if !malformed.is_empty() {
                return Err(layout::sorted_errors(malformed));
            }
            reader.finish()
        }
        Layout::Hierarchical => {
            let mut files = Vec::with_capacity(tree.files.len());
            parse_in_order(&tree.files, |parsed| match parsed {
                Ok(file) => files.push(file),
                Err(error) => malformed.push(error),
            });
            if !malformed.is_empty() {
                return Err(layout::sorted_errors(malformed));
            }
            layout::parse_files_with(layout, files, known).map(|state| state.hold_with(hold))
        }
    }
}

/// The documents of `file`.
fn parse_file(file: &RawFile) -> Result<SourceFile, SourceError> {
    parse_documents(&file.path, file.format, &file.bytes)
        .map(|documents| SourceFile::new(file.path.clone(), documents))
}

/// The most threads parsing in this process at once, whatever the number of trees parsed.
const MAX_PARSERS: usize = 4;

/// Parse threads running in this process.
static PARSERS_RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A tree smaller than this is parsed on the calling thread: starting threads would cost more
/// than they save.
const PARALLEL_FROM_BYTES: usize = 256 * 1024;

/// Parse threads claimed for one tree, given back when dropped.
struct ParserClaim(usize);

impl ParserClaim {
    /// Up to `wanted` threads, as many as keep the process within [`MAX_PARSERS`].
    fn up_to(wanted: usize) -> ParserClaim {
        let mut claimed = 0;
        let _ = PARSERS_RUNNING.fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
            claimed = wanted.min(MAX_PARSERS.saturating_sub(running));
            Some(running + claimed)
        });
        ParserClaim(claimed)
    }
}

impl Drop for ParserClaim {
    fn drop(&mut self) {
        PARSERS_RUNNING.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// Parses `files`, handing each file's result to `each` in the files' order.
///
/// A large tree is parsed on one thread per core, file `i` on thread `i % threads`, while the
/// calling thread takes the results in order: parsing a 100,000-object source is most of a
/// round before its first write, and the cluster is idle meanwhile. The threads of every tree
/// parsed at once count against one limit ([`MAX_PARSERS`]); a tree that finds none free is
/// parsed on the calling thread. Each thread parses at most one file ahead of the one it has
/// handed on, so about two files per thread are held parsed at once (one, parsing on the
/// calling thread).
fn parse_in_order(files: &[RawFile], each: impl FnMut(Result<SourceFile, SourceError>)) {
    let bytes: usize = files.iter().map(|file| file.bytes.len()).sum();
    if bytes < PARALLEL_FROM_BYTES {
        return parse_in_order_on(files, 1, each);
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let claim = ParserClaim::up_to(cores.min(files.len()));
    parse_in_order_on(files, claim.0, each);
}

/// [`parse_in_order`] on `threads` threads (the calling thread alone for one or none).
fn parse_in_order_on(
    files: &[RawFile],
    threads: usize,
    mut each: impl FnMut(Result<SourceFile, SourceError>),
) {
    let threads = threads.min(files.len());
    if threads <= 1 {
        files.iter().map(parse_file).for_each(each);
        return;
    }
    std::thread::scope(|scope| {
        let (results, parsers): (Vec<_>, Vec<_>) = (0..threads)
            .map(|first| {
                let (sender, receiver) = std::sync::mpsc::sync_channel(1);
                let parser = scope.spawn(move || {
                    for file in files.iter().skip(first).step_by(threads) {
                        if sender.send(parse_file(file)).is_err() {
                            break;
                        }
                    }
                });
                (receiver, parser)
            })
            .unzip();
        for index in 0..files.len() {
            // A thread stops sending early only by panicking; its panic is raised below.
            let Ok(parsed) = results[index % threads].recv() else {
                break;
            };
            each(parsed);
        }
        // Unblocks any thread still sending, so that every one ends.
        drop(results);
        for parser in parsers {
            if let Err(panic) = parser.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
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
    fn files_parsed_on_several_threads_are_handed_on_in_order() {
        let configmap = |index: usize| {
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\n")
        };
        let files: Vec<RawFile> = (0..11)
            .map(|file| RawFile {
                path: format!("file-{file:02}.yaml"),
                format: crate::document::Format::Yaml,
                bytes: if file % 4 == 2 {
                    b"kind: [".to_vec()
                } else {
                    (0..50)
                        .map(|object| configmap(file * 50 + object))
                        .collect::<String>()
                        .into_bytes()
                },
            })
            .collect();
        let outline = |parsed: Result<SourceFile, SourceError>| match parsed {
            Ok(file) => format!("{} {}", file.path, file.documents.len()),
            Err(error) => error.to_string(),
        };
        let mut alone = Vec::new();
        parse_in_order_on(&files, 1, |parsed| alone.push(outline(parsed)));
        assert_eq!(alone.len(), 11);
        assert!(alone[2].contains("file-02.yaml"), "{}", alone[2]);
        for threads in [2, 3, 4, 16] {
            let mut shared = Vec::new();
            parse_in_order_on(&files, threads, |parsed| shared.push(outline(parsed)));
            assert_eq!(shared, alone, "{threads} threads");
        }
    }

    #[test]
    fn the_parse_threads_of_every_tree_count_against_one_limit() {
        let first = ParserClaim::up_to(MAX_PARSERS);
        let second = ParserClaim::up_to(MAX_PARSERS);
        assert!(first.0 + second.0 <= MAX_PARSERS);
        let (first_claimed, second_claimed) = (first.0, second.0);
        drop(first);
        let third = ParserClaim::up_to(first_claimed);
        assert!(second_claimed + third.0 <= MAX_PARSERS);
        drop((second, third));
        assert!(PARSERS_RUNNING.load(Ordering::Acquire) <= MAX_PARSERS);
    }

    #[test]
    fn a_tree_parsed_on_several_threads_declares_what_it_declares_parsed_on_one() {
        let dir = tempfile::tempdir().unwrap();
        let text = |file: usize| {
            (0..400)
                .map(|object| {
                    format!(
                        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{file}-{object}\n  namespace: team\ndata:\n  value: {}\n",
                        "x".repeat(40)
                    )
                })
                .collect::<String>()
        };
        for file in 0..8 {
            write(dir.path(), &format!("large/f{file}.yaml"), &text(file));
        }
        let options = LoadOptions {
            layout: Layout::Flat,
            sub_path: "large".into(),
            ..LoadOptions::default()
        };
        let tree = read_tree(&dir.path().join("large")).unwrap();
        let bytes: usize = tree.files.iter().map(|file| file.bytes.len()).sum();
        assert!(
            bytes >= PARALLEL_FROM_BYTES,
            "the tree is parsed in parallel"
        );
        let state = load(dir.path(), &options).unwrap();
        assert_eq!(state.objects.len(), 8 * 400);
        let mut sequential = Vec::new();
        parse_in_order_on(&tree.files, 1, |parsed| sequential.push(parsed.unwrap()));
        let whole =
            layout::parse_files_with(Layout::Flat, sequential, &ScopeTable::default()).unwrap();
        assert_eq!(state, whole);
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
