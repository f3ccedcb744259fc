//! The hierarchical layout (Nomos): `system/`, `cluster/` and `namespaces/`.
//!
//! - `system/` holds the repository's configuration: Repo and Sync objects. Only kinds that a
//!   Sync declares may appear anywhere else (Namespace excepted: directories declare those).
//! - `cluster/` holds cluster-scoped objects, including CustomResourceDefinitions, which also
//!   tell the layout the scope of their kinds.
//! - `namespaces/` is a tree. A directory holding a Namespace object (named like the directory)
//!   is a *namespace* and has no subdirectories. Any other directory, `namespaces/` itself
//!   included, is an *abstract namespace*: its objects are inherited by every namespace below
//!   it, per their kind's [`HierarchyMode`](super::HierarchyMode), and it must have at least one
//!   namespace below it. NamespaceSelectors live in abstract namespaces; an object naming one
//!   in its namespace-selector annotation is inherited only where the selector matches the
//!   namespace's labels.
//!
//! Validation reports every problem it finds, not just the first; any problem means the tree
//! declares nothing.

mod namespaces;
mod tree;

use std::collections::BTreeMap;

use super::declared::{DeclaredObject, DeclaredState, Layout};
use super::error::{SourceError, sorted};
use super::flat::empty_source;
use super::input::{Identified, SourceFile, identify};
use super::scope::{CRD_GROUP, CRD_KIND, Scope, ScopeTable, crd_declaration};
use super::selector::selector_reference;
use super::synced::{ConfigKind, DeclaredKind, declared_kinds};
use super::unique::insert_unique;
use crate::code::ErrorCode;
use crate::object::{GroupKind, ObjectKey};

use tree::{NAMESPACES, Tree};

const SYSTEM: &str = "system";
const CLUSTER: &str = "cluster";

/// Validates a hierarchical tree and computes what lands in every namespace. Any error means
/// no declared state at all.
pub fn parse_hierarchical(files: &[SourceFile]) -> Result<DeclaredState, Vec<SourceError>> {
    parse_hierarchical_with(files, &ScopeTable::default())
}

/// [`parse_hierarchical`] where `known` adds the scopes of kinds a cluster serves (its
/// discovery): a kind neither built in nor declared by a CRD in `cluster/` is placed by them.
/// A CRD of the repository still wins over both.
pub fn parse_hierarchical_with(
    files: &[SourceFile],
    known: &ScopeTable,
) -> Result<DeclaredState, Vec<SourceError>> {
    let (objects, mut errors) = identify(files);
    if objects.is_empty() && errors.is_empty() {
        return Err(vec![empty_source()]);
    }
    let (mut system, mut cluster, mut namespaced) = (Vec::new(), Vec::new(), Vec::new());
    for object in &objects {
        match top_directory(&object.location.path) {
            Some(SYSTEM) => system.push(object),
            Some(CLUSTER) => cluster.push(object),
            Some(NAMESPACES) => namespaced.push(object),
            _ => errors.push(outside_top_directories(object)),
        }
    }
    let syncs = system_syncs(&system, &mut errors);
    let (mut kinds, sync_errors) = declared_kinds(&syncs);
    errors.extend(sync_errors);
    let namespace_kind = GroupKind::new("", "Namespace");
    kinds
        .entry(namespace_kind.clone())
        .or_insert_with(|| DeclaredKind::implied(namespace_kind));
    let rules = Rules {
        scopes: scope_table(known, &cluster, &mut errors),
        kinds,
    };
    let mut state = DeclaredState {
        layout: Layout::Hierarchical,
        ..DeclaredState::default()
    };
    place_cluster_objects(&rules, &cluster, &mut state, &mut errors);
    let tree_files = files
        .iter()
        .map(|file| file.path.as_str())
        .filter(|path| top_directory(path) == Some(NAMESPACES));
    let tree = Tree::build(tree_files, &namespaced);
    namespaces::place(&rules, &tree, &mut state, &mut errors);
    if errors.is_empty() {
        state.kinds = rules.kinds;
        Ok(state)
    } else {
        Err(sorted(errors))
    }
}

/// What every object outside `system/` is checked against.
pub(super) struct Rules {
    kinds: BTreeMap<GroupKind, DeclaredKind>,
    scopes: ScopeTable,
}

impl Rules {
    /// The kind's scope, if a Sync declares the kind and its scope is known; otherwise reports
    /// why not.
    fn declared_scope(
        &self,
        object: &Identified<'_>,
        errors: &mut Vec<SourceError>,
    ) -> Option<Scope> {
        let group_kind = object.gvk.group_kind();
        if !self.kinds.contains_key(&group_kind) {
            errors.push(error(
                ErrorCode::UnsyncedKind,
                object,
                format!("kind {group_kind} is declared by no Sync in system/"),
            ));
            return None;
        }
        let scope = self.scopes.scope(&group_kind);
        if scope.is_none() {
            errors.push(error(
                ErrorCode::UnknownScope,
                object,
                format!(
                    "the scope of kind {group_kind} is unknown: declare its CustomResourceDefinition in cluster/"
                ),
            ));
        }
        scope
    }

