//! The directory tree under `namespaces/`.

use std::collections::BTreeMap;

use crate::layout::input::Identified;

/// The root of the namespace tree; itself always an abstract namespace.
pub(crate) const NAMESPACES: &str = "namespaces";

/// One directory under (or at) `namespaces/`.
#[derive(Debug)]
pub(crate) struct Directory<'o, 'a> {
    /// Such as `namespaces/online/shipping-app-backend`.
    pub path: String,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// The objects of the files directly in this directory.
    pub objects: Vec<&'o Identified<'a>>,
}

impl Directory<'_, '_> {
    /// The last path segment: the namespace name of a namespace directory.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }
}

/// The directories, parents before children.
#[derive(Debug)]
pub(crate) struct Tree<'o, 'a> {
    pub dirs: Vec<Directory<'o, 'a>>,
}

impl<'o, 'a> Tree<'o, 'a> {
    /// Builds the tree from the paths of every file under `namespaces/` (so that directories
    /// holding only empty files still count) and the objects those files declare.
    pub fn build<'p>(
        file_paths: impl IntoIterator<Item = &'p str>,
        objects: &[&'o Identified<'a>],
    ) -> Self {
        let mut tree = Self { dirs: Vec::new() };
        let mut index = BTreeMap::new();
        tree.directory(NAMESPACES, &mut index);
        for path in file_paths {
            if let Some((dir, _)) = path.rsplit_once('/') {
                tree.directory(dir, &mut index);
            }
        }
        for object in objects {
            let dir = tree.directory(object.location.directory(), &mut index);
            tree.dirs[dir].objects.push(object);
        }
        tree
    }

    fn directory(&mut self, path: &str, index: &mut BTreeMap<String, usize>) -> usize {
        if let Some(&existing) = index.get(path) {
            return existing;
        }
        let parent = match path.rsplit_once('/') {
            Some((parent, _)) if path != NAMESPACES => Some(self.directory(parent, index)),
            _ => None,
        };
        let id = self.dirs.len();
        self.dirs.push(Directory {
            path: path.to_owned(),
            parent,
            children: Vec::new(),
            objects: Vec::new(),
        });
        if let Some(parent) = parent {
            self.dirs[parent].children.push(id);
        }
        index.insert(path.to_owned(), id);
        id
    }

    /// The directory and its ancestors, from the root down to it.
    pub fn lineage(&self, dir: usize) -> Vec<usize> {
        let mut chain: Vec<usize> =
            std::iter::successors(Some(dir), |&d| self.dirs[d].parent).collect();
        chain.reverse();
        chain
    }

    /// Whether the directory or any directory below it satisfies `holds`.
    pub fn any_below(&self, dir: usize, holds: &impl Fn(usize) -> bool) -> bool {
        holds(dir)
            || self.dirs[dir]
                .children
                .iter()
                .any(|&child| self.any_below(child, holds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_holds_every_ancestor_directory_parents_first() {
        let tree = Tree::build(["namespaces/a/b/c/x.yaml", "namespaces/a/y.yaml"], &[]);
        let paths: Vec<_> = tree.dirs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "namespaces",
                "namespaces/a",
                "namespaces/a/b",
                "namespaces/a/b/c"
            ]
        );
        let lineage: Vec<_> = tree
            .lineage(3)
            .iter()
            .map(|&d| tree.dirs[d].name())
            .collect();
        assert_eq!(lineage, ["namespaces", "a", "b", "c"]);
        assert!(tree.any_below(1, &|d| tree.dirs[d].name() == "c"));
        assert!(!tree.any_below(3, &|d| tree.dirs[d].name() == "b"));
    }
}
