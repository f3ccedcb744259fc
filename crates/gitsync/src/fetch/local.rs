//! `file://` repositories: refused unless the instance allows them, and never inside the
//! controller's own cache, whatever path, symbolic link, `.git` file or alternates lead there.
//!
//! A `file://` URL reads the controller's file system with the controller's permissions, so
//! in a cluster it is a way for a tenant to read what gitsync can read: other sources' caches
//! above all. It exists for tests and demos (`--allow-file-repositories`); even then a source
//! cannot fetch from the cache root, where the other sources' repositories are.

use std::ffi::OsStr;
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::error::FetchErrorKind;

/// Checks the path of a `file://` URL against the instance's policy.
pub(crate) fn check(path: &str, allowed: bool, cache_root: &Path) -> Result<(), FetchErrorKind> {
    if !allowed {
        return Err(FetchErrorKind::InvalidSource {
            detail: "file:// repositories are refused: they read the controller's own file \
                     system; use an https or ssh URL (an instance started with \
                     --allow-file-repositories, for tests and demos, accepts them)"
                .to_owned(),
        });
    }
    let root = resolve(cache_root);
    let inside = |candidate: &Path| resolve(candidate).starts_with(&root);
    let refused = || FetchErrorKind::InvalidSource {
        detail: format!(
            "{path} lies inside the controller's cache directory; a source never reads another \
             source's cache"
        ),
    };
    let path = Path::new(path);
    if inside(path) {
        return Err(refused());
    }
    // libgit2 follows a `.git` file (`gitdir: …`), `commondir` and `objects/info/alternates`:
    // each could lead back into the cache from a path outside it.
    let flags = git2::RepositoryOpenFlags::NO_SEARCH;
    if let Ok(repo) = git2::Repository::open_ext(path, flags, std::iter::empty::<&OsStr>()) {
        let objects = repo.commondir().join("objects");
        let alternates = fs::read_to_string(objects.join("info/alternates")).unwrap_or_default();
        let mut reached = vec![repo.path().to_path_buf(), repo.commondir().to_path_buf()];
        reached.extend(
            alternates
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .map(|line| objects.join(line)),
        );
        if reached.iter().any(|path| inside(path)) {
            return Err(refused());
        }
    }
    Ok(())
}

/// The canonical form of `path`, or, where it does not exist, its absolute form with `.` and
/// `..` resolved lexically.
fn resolve(path: &Path) -> PathBuf {
    if let Ok(canonical) = fs::canonicalize(path) {
        return canonical;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut resolved = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir => {}
            other => resolved.push(other),
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_unless_allowed() {
        let cache = tempfile::tempdir().unwrap();
        let error = check("/srv/repo", false, cache.path()).unwrap_err();
        assert!(error.to_string().contains("--allow-file-repositories"));
        assert!(check("/srv/repo", true, cache.path()).is_ok());
    }

    #[test]
    fn the_cache_is_refused_by_any_path() {
        let cache = tempfile::tempdir().unwrap();
        let inner = cache.path().join("gittrack-0123/repo.git");
        git2::Repository::init_bare(&inner).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let link = outside.path().join("link");
        std::os::unix::fs::symlink(&inner, &link).unwrap();
        let dotted = format!(
            "{}/../{}/gittrack-0123/./repo.git",
            cache.path().display(),
            cache.path().file_name().unwrap().to_str().unwrap()
        );
        for path in [inner.to_str().unwrap(), link.to_str().unwrap(), &dotted] {
            let error = check(path, true, cache.path()).unwrap_err();
            assert!(
                error.to_string().contains("cache directory"),
                "{path}: {error}"
            );
        }
        // A work tree whose `.git` file points into the cache.
        let gitfile = outside.path().join("worktree");
        fs::create_dir(&gitfile).unwrap();
        fs::write(
            gitfile.join(".git"),
            format!("gitdir: {}\n", inner.display()),
        )
        .unwrap();
        assert!(check(gitfile.to_str().unwrap(), true, cache.path()).is_err());
        // A repository borrowing the cache's objects.
        let borrower = outside.path().join("borrower.git");
        git2::Repository::init_bare(&borrower).unwrap();
        fs::write(
            borrower.join("objects/info/alternates"),
            format!("{}\n", inner.join("objects").display()),
        )
        .unwrap();
        assert!(check(borrower.to_str().unwrap(), true, cache.path()).is_err());
    }
}
