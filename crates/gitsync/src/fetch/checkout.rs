//! Materialising the tree of a fetched commit on disk, for the parser to read.
//!
//! The tree at `subPath` is written to `checkouts/<tree id>/`: a directory is named by the
//! content it holds, so it is never rewritten, a commit that leaves `subPath` unchanged reuses
//! it, and two subPaths can never collide. It is written under a temporary name and renamed
//! into place, so a reader never sees half a tree. Only the most recently used few directories
//! are kept; a path returned by a checkout stays valid until that many further distinct trees
//! have been checked out for the same source.
//!
//! Symbolic links and submodules are not materialised: a link could point outside the checkout
//! (at the controller's own credentials, say) and the parser must never follow it. They are
//! skipped with a warning.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use git2::{ObjectType, Oid, Repository, Tree};

use super::error::CheckoutErrorKind;
use arbor_source::files::MAX_DEPTH;

const TEMP_PREFIX: &str = ".tmp-";
const EXECUTABLE_MODE: i32 = 0o100755;
const SYMLINK_MODE: i32 = 0o120000;

/// Writes the tree of `commit` at `sub_path` under `checkouts_dir` and returns its directory.
pub(crate) fn checkout_tree(
    repo: &Repository,
    checkouts_dir: &Path,
    commit: &str,
    sub_path: &str,
    keep: usize,
) -> Result<PathBuf, CheckoutErrorKind> {
    let git = |err: git2::Error| CheckoutErrorKind::Git {
        detail: err.message().to_owned(),
    };
    let oid = Oid::from_str(commit).map_err(|_| CheckoutErrorKind::NotFetched)?;
    let commit = repo
        .find_commit(oid)
        .map_err(|_| CheckoutErrorKind::NotFetched)?;
    let root = commit.tree().map_err(git)?;
    let tree = subtree(repo, &root, sub_path)?;

    let target = checkouts_dir.join(tree.id().to_string());
    if target.is_dir() {
        mark_used(&target)?;
    } else {
        fs::create_dir_all(checkouts_dir).map_err(|err| io_error(checkouts_dir, err))?;
        let temp = checkouts_dir.join(unique_temp_name(tree.id()));
        let written = fs::create_dir(&temp)
            .map_err(|err| io_error(&temp, err))
            .and_then(|()| write_tree(repo, &tree, &temp))
            .and_then(|()| fs::rename(&temp, &target).map_err(|err| io_error(&target, err)));
        if let Err(err) = written {
            let _ = fs::remove_dir_all(&temp);
            return Err(err);
        }
    }
    prune(checkouts_dir, &target, keep)?;
    Ok(target)
}

/// The tree at `sub_path` (`""`, `"."` or `"/"` for the root).
fn subtree<'r>(
    repo: &'r Repository,
    root: &Tree<'r>,
    sub_path: &str,
) -> Result<Tree<'r>, CheckoutErrorKind> {
    let mut components = Vec::new();
    for component in sub_path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                return Err(CheckoutErrorKind::UnsafePath {
                    path: sub_path.to_owned(),
                });
            }
            other => components.push(other),
        }
    }
    if components.is_empty() {
        return Ok(root.clone());
    }
    let relative = components.join("/");
    let entry =
        root.get_path(Path::new(&relative))
            .map_err(|_| CheckoutErrorKind::SubPathNotFound {
                sub_path: sub_path.to_owned(),
            })?;
    if entry.kind() != Some(ObjectType::Tree) {
        return Err(CheckoutErrorKind::SubPathNotADirectory {
            sub_path: sub_path.to_owned(),
        });
    }
    repo.find_tree(entry.id())
        .map_err(|err| CheckoutErrorKind::Git {
            detail: err.message().to_owned(),
        })
}

