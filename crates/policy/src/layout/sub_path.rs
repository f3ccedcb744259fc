//! The lexical rule for a source's `subPath`: relative to the repository root and never above
//! it. The API checks it at admission and arbor-source again on each checkout (which also
//! follows symbolic links, a question only the checkout can answer).

/// Why a `subPath` is refused before it is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubPathProblem {
    /// It starts with `/`.
    Absolute,
    /// One of its segments is `..`.
    LeavesRepository,
}

/// `Ok` when `sub_path` names a place inside the repository as written.
pub fn check(sub_path: &str) -> Result<(), SubPathProblem> {
    if sub_path.starts_with('/') {
        return Err(SubPathProblem::Absolute);
    }
    if sub_path.split('/').any(|segment| segment == "..") {
        return Err(SubPathProblem::LeavesRepository);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_paths_stay_relative_and_inside_the_repository() {
        let cases = [
            ("apps", Ok(())),
            ("apps/prod", Ok(())),
            ("apps/..prod", Ok(())),
            ("./apps", Ok(())),
            ("/apps", Err(SubPathProblem::Absolute)),
            ("/", Err(SubPathProblem::Absolute)),
            ("..", Err(SubPathProblem::LeavesRepository)),
            ("apps/../..", Err(SubPathProblem::LeavesRepository)),
            ("apps/..", Err(SubPathProblem::LeavesRepository)),
        ];
        for (sub_path, expected) in cases {
            assert_eq!(check(sub_path), expected, "{sub_path}");
        }
    }
}
