//! Git repositories built with the `git` command line: a directory becomes a repository on
//! branch `main` with a commit; files are written, removed and committed; a bare copy can be
//! published for a server.
//!
//! `git` runs with no system or global configuration and a fixed identity, so the result does
//! not depend on the machine's settings.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The branch every repository built here starts on.
pub const BRANCH: &str = "main";

/// A repository with a work tree.
#[derive(Debug, Clone)]
pub struct GitRepo {
    path: PathBuf,
}

impl GitRepo {
    /// Makes `path` (created when absent) a repository on [`BRANCH`], without commits.
    pub fn init(path: impl Into<PathBuf>) -> Result<GitRepo, Error> {
        let path = path.into();
        std::fs::create_dir_all(&path).map_err(Error::io(format!(
            "creating the repository {}",
            path.display()
        )))?;
        let repo = GitRepo { path };
        repo.git(&["init", "-q", "-b", BRANCH])?;
        Ok(repo)
    }

    /// Opens an existing repository (no check beyond what the next `git` call does).
    pub fn open(path: impl Into<PathBuf>) -> GitRepo {
        GitRepo { path: path.into() }
    }

    /// Copies the files of `source` into a new repository at `path` and commits them.
    pub fn from_dir(
        source: &Path,
        path: impl Into<PathBuf>,
        message: &str,
    ) -> Result<GitRepo, Error> {
        let repo = GitRepo::init(path)?;
        copy_tree(source, &repo.path)?;
        repo.commit_all(message)?;
        Ok(repo)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory name of the repository (its path below a server's project root).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub fn file_url(&self) -> String {
        format!("file://{}", self.path.display())
    }

    /// Writes `file` (a path inside the work tree), creating its directories.
    pub fn write(&self, file: &str, content: &str) -> Result<(), Error> {
        let target = self.path.join(file);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)
                .map_err(Error::io(format!("creating {}", dir.display())))?;
        }
        std::fs::write(&target, content).map_err(Error::io(format!("writing {}", target.display())))
    }

    /// Removes `file` from the work tree.
    pub fn remove(&self, file: &str) -> Result<(), Error> {
        let target = self.path.join(file);
        std::fs::remove_file(&target).map_err(Error::io(format!("removing {}", target.display())))
    }

    /// Commits everything in the work tree; returns the new commit id.
    pub fn commit_all(&self, message: &str) -> Result<String, Error> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "--allow-empty", "-m", message])?;
        self.head()
    }

    /// Writes `file` and commits it; returns the new commit id.
    pub fn commit_file(&self, file: &str, content: &str, message: &str) -> Result<String, Error> {
        self.write(file, content)?;
        self.commit_all(message)
    }

    /// The commit id of `HEAD`.
    pub fn head(&self) -> Result<String, Error> {
        self.git(&["rev-parse", "HEAD"])
    }

    /// A bare clone at `path` (`<name>.git` by convention), the form servers hold.
    pub fn bare_copy(&self, path: &Path) -> Result<PathBuf, Error> {
        let source = self.path.display().to_string();
        let target = path.display().to_string();
        run_git(&self.path, &["clone", "-q", "--bare", &source, &target])?;
        Ok(path.to_owned())
    }

    /// Pushes [`BRANCH`] to the bare repository at `bare`.
    pub fn push_to(&self, bare: &Path) -> Result<(), Error> {
        let target = bare.display().to_string();
        self.git(&["push", "-q", "--force", &target, BRANCH])
            .map(drop)
    }

    /// Runs `git args` in the work tree; returns its trimmed standard output.
    pub fn git(&self, args: &[&str]) -> Result<String, Error> {
        run_git(&self.path, args)
    }
}

fn run_git(dir: &Path, args: &[&str]) -> Result<String, Error> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        // Never ask for a password on the terminal: a refused fetch is an error.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Arbor")
        .env("GIT_AUTHOR_EMAIL", "arbor@arbor.invalid")
        .env("GIT_COMMITTER_NAME", "Arbor")
        .env("GIT_COMMITTER_EMAIL", "arbor@arbor.invalid")
        .output()
        .map_err(Error::io(format!(
            "running git in {} (is git installed?)",
            dir.display()
        )))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(Error::Git {
            dir: dir.to_owned(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// Copies the regular files and directories below `from` into `to`.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    let entries =
        std::fs::read_dir(from).map_err(Error::io(format!("reading {}", from.display())))?;
    for entry in entries {
        let entry = entry.map_err(Error::io(format!("reading {}", from.display())))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        if source.is_dir() {
            std::fs::create_dir_all(&target)
                .map_err(Error::io(format!("creating {}", target.display())))?;
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target)
                .map_err(Error::io(format!("copying {}", source.display())))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_becomes_a_repository_and_its_bare_copy_follows_pushes() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        std::fs::create_dir_all(source.join("cluster")).unwrap();
        std::fs::write(source.join("cluster/role.yaml"), "kind: ClusterRole\n").unwrap();

        let repo = GitRepo::from_dir(&source, dir.path().join("work/app"), "Import").unwrap();
        assert_eq!(repo.name(), "app");
        assert_eq!(repo.git(&["ls-files"]).unwrap(), "cluster/role.yaml");

        let bare = repo.bare_copy(&dir.path().join("served/app.git")).unwrap();
        let second = repo
            .commit_file("cluster/other.yaml", "kind: X\n", "Second")
            .unwrap();
        repo.remove("cluster/role.yaml").unwrap();
        let third = repo.commit_all("Remove the role").unwrap();
        assert_ne!(second, third);
        repo.push_to(&bare).unwrap();
        let served = GitRepo::open(&bare);
        assert_eq!(served.git(&["rev-parse", BRANCH]).unwrap(), third);
        assert_eq!(
            served
                .git(&["ls-tree", "-r", "--name-only", BRANCH])
                .unwrap(),
            "cluster/other.yaml"
        );
    }

    #[test]
    fn a_failing_git_command_names_its_arguments_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let repo = GitRepo::init(dir.path().join("empty")).unwrap();
        let error = repo.head().unwrap_err().to_string();
        assert!(error.contains("rev-parse HEAD"), "{error}");
        assert!(error.contains("empty"), "{error}");
    }
}