/// Writes `tree` into `dir` (which exists). Subtrees go on an explicit stack instead of the
/// call stack, so a hostile repository nesting directories thousands deep cannot overflow the
/// thread; a subtree deeper than [`MAX_DEPTH`] fails the checkout, naming its path.
fn write_tree(repo: &Repository, tree: &Tree<'_>, dir: &Path) -> Result<(), CheckoutErrorKind> {
    let mut pending = vec![(tree.id(), dir.to_path_buf(), String::new())];
    while let Some((id, dir, relative)) = pending.pop() {
        let depth = if relative.is_empty() {
            0
        } else {
            relative.matches('/').count() + 1
        };
        let tree = repo.find_tree(id).map_err(|err| CheckoutErrorKind::Git {
            detail: format!("{}: {}", dir.display(), err.message()),
        })?;
        for entry in tree.iter() {
            let name = entry.name_bytes();
            if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
                return Err(CheckoutErrorKind::UnsafePath {
                    path: format!("{}/{}", dir.display(), String::from_utf8_lossy(name)),
                });
            }
            let path = dir.join(OsStr::from_bytes(name));
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let name = String::from_utf8_lossy(name);
                    let child = if relative.is_empty() {
                        name.into_owned()
                    } else {
                        format!("{relative}/{name}")
                    };
                    if depth + 1 > MAX_DEPTH {
                        return Err(CheckoutErrorKind::TooDeep {
                            path: child,
                            limit: MAX_DEPTH,
                        });
                    }
                    fs::create_dir(&path).map_err(|err| io_error(&path, err))?;
                    pending.push((entry.id(), path, child));
                }
                Some(ObjectType::Blob) if entry.filemode() == SYMLINK_MODE => {
                    tracing::warn!(path = %path.display(), "not materialising a symbolic link");
                }
                Some(ObjectType::Blob) => {
                    let blob =
                        repo.find_blob(entry.id())
                            .map_err(|err| CheckoutErrorKind::Git {
                                detail: format!("{}: {}", path.display(), err.message()),
                            })?;
                    fs::write(&path, blob.content()).map_err(|err| io_error(&path, err))?;
                    if entry.filemode() == EXECUTABLE_MODE {
                        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                            .map_err(|err| io_error(&path, err))?;
                    }
                }
                _ => {
                    tracing::warn!(path = %path.display(), "not materialising a submodule");
                }
            }
        }
    }
    Ok(())
}

fn unique_temp_name(tree: Oid) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{TEMP_PREFIX}{tree}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Records that `dir` was just used, so pruning keeps it.
fn mark_used(dir: &Path) -> Result<(), CheckoutErrorKind> {
    File::open(dir)
        .and_then(|handle| handle.set_modified(SystemTime::now()))
        .map_err(|err| io_error(dir, err))
}

/// Removes leftover temporary directories and all but the `keep` most recently used
/// checkouts; `current` is always kept.
fn prune(checkouts_dir: &Path, current: &Path, keep: usize) -> Result<(), CheckoutErrorKind> {
    let mut checkouts = Vec::new();
    let entries = fs::read_dir(checkouts_dir).map_err(|err| io_error(checkouts_dir, err))?;
    for entry in entries {
        let entry = entry.map_err(|err| io_error(checkouts_dir, err))?;
        let path = entry.path();
        if entry
            .file_name()
            .as_bytes()
            .starts_with(TEMP_PREFIX.as_bytes())
        {
            // The directory lock is held, so no temporary directory is in use.
            fs::remove_dir_all(&path).map_err(|err| io_error(&path, err))?;
            continue;
        }
        if path == current {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .map_err(|err| io_error(&path, err))?;
        checkouts.push((modified, path));
    }
    checkouts.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, stale) in checkouts.into_iter().skip(keep.saturating_sub(1)) {
        fs::remove_dir_all(&stale).map_err(|err| io_error(&stale, err))?;
    }
    Ok(())
}

fn io_error(path: &Path, source: std::io::Error) -> CheckoutErrorKind {
    CheckoutErrorKind::Io {
        path: path.to_owned(),
        source,
    }
}
