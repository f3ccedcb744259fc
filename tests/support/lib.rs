//! Helpers shared by the end-to-end tests: locating the built binaries and fixture repositories.
//!
//! End-to-end tests run the real binaries as processes. Cargo only builds a package's own
//! binaries for its tests, so [`binary`] builds the one it needs with the same cargo, profile
//! and target directory that built the running test (`cargo build --workspace --bin <name>`, a
//! no-op when it is up to date) and returns its path next to the test executable's directory. Running cargo
//! from inside a test is safe because cargo releases the target directory once tests start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use anyhow::{Context, bail};

/// The root of the `arbor-e2e` package (`tests/`).
pub fn package_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/fixtures/<relative>`.
pub fn fixture(relative: &str) -> PathBuf {
    package_root().join("fixtures").join(relative)
}

/// The repository root (the workspace).
pub fn workspace_root() -> &'static Path {
    package_root()
        .parent()
        .expect("the e2e package lives one level below the workspace root")
}

/// Builds (if needed) and returns the path of `binary` from workspace package `package`.
pub fn binary(package: &str, binary: &str) -> anyhow::Result<PathBuf> {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = built.get(binary) {
        return Ok(path.clone());
    }
    let exe = std::env::current_exe().context("locating the test executable")?;
    // target/<profile>/deps/<test>: the profile directory holds the binaries.
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test executable is not in target/<profile>/deps")?;
    let target_dir = profile_dir
        .parent()
        .context("the profile directory has no parent")?;
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => bail!(
            "cannot tell the cargo profile from {}",
            profile_dir.display()
        ),
    };
    let output = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--profile",
            profile,
            // The workspace's feature set, as `cargo build --workspace --bins` (make test,
            // make e2e-cluster) builds it: `-p <package>` would resolve the package's own
            // features, rebuild the binary differently and leave the next workspace build
            // to rebuild it back.
            "--workspace",
            "--bin",
            binary,
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(workspace_root())
        .output()
        .with_context(|| format!("running cargo to build {binary}"))?;
    if !output.status.success() {
        bail!(
            "cargo build --workspace --bin {binary} (package {package}) failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let path = profile_dir.join(format!("{binary}{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        bail!(
            "{} is missing after cargo build --workspace --bin {binary} (package {package})",
            path.display()
        );
    }
    built.insert(binary.to_owned(), path.clone());
    Ok(path)
}

/// The result of one `arborctl` run.
#[derive(Debug)]
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Self {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Runs `arborctl` with `args`.
pub fn arborctl<I, S>(args: I) -> anyhow::Result<Run>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let path = binary("arborctl", "arborctl")?;
    let output = Command::new(&path)
        .args(args)
        // Whatever contexts this machine's user has (the demo writes one) stay out of the tests.
        .env("ARBORCONFIG", "/dev/null")
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    Ok(output.into())
}

/// The extra `arborctl vet` arguments of a fixture repository: the words of its `vet-args`
/// file, such as `--layout flat --sub-path apps`, or none.
pub fn fixture_args(repo: &Path) -> anyhow::Result<Vec<String>> {
    let file = repo.join("vet-args");
    if !file.exists() {
        return Ok(Vec::new());
    }
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    Ok(text.split_whitespace().map(str::to_owned).collect())
}

/// The value following `flag` in `args`.
pub fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|arg| arg == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// Every file under `root`, as relative path → contents.
pub fn read_files(root: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    collect(root, root, &mut files)?;
    Ok(files)
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, files)?;
        } else {
            let relative = path
                .strip_prefix(root)?
                .to_string_lossy()
                .replace('\\', "/");
            let contents = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            files.insert(relative, contents);
        }
    }
    Ok(())
}

pub mod rbac_env;
pub mod shards;
pub mod source;
pub mod system;
pub mod webhook_env;

/// The one bounded poll of the workspace ([`arbor_testkit::eventually`]) with the harness's
/// error type fixed, so that a test's check can use `?` on the harness's calls and answer
/// `Ok(..)` without naming the type.
pub async fn eventually<T, F, Fut>(
    what: &str,
    patience: impl Into<arbor_testkit::Patience>,
    check: F,
) -> Result<T, arbor_testkit::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, arbor_testkit::Error>>,
{
    arbor_testkit::eventually(what, patience, check).await
}
