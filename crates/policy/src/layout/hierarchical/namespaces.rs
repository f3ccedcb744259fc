//! The rules of `namespaces/`: namespace and abstract namespace directories, selectors, and
//! inheritance into every namespace.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use serde_json::Value;

use super::tree::Tree;
use super::{Rules, error};
use crate::code::ErrorCode;
use crate::layout::declared::{DeclaredObject, DeclaredState};
use crate::layout::error::SourceError;
use crate::layout::input::Identified;
use crate::layout::names;
use crate::layout::scope::Scope;
use crate::layout::selector::{
    LabelSelector, SELECTOR_ANNOTATIONS, namespace_selector, selector_reference,
};
use crate::layout::synced::{ConfigKind, HierarchyMode};
use crate::layout::unique::insert_unique;
use crate::object::{self, GroupKind, ObjectKey};

/// An object that passed every rule of its own directory, ready to be inherited.
struct Accepted<'o, 'a, 's> {
    object: &'o Identified<'a>,
    mode: HierarchyMode,
    selector: Option<&'s LabelSelector>,
}

/// Applies the rules of `namespaces/` and adds what lands in each namespace to `state`.
pub(super) fn place(
    rules: &Rules,
    tree: &Tree<'_, '_>,
    state: &mut DeclaredState,
    errors: &mut Vec<SourceError>,
) {
    let is_namespace_dir: Vec<bool> = tree
        .dirs
        .iter()
        .map(|dir| !dir.is_root() && dir.objects.iter().any(|o| is_namespace(o)))
        .collect();
    let namespace_objects = namespace_objects(tree, errors);
    check_structure(tree, &is_namespace_dir, errors);
    let selectors = selectors(tree, &is_namespace_dir, errors);
    let accepted = accepted_objects(rules, tree, &is_namespace_dir, &selectors, errors);
    for (dir, namespace) in namespace_objects.iter().enumerate() {
        if let Some(namespace) = namespace {
            let inherited = inherit(tree, dir, namespace, &is_namespace_dir, &accepted, errors);
            declare_namespace(state, namespace, inherited);
        }
    }
}

fn is_namespace(object: &Identified<'_>) -> bool {
    object.is("", "Namespace")
}

/// The valid Namespace object of each directory; reports invalid directory names, Namespaces
/// named unlike their directory and namespaces declared twice.
fn namespace_objects<'o, 'a>(
    tree: &Tree<'o, 'a>,
    errors: &mut Vec<SourceError>,
) -> Vec<Option<&'o Identified<'a>>> {
    let mut seen = BTreeMap::new();
    let mut found = vec![None; tree.dirs.len()];
    for (id, dir) in tree.dirs.iter().enumerate() {
        if !dir.is_root()
            && let Err(reason) = names::namespace_name(dir.name())
        {
            errors.push(SourceError::at_path(
                ErrorCode::InvalidName,
                &dir.path,
                format!(
                    "directory name {:?} is not a valid namespace name: {reason}",
                    dir.name()
                ),
            ));
        }
        for &namespace in dir.objects.iter().filter(|o| is_namespace(o)) {
            if dir.is_root() {
                errors.push(error(
                    ErrorCode::MisplacedObject,
                    namespace,
                    "namespaces/ is the root abstract namespace; a Namespace needs its own directory",
                ));
            } else if let Some((annotation, _)) = selector_reference(namespace.value) {
                errors.push(error(
                    ErrorCode::SelectorOutsideAbstractNamespace,
                    namespace,
                    format!("a Namespace is never inherited, so it cannot carry {annotation}"),
                ));
            } else if namespace.name != dir.name() {
                errors.push(error(
                    ErrorCode::NamespaceNameMismatch,
                    namespace,
                    format!(
                        "Namespace {:?} is in directory {:?}; a Namespace is named like its directory",
                        namespace.name,
                        dir.name()
                    ),
                ));
            } else if insert_unique(&mut seen, namespace.name.clone(), namespace, errors) {
                found[id] = Some(namespace);
            }
        }
    }
    found
}

/// Namespace directories are leaves; abstract namespaces have a namespace below them.
fn check_structure(tree: &Tree<'_, '_>, is_namespace_dir: &[bool], errors: &mut Vec<SourceError>) {
    for (id, dir) in tree.dirs.iter().enumerate() {
        if is_namespace_dir[id] && !dir.children.is_empty() {
            errors.push(SourceError::at_path(
                ErrorCode::NamespaceDirectoryHasSubdirectories,
                &dir.path,
                "a namespace directory (it holds a Namespace) cannot contain directories",
            ));
        }
        if !is_namespace_dir[id] && !tree.any_below(id, &|d| is_namespace_dir[d]) {
            errors.push(SourceError::at_path(
                ErrorCode::AbstractNamespaceWithoutNamespace,
                &dir.path,
                "this abstract namespace has no namespace below it, so its objects would land nowhere",
            ));
        }
    }
}