    fn declared_kind(&self, group_kind: &GroupKind) -> Option<&DeclaredKind> {
        self.kinds.get(group_kind)
    }
}

fn error(code: ErrorCode, object: &Identified<'_>, message: impl Into<String>) -> SourceError {
    SourceError::at_object(code, &object.location, object.display(), message)
}

fn top_directory(path: &str) -> Option<&str> {
    path.split_once('/').map(|(top, _)| top)
}

fn outside_top_directories(object: &Identified<'_>) -> SourceError {
    let message = "objects belong in system/, cluster/ or namespaces/";
    match ConfigKind::of(object) {
        Some(_) => error(ErrorCode::MisplacedConfigObject, object, message),
        None => error(ErrorCode::MisplacedObject, object, message),
    }
}

/// The Syncs of `system/`; reports every other kind found there.
fn system_syncs<'o, 'a>(
    system: &[&'o Identified<'a>],
    errors: &mut Vec<SourceError>,
) -> Vec<&'o Identified<'a>> {
    let mut syncs = Vec::new();
    for &object in system {
        match ConfigKind::of(object) {
            Some(ConfigKind::Sync) => syncs.push(object),
            Some(ConfigKind::Repo) => {}
            Some(ConfigKind::NamespaceSelector) => errors.push(error(
                ErrorCode::MisplacedConfigObject,
                object,
                "a NamespaceSelector belongs in an abstract namespace directory under namespaces/",
            )),
            None => errors.push(error(
                ErrorCode::MisplacedObject,
                object,
                "system/ holds only Repo and Sync objects",
            )),
        }
    }
    syncs
}

/// The built-in and `known` scopes plus those of the CustomResourceDefinitions in `cluster/`.
fn scope_table(
    known: &ScopeTable,
    cluster: &[&Identified<'_>],
    errors: &mut Vec<SourceError>,
) -> ScopeTable {
    let mut table = known.clone();
    for crd in cluster.iter().filter(|o| o.is(CRD_GROUP, CRD_KIND)) {
        match crd_declaration(crd) {
            Ok((group_kind, scope)) => table.declare(group_kind, scope),
            Err(invalid) => errors.push(invalid),
        }
    }
    table
}

fn place_cluster_objects(
    rules: &Rules,
    cluster: &[&Identified<'_>],
    state: &mut DeclaredState,
    errors: &mut Vec<SourceError>,
) {
    let mut seen = BTreeMap::new();
    for &object in cluster {
        if let Some(config) = ConfigKind::of(object) {
            let place = match config {
                ConfigKind::NamespaceSelector => {
                    "an abstract namespace directory under namespaces/"
                }
                ConfigKind::Repo | ConfigKind::Sync => "system/",
            };
            errors.push(error(
                ErrorCode::MisplacedConfigObject,
                object,
                format!("a {} belongs in {place}", object.gvk.kind),
            ));
            continue;
        }
        if object.is("", "Namespace") {
            errors.push(error(
                ErrorCode::MisplacedObject,
                object,
                "a Namespace is declared by its own directory under namespaces/, not in cluster/",
            ));
            continue;
        }
        match rules.declared_scope(object, errors) {
            None => continue,
            Some(Scope::Namespaced) => {
                errors.push(error(
                    ErrorCode::NamespacedInCluster,
                    object,
                    format!(
                        "kind {} is namespaced; it belongs in a directory under namespaces/",
                        object.gvk.group_kind()
                    ),
                ));
                continue;
            }
            Some(Scope::Cluster) => {}
        }
        if let Some(namespace) = crate::object::namespace(object.value) {
            errors.push(error(
                ErrorCode::NamespaceContradictsDirectory,
                object,
                format!("a cluster-scoped object in cluster/ has metadata.namespace {namespace:?}"),
            ));
            continue;
        }
        if let Some((annotation, _)) = selector_reference(object.value) {
            errors.push(error(
                ErrorCode::SelectorOutsideAbstractNamespace,
                object,
                format!("{annotation} only applies to objects in abstract namespaces"),
            ));
            continue;
        }
        let key = ObjectKey {
            group_kind: object.gvk.group_kind(),
            namespace: None,
            name: object.name.as_str().into(),
        };
        if insert_unique(&mut seen, key.clone(), object, errors) {
            let declared = DeclaredObject::as_written(object.value, &object.location);
            state.objects.insert(key, declared);
        }
    }
}

#[cfg(test)]
mod tests;
