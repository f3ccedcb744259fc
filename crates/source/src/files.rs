//! Reading the files of a source tree from a checked-out directory.
//!
//! Only `.yaml`, `.yml` and `.json` files are part of a source; other files (READMEs, scripts)
//! are listed as skipped. Hidden entries (`.git`, `.github`, ...) are skipped because they hold
//! tooling, not declarations. Symbolic links are skipped too: a link could point outside the
//! checkout and make a repository declare files it does not contain.

use std::fs;
use std::path::{Path, PathBuf};

use crate::document::Format;
use crate::error::LoadError;

/// One file to parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFile {
    /// Relative to the tree's root, `/`-separated.
    pub path: String,
    pub format: Format,
    pub bytes: Vec<u8>,
}

/// A file that is not part of the source, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: String,
    pub reason: &'static str,
}

/// The files of a tree, in path order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceTree {
    pub files: Vec<RawFile>,
    pub skipped: Vec<SkippedFile>,
}

/// How many directories deep a source tree may nest. No configuration repository comes near
/// it, and every level costs path length: at this depth a checkout's paths still fit in
/// `PATH_MAX` with names of about a dozen characters. Deeper trees are refused with an error
/// naming the directory, never walked (the checkout and the reader use the same bound).
pub const MAX_DEPTH: usize = 256;

/// Reads every source file under `root`.
///
/// The walk keeps its own stack of directories rather than recursing, so a hostile tree
/// cannot exhaust the thread's stack; a directory deeper than [`MAX_DEPTH`] is an error.
pub fn read_tree(root: &Path) -> Result<SourceTree, LoadError> {
    let mut tree = SourceTree::default();
    let mut pending = vec![(root.to_path_buf(), String::new(), 0_usize)];
    while let Some((dir, relative, depth)) = pending.pop() {
        if depth > MAX_DEPTH {
            return Err(LoadError::TooDeep {
                path: relative,
                limit: MAX_DEPTH,
            });
        }
        read_dir(&dir, &relative, depth, &mut tree, &mut pending)?;
    }
    tree.files.sort_by(|a, b| a.path.cmp(&b.path));
    tree.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(tree)
}

/// Reads the entries of one directory: files into `tree`, subdirectories onto `pending`.
fn read_dir(
    dir: &Path,
    relative: &str,
    depth: usize,
    tree: &mut SourceTree,
    pending: &mut Vec<(PathBuf, String, usize)>,
) -> Result<(), LoadError> {
    let entries = fs::read_dir(dir).map_err(|e| LoadError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LoadError::io(dir, e))?;
        let name = entry.file_name();
        let path = entry.path();
        let Some(name) = name.to_str() else {
            tree.skipped.push(SkippedFile {
                path: join(relative, &name.to_string_lossy()),
                reason: "the file name is not UTF-8",
            });
            continue;
        };
        let relative_path = join(relative, name);
        let file_type = entry.file_type().map_err(|e| LoadError::io(&path, e))?;
        let skip = |reason| SkippedFile {
            path: relative_path.clone(),
            reason,
        };
        if name.starts_with('.') {
            tree.skipped.push(skip("hidden"));
        } else if file_type.is_symlink() {
            tree.skipped.push(skip("symbolic links are not followed"));
        } else if file_type.is_dir() {
            pending.push((path, relative_path, depth + 1));
        } else if let Some(format) = Format::of(name) {
            let bytes = fs::read(&path).map_err(|e| LoadError::io(&path, e))?;
            tree.files.push(RawFile {
                path: relative_path,
                format,
                bytes,
            });
        } else {
            tree.skipped.push(skip("not a .yaml, .yml or .json file"));
        }
    }
    Ok(())
}

fn join(relative: &str, name: &str) -> String {
    if relative.is_empty() {
        name.to_owned()
    } else {
        format!("{relative}/{name}")
    }
}

/// The directory a relative path names inside `root`, as a `PathBuf`.
pub(crate) fn under(root: &Path, relative: &str) -> PathBuf {
    relative
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .fold(root.to_path_buf(), |path, segment| path.join(segment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yaml_and_json_files_recursively_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("b/c")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("b/c/x.yml"), "a: 1").unwrap();
        fs::write(root.join("a.json"), "{}").unwrap();
        fs::write(root.join("README.md"), "#").unwrap();
        fs::write(root.join(".git/config.yaml"), "a: 1").unwrap();
        let tree = read_tree(root).unwrap();
        let paths: Vec<_> = tree.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.json", "b/c/x.yml"]);
        let skipped: Vec<_> = tree.skipped.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(skipped, [".git", "README.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.yaml"), "a: 1").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let tree = read_tree(dir.path()).unwrap();
        assert!(tree.files.is_empty());
        assert_eq!(tree.skipped[0].path, "link");
    }

    #[test]
    fn trees_deeper_than_the_bound_are_refused_naming_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let deep: PathBuf = std::iter::repeat_n("d", MAX_DEPTH + 1).collect();
        fs::create_dir_all(dir.path().join(&deep)).unwrap();
        fs::write(dir.path().join("ok.yaml"), "a: 1").unwrap();
        match read_tree(dir.path()) {
            Err(LoadError::TooDeep { path, limit }) => {
                assert_eq!(limit, MAX_DEPTH);
                assert_eq!(path, deep.to_str().unwrap());
            }
            other => panic!("expected TooDeep, got {other:?}"),
        }
        let at_bound: PathBuf = std::iter::repeat_n("d", MAX_DEPTH).collect();
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(&at_bound)).unwrap();
        fs::write(dir.path().join(&at_bound).join("x.yaml"), "a: 1").unwrap();
        assert_eq!(read_tree(dir.path()).unwrap().files.len(), 1);
    }

    #[test]
    fn under_joins_relative_segments() {
        assert_eq!(under(Path::new("/r"), "a/./b/"), Path::new("/r/a/b"));
        assert_eq!(under(Path::new("/r"), ""), Path::new("/r"));
    }
}
