//! The declared state of a source: what a valid tree asks the cluster to hold.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::input::Location;
use super::synced::DeclaredKind;
use crate::object::{GroupKind, ObjectKey};

/// How a source tree is organised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Layout {
    /// Faros: every YAML or JSON object in the tree, each declared as written. The default, as
    /// for a GitTrack that names no layout.
    #[default]
    Flat,
    /// Nomos: `system/`, `cluster/` and `namespaces/` with abstract namespaces and inheritance.
    Hierarchical,
}

impl std::str::FromStr for Layout {
    type Err = String;

    /// `flat` or `hierarchical`, in any letter case (GitTrack writes `Flat` / `Hierarchical`).
    fn from_str(layout: &str) -> Result<Self, String> {
        match layout.to_ascii_lowercase().as_str() {
            "flat" => Ok(Self::Flat),
            "hierarchical" => Ok(Self::Hierarchical),
            _ => Err(format!(
                "layout must be Flat or Hierarchical, not {layout:?}"
            )),
        }
    }
}

/// One object the source declares, exactly as it would be applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredObject {
    /// The object to apply. In a hierarchical repo its `metadata.namespace` is the namespace it
    /// lands in and the namespace-selector annotation has been removed.
    pub object: Value,
    /// The file and document it was declared in.
    pub source: Location,
    /// For an object inherited from an abstract namespace, that namespace's directory (such as
    /// `namespaces/online/shipping-app-backend`).
    pub inherited_from: Option<String>,
}

impl DeclaredObject {
    /// An object declared exactly as its file writes it.
    pub(crate) fn as_written(object: &Value, source: &Location) -> Self {
        Self {
            object: object.clone(),
            source: source.clone(),
            inherited_from: None,
        }
    }
}

/// Everything a valid source declares. It only exists for a tree without errors, so a
/// controller that fails to parse a new commit keeps the previous `DeclaredState`.
///
/// Its objects are [`DeclaredObject`]s as parsed. A controller that keeps a state for long may
/// hold each object in a form of its own (`O`): the keys, kinds and namespaces, which every
/// decision about what is declared reads, stay as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredState<O = DeclaredObject> {
    pub layout: Layout,
    /// Every object, keyed by group, kind, namespace (none when cluster-scoped) and name.
    pub objects: BTreeMap<ObjectKey, O>,
    /// The declared (Synced) kinds. In a flat repo, every kind that occurs; in a hierarchical
    /// repo, the kinds of its Syncs plus `Namespace`, which the layout itself declares.
    pub kinds: BTreeMap<GroupKind, DeclaredKind>,
    /// The declared namespaces: namespace directories in a hierarchical repo, Namespace
    /// objects in a flat one.
    pub namespaces: BTreeSet<String>,
}

impl<O> Default for DeclaredState<O> {
    fn default() -> Self {
        Self {
            layout: Layout::default(),
            objects: BTreeMap::new(),
            kinds: BTreeMap::new(),
            namespaces: BTreeSet::new(),
        }
    }
}

impl DeclaredState {
    /// The same state with each object as `hold` makes it, one object at a time (each parsed
    /// object is dropped once `hold` has taken it, so the two forms of the whole state never
    /// live side by side).
    pub fn hold_with<O>(self, mut hold: impl FnMut(DeclaredObject) -> O) -> DeclaredState<O> {
        DeclaredState {
            layout: self.layout,
            objects: self
                .objects
                .into_iter()
                .map(|(key, declared)| (key, hold(declared)))
                .collect(),
            kinds: self.kinds,
            namespaces: self.namespaces,
        }
    }
}

impl<O> DeclaredState<O> {
    /// The objects that land in `namespace`.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a O)> + 'a {
        self.objects
            .iter()
            .filter(move |(key, _)| key.namespace.as_deref() == Some(namespace))
    }

    /// The objects without a namespace: cluster-scoped objects and, in a flat repo, namespaced
    /// objects that leave their namespace to the source (a GitTrack's own namespace).
    pub fn without_namespace(&self) -> impl Iterator<Item = (&ObjectKey, &O)> {
        self.objects
            .iter()
            .filter(|(key, _)| key.namespace.is_none())
    }

    /// Whether the source declares the kind (seeds/000 "Sync Declared").
    pub fn declares_kind(&self, group_kind: &GroupKind) -> bool {
        self.kinds.contains_key(group_kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_reads_gittrack_and_cli_spellings() {
        assert_eq!("Flat".parse(), Ok(Layout::Flat));
        assert_eq!("hierarchical".parse(), Ok(Layout::Hierarchical));
        assert!("nested".parse::<Layout>().is_err());
        assert_eq!(Layout::default(), Layout::Flat);
    }
}
