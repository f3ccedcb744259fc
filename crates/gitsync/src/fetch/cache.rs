//! The cache directory of one source:
//!
//! ```text
//! <cache root>/<SourceId::directory_name>/
//!   lock          held (flock) while a fetch or checkout uses the directory
//!   repo.git/     bare repository; objects accumulate across fetches
//!   checkouts/    materialised trees, one directory per tree id (see `checkout`)
//! ```
//!
//! The bare repository records the URL it was filled from (`arbor.url`). When a source's URL
//! changes, the repository is recreated rather than mixing two repositories' objects.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use git2::Repository;

use super::error::FetchErrorKind;

const URL_CONFIG_KEY: &str = "arbor.url";
/// The ref that points at the last fetched commit.
pub(crate) const FETCHED_REF: &str = "refs/arbor/fetched";

/// Not `Debug`: `git2::Repository` is not.
pub(crate) struct SourceCache {
    pub dir: PathBuf,
    pub repo: Repository,
    /// Holds the directory's lock until dropped.
    _lock: File,
}

impl SourceCache {
    /// Opens (creating as needed) the cache in `dir` for a repository fetched from `url`.
    pub fn open_for_fetch(dir: &Path, url: &str) -> Result<SourceCache, FetchErrorKind> {
        let lock = lock_dir(dir)?;
        let repo_dir = dir.join("repo.git");
        let repo = match Repository::open_bare(&repo_dir) {
            Ok(repo) if recorded_url(&repo).as_deref() == Some(url) => repo,
            Ok(repo) => {
                drop(repo);
                fs::remove_dir_all(&repo_dir).map_err(|err| cache_error(&repo_dir, &err))?;
                init(&repo_dir, url)?
            }
            Err(_) => {
                if repo_dir.exists() {
                    // Not a usable repository (an interrupted first fetch): start again.
                    fs::remove_dir_all(&repo_dir).map_err(|err| cache_error(&repo_dir, &err))?;
                }
                init(&repo_dir, url)?
            }
        };
        Ok(SourceCache {
            dir: dir.to_owned(),
            repo,
            _lock: lock,
        })
    }

    /// Opens an existing cache for reading, or `None` when nothing was ever fetched into it.
    pub fn open_existing(dir: &Path) -> Result<Option<SourceCache>, FetchErrorKind> {
        let repo_dir = dir.join("repo.git");
        if !repo_dir.exists() {
            return Ok(None);
        }
        let lock = lock_dir(dir)?;
        let repo = Repository::open_bare(&repo_dir).map_err(|err| FetchErrorKind::Cache {
            path: repo_dir.clone(),
            detail: err.message().to_owned(),
        })?;
        Ok(Some(SourceCache {
            dir: dir.to_owned(),
            repo,
            _lock: lock,
        }))
    }

    pub fn checkouts_dir(&self) -> PathBuf {
        self.dir.join("checkouts")
    }
}

fn lock_dir(dir: &Path) -> Result<File, FetchErrorKind> {
    fs::create_dir_all(dir).map_err(|err| cache_error(dir, &err))?;
    let lock_path = dir.join("lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|err| cache_error(&lock_path, &err))?;
    lock.lock().map_err(|err| cache_error(&lock_path, &err))?;
    Ok(lock)
}

fn init(repo_dir: &Path, url: &str) -> Result<Repository, FetchErrorKind> {
    let git_error = |err: git2::Error| FetchErrorKind::Cache {
        path: repo_dir.to_owned(),
        detail: err.message().to_owned(),
    };
    let repo = Repository::init_bare(repo_dir).map_err(git_error)?;
    repo.config()
        .and_then(|mut config| config.set_str(URL_CONFIG_KEY, url))
        .map_err(git_error)?;
    Ok(repo)
}

fn recorded_url(repo: &Repository) -> Option<String> {
    repo.config()
        .ok()?
        .snapshot()
        .ok()?
        .get_string(URL_CONFIG_KEY)
        .ok()
}

pub(crate) fn cache_error(path: &Path, err: &std::io::Error) -> FetchErrorKind {
    FetchErrorKind::Cache {
        path: path.to_owned(),
        detail: err.to_string(),
    }
}
