//! The workspace's binaries, found next to the running executable.
//!
//! Test executables live in `target/<profile>/deps/` and `arborctl` in `target/<profile>/`;
//! either way the other binaries of the same build are in `target/<profile>/`, so the demo and
//! the tests start exactly the binaries that were built with them, never one from the `PATH`.

use std::path::{Path, PathBuf};

use crate::Error;

/// `target/<profile>/` of the running executable.
pub fn target_dir() -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().map_err(Error::io("locating the running executable"))?;
    let dir = exe.parent().map(Path::to_owned).unwrap_or_default();
    Ok(if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent().map(Path::to_owned).unwrap_or(dir)
    } else {
        dir
    })
}

/// The path of the workspace binary `name`, which must have been built.
pub fn workspace_binary(name: &str) -> Result<PathBuf, Error> {
    binary_in(&target_dir()?, name)
}

/// The path of `name` in `dir`, which must exist.
pub fn binary_in(dir: &Path, name: &str) -> Result<PathBuf, Error> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinary {
            binary: name.to_owned(),
            dir: dir.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_executables_find_the_profile_directory() {
        let dir = target_dir().unwrap();
        assert!(dir.join("deps").is_dir(), "{}", dir.display());
    }

    #[test]
    fn a_missing_binary_names_itself_and_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let error = binary_in(dir.path(), "arbor-nothing").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("arbor-nothing"), "{message}");
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );
    }
}
