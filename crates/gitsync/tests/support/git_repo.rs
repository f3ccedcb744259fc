//! Git repositories built with the `git` command line in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A non-bare repository on branch `main`, which every server in the support code can serve.
pub struct GitRepo {
    _dir: TempDir,
    root: PathBuf,
    path: PathBuf,
}

impl GitRepo {
    /// A repository named `name` whose first commit holds `deploy/app.yaml`.
    pub fn new(name: &str) -> GitRepo {
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path().to_owned();
        let path = root.join(name);
        std::fs::create_dir(&path).expect("repository directory");
        let repo = GitRepo {
            _dir: dir,
            root,
            path,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.commit(
            "deploy/app.yaml",
            "kind: ConfigMap\nmetadata:\n  name: v1\n",
            "First commit",
        );
        repo
    }

    /// The directory holding the repository (a server's project root).
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The repository's directory name (its path below the project root).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    pub fn file_url(&self) -> String {
        format!("file://{}", self.path.display())
    }

    /// Writes `file` and commits it; returns the new commit id.
    pub fn commit(&self, file: &str, content: &str, message: &str) -> String {
        let target = self.path.join(file);
        std::fs::create_dir_all(target.parent().unwrap()).expect("parent directory");
        std::fs::write(&target, content).expect("file written");
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.head()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    pub fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(&self.path)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Arbor Test")
            .env("GIT_AUTHOR_EMAIL", "test@arbor.invalid")
            .env("GIT_COMMITTER_NAME", "Arbor Test")
            .env("GIT_COMMITTER_EMAIL", "test@arbor.invalid")
            .output()
            .expect("git runs");
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}
