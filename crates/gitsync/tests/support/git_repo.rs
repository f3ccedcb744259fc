//! Git repositories in a temporary directory, built with arbor-testkit's [`arbor_testkit::GitRepo`];
//! failures panic, as a test wants.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// A non-bare repository on branch `main`, which every server in the support code can serve.
pub struct GitRepo {
    _dir: TempDir,
    root: PathBuf,
    repo: arbor_testkit::GitRepo,
}

impl GitRepo {
    /// A repository named `name` whose first commit holds `deploy/app.yaml`.
    pub fn new(name: &str) -> GitRepo {
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path().to_owned();
        let repo = arbor_testkit::GitRepo::init(root.join(name)).expect("git init");
        let repo = GitRepo {
            _dir: dir,
            root,
            repo,
        };
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
        self.repo.path()
    }

    /// The repository's directory name (its path below the project root).
    pub fn name(&self) -> String {
        self.repo.name()
    }

    pub fn file_url(&self) -> String {
        self.repo.file_url()
    }

    /// Writes `file` and commits it; returns the new commit id.
    pub fn commit(&self, file: &str, content: &str, message: &str) -> String {
        self.repo
            .commit_file(file, content, message)
            .unwrap_or_else(|err| panic!("{err}"))
    }

    pub fn head(&self) -> String {
        self.repo.head().unwrap_or_else(|err| panic!("{err}"))
    }

    pub fn git(&self, args: &[&str]) -> String {
        self.repo.git(args).unwrap_or_else(|err| panic!("{err}"))
    }
}