/// The NamespaceSelectors of each abstract directory, by name.
fn selectors(
    tree: &Tree<'_, '_>,
    is_namespace_dir: &[bool],
    errors: &mut Vec<SourceError>,
) -> Vec<BTreeMap<String, LabelSelector>> {
    let mut seen = BTreeMap::new();
    let mut selectors = vec![BTreeMap::new(); tree.dirs.len()];
    for (id, dir) in tree.dirs.iter().enumerate() {
        let declared = dir
            .objects
            .iter()
            .filter(|o| ConfigKind::of(o) == Some(ConfigKind::NamespaceSelector));
        for &selector in declared {
            if is_namespace_dir[id] {
                errors.push(error(
                    ErrorCode::MisplacedConfigObject,
                    selector,
                    "a NamespaceSelector belongs in an abstract namespace, not a namespace directory",
                ));
                continue;
            }
            match namespace_selector(selector.value) {
                Err(reason) => {
                    errors.push(error(ErrorCode::InvalidNamespaceSelector, selector, reason))
                }
                Ok(parsed) => {
                    if insert_unique(&mut seen, selector.name.clone(), selector, errors) {
                        selectors[id].insert(selector.name.clone(), parsed);
                    }
                }
            }
        }
    }
    selectors
}

/// The objects of each directory that pass the directory's rules.
fn accepted_objects<'o, 'a, 's>(
    rules: &Rules,
    tree: &Tree<'o, 'a>,
    is_namespace_dir: &[bool],
    selectors: &'s [BTreeMap<String, LabelSelector>],
    errors: &mut Vec<SourceError>,
) -> Vec<Vec<Accepted<'o, 'a, 's>>> {
    let mut accepted: Vec<Vec<Accepted<'o, 'a, 's>>> = Vec::with_capacity(tree.dirs.len());
    for (id, dir) in tree.dirs.iter().enumerate() {
        let mut seen = BTreeMap::new();
        let mut here = Vec::new();
        for &object in &dir.objects {
            if is_namespace(object) {
                continue;
            }
            match ConfigKind::of(object) {
                Some(ConfigKind::NamespaceSelector) => continue,
                Some(ConfigKind::Repo | ConfigKind::Sync) => {
                    errors.push(error(
                        ErrorCode::MisplacedConfigObject,
                        object,
                        format!("a {} belongs in system/", object.gvk.kind),
                    ));
                    continue;
                }
                None => {}
            }
            let checked = if is_namespace_dir[id] {
                namespace_member(rules, object, dir.name(), errors)
            } else {
                let lineage = tree.lineage(id);
                abstract_member(rules, object, &lineage, selectors, errors)
            };
            let key = (object.gvk.group_kind(), object.name.clone());
            if let Some(member) = checked
                && insert_unique(&mut seen, key, object, errors)
            {
                here.push(member);
            }
        }
        accepted.push(here);
    }
    accepted
}

/// The checks every object under `namespaces/` passes: a Synced, namespaced kind.
fn namespaced_mode(
    rules: &Rules,
    object: &Identified<'_>,
    errors: &mut Vec<SourceError>,
) -> Option<HierarchyMode> {
    match rules.declared_scope(object, errors)? {
        Scope::Cluster => {
            errors.push(error(
                ErrorCode::ClusterScopedInNamespaces,
                object,
                format!(
                    "kind {} is cluster-scoped; it belongs in cluster/",
                    object.gvk.group_kind()
                ),
            ));
            None
        }
        Scope::Namespaced => rules
            .declared_kind(&object.gvk.group_kind())
            .map(|kind| kind.hierarchy_mode),
    }
}

fn namespace_member<'o, 'a, 's>(
    rules: &Rules,
    object: &'o Identified<'a>,
    namespace: &str,
    errors: &mut Vec<SourceError>,
) -> Option<Accepted<'o, 'a, 's>> {
    let mode = namespaced_mode(rules, object, errors)?;
    if let Some(declared) = object::namespace(object.value)
        && declared != namespace
    {
        errors.push(error(
            ErrorCode::NamespaceContradictsDirectory,
            object,
            format!(
                "metadata.namespace is {declared:?} but the object is in namespace {namespace:?}"
            ),
        ));
        return None;
    }
    if let Some((annotation, _)) = selector_reference(object.value) {
        errors.push(error(
            ErrorCode::SelectorOutsideAbstractNamespace,
            object,
            format!("{annotation} only applies to objects in abstract namespaces"),
        ));
        return None;
    }
    Some(Accepted {
        object,
        mode,
        selector: None,
    })
}

