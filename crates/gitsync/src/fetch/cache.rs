//! The cache directory of one source:
//!
//! ```text
//! <cache root>/.source-key   the key that names the source directories (0600, made once)
//! <cache root>/<kind>-<keyed hash of the SourceId>/
//!   lock          held (flock) while a fetch or checkout uses the directory
//!   repo.git/     bare repository; objects accumulate across fetches
//!   checkouts/    materialised trees, one directory per tree id (see `checkout`)
//! ```
//!
//! The bare repository records the URL it was filled from (`arbor.url`). When a source's URL
//! changes, the repository is recreated rather than mixing two repositories' objects.
//!
//! A directory is named by an HMAC-SHA256 of the source's identity under a random key kept in
//! the cache root, not by the identity itself: a tenant who knows another source's namespace
//! and name cannot compute where its cache is (issue #23: `file://…/gittrack_<ns>_<name>/repo.git`
//! read another tenant's repository). The key survives restarts, so caches are reused.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use git2::Repository;
use ring::hmac;
use ring::rand::{SecureRandom as _, SystemRandom};

use super::error::FetchErrorKind;
use super::source::SourceId;

/// The key file, under the cache root.
const KEY_FILE: &str = ".source-key";
const KEY_LEN: usize = 32;
/// Bytes of the HMAC kept in a directory name (128 bits: no collision, no guess).
const NAME_BYTES: usize = 16;

/// The key that names source directories.
#[derive(Clone, Debug)]
pub(crate) struct CacheKey(hmac::Key);

impl CacheKey {
    /// Reads the key under `root`, making one (from the system's random source) the first time.
    pub fn load_or_create(root: &Path) -> io::Result<CacheKey> {
        fs::create_dir_all(root)?;
        let path = root.join(KEY_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) if bytes.len() == KEY_LEN => bytes,
            Ok(_) => create_key(root, &path)?,
            Err(err) if err.kind() == io::ErrorKind::NotFound => create_key(root, &path)?,
            Err(err) => return Err(err),
        };
        Ok(CacheKey(hmac::Key::new(hmac::HMAC_SHA256, &bytes)))
    }

    /// The directory name of `id`: its kind, for people, and the keyed hash of its identity.
    pub fn directory_name(&self, id: &SourceId) -> String {
        let tag = hmac::sign(&self.0, id.canonical_name().as_bytes());
        let hash = hex(&tag.as_ref()[..NAME_BYTES]);
        format!("{}-{hash}", id.kind().directory_prefix())
    }
}

impl CacheKey {
    /// A keyed digest of a Secret's payload (`hmac-sha256:<hex>`): enough to notice that it
    /// changed, useless for guessing it (a plain hash of a short password is not). The input is
    /// prefixed so that no digest equals a directory name's hash.
    pub fn payload_digest(&self, payload: &[u8]) -> String {
        let mut context = hmac::Context::with_key(&self.0);
        context.update(b"arbor secret payload\0");
        context.update(payload);
        format!("hmac-sha256:{}", hex(context.sign().as_ref()))
    }
}

/// `bytes` in lower-case hexadecimal, as digests are written.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Writes a new random key (readable by the owner only) under a temporary name and renames it
/// into place, so a reader never sees half a key.
fn create_key(root: &Path, path: &Path) -> io::Result<Vec<u8>> {
    let mut key = vec![0_u8; KEY_LEN];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| io::Error::other("the system's random source failed"))?;
    let temp = root.join(format!("{KEY_FILE}.{}", std::process::id()));
    let mut file = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)?;
    file.write_all(&key)?;
    file.sync_all()?;
    fs::rename(&temp, path)?;
    Ok(key)
}

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