fn abstract_member<'o, 'a, 's>(
    rules: &Rules,
    object: &'o Identified<'a>,
    lineage: &[usize],
    selectors: &'s [BTreeMap<String, LabelSelector>],
    errors: &mut Vec<SourceError>,
) -> Option<Accepted<'o, 'a, 's>> {
    let mode = namespaced_mode(rules, object, errors)?;
    if let Some(declared) = object::namespace(object.value) {
        errors.push(error(
            ErrorCode::NamespaceContradictsDirectory,
            object,
            format!(
                "metadata.namespace is {declared:?}, but an object in an abstract namespace lands in every namespace below it"
            ),
        ));
        return None;
    }
    if mode == HierarchyMode::None {
        errors.push(error(
            ErrorCode::KindNotAllowedInAbstractNamespace,
            object,
            format!(
                "kind {} has hierarchyMode none, so it may only be declared in namespace directories",
                object.gvk.group_kind()
            ),
        ));
        return None;
    }
    let selector = match selector_reference(object.value) {
        None => None,
        Some((annotation, name)) => {
            let visible = lineage
                .iter()
                .rev()
                .find_map(|&dir| selectors[dir].get(name));
            if visible.is_none() {
                errors.push(error(
                    ErrorCode::UnknownNamespaceSelector,
                    object,
                    format!(
                        "{annotation} names {name:?}, but no NamespaceSelector of that name is declared in this directory or above it"
                    ),
                ));
                return None;
            }
            visible
        }
    };
    Some(Accepted {
        object,
        mode,
        selector,
    })
}

/// What lands in the namespace of directory `dir`: its own objects and those of its abstract
/// ancestors that its labels admit. Nearer declarations come later in the lineage, so under
/// `hierarchicalQuota` the nearest one replaces the farther ones.
fn inherit<'o, 'a, 'd>(
    tree: &'d Tree<'o, 'a>,
    dir: usize,
    namespace: &Identified<'_>,
    is_namespace_dir: &[bool],
    accepted: &[Vec<Accepted<'o, 'a, '_>>],
    errors: &mut Vec<SourceError>,
) -> Vec<(&'o Identified<'a>, Option<&'d str>)> {
    let labels = object::labels(namespace.value);
    let mut landing: BTreeMap<(GroupKind, &str), (&'o Identified<'a>, usize)> = BTreeMap::new();
    for ancestor in tree.lineage(dir) {
        // A namespace directory above another one is already an error; it passes nothing on.
        if ancestor != dir && is_namespace_dir[ancestor] {
            continue;
        }
        for member in &accepted[ancestor] {
            if member.selector.is_some_and(|s| !s.matches(&labels)) {
                continue;
            }
            let object = member.object;
            match landing.entry((object.gvk.group_kind(), object.name.as_str())) {
                Entry::Vacant(slot) => {
                    slot.insert((object, ancestor));
                }
                Entry::Occupied(mut slot) => {
                    if member.mode == HierarchyMode::HierarchicalQuota {
                        slot.insert((object, ancestor));
                    } else {
                        errors.push(error(
                            ErrorCode::DuplicateInAncestry,
                            object,
                            format!(
                                "{} is also declared in {}, above this directory; both would land in the same namespaces",
                                object.display(),
                                slot.get().0.location.path
                            ),
                        ));
                    }
                }
            }
        }
    }
    landing
        .into_values()
        .map(|(object, from)| (object, (from != dir).then(|| tree.dirs[from].path.as_str())))
        .collect()
}

fn declare_namespace(
    state: &mut DeclaredState,
    namespace: &Identified<'_>,
    inherited: Vec<(&Identified<'_>, Option<&str>)>,
) {
    let name = namespace.name.clone();
    state.namespaces.insert(name.clone());
    state.objects.insert(
        ObjectKey {
            group_kind: namespace.gvk.group_kind(),
            namespace: None,
            name: name.as_str().into(),
        },
        DeclaredObject::as_written(namespace.value, &namespace.location),
    );
    for (object, from) in inherited {
        state.objects.insert(
            ObjectKey {
                group_kind: object.gvk.group_kind(),
                namespace: Some(name.as_str().into()),
                name: object.name.as_str().into(),
            },
            DeclaredObject {
                object: in_namespace(object.value, &name),
                source: object.location.clone(),
                inherited_from: from.map(str::to_owned),
            },
        );
    }
}

/// The object as applied in `namespace`: its namespace set, the selector annotation (repository
/// configuration, not cluster state) removed.
fn in_namespace(object: &Value, namespace: &str) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        // Written right after the name, where people expect it in the hydrated files.
        let namespace = Value::String(namespace.to_owned());
        *metadata = std::mem::take(metadata)
            .into_iter()
            .filter(|(key, _)| key != "namespace")
            .flat_map(|(key, value)| {
                let after = (key == "name").then(|| ("namespace".to_owned(), namespace.clone()));
                std::iter::once((key, value)).chain(after)
            })
            .collect();
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            for key in SELECTOR_ANNOTATIONS {
                annotations.remove(key);
            }
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        }
    }
    object
}
