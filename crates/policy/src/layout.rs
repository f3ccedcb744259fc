//! Source layouts: from the parsed files of a git tree to the state it declares (seeds/000).
//!
//! This module is pure: it receives already-parsed documents with their file paths (reading and
//! parsing files is `arbor-source`'s job; a flat tree may be given one file at a time,
//! [`FlatReader`]) and returns either the complete [`DeclaredState`] or
//! every [`SourceError`] found, each with a stable [`ErrorCode`], its file and its object. A tree
//! with any error declares nothing, so a controller keeps the last good state and never deletes
//! on a broken commit.
//!
//! Two layouts:
//! - [`Layout::Flat`] (Faros), [`parse_flat`]: every object under subPath, every kind counts as
//!   declared.
//! - [`Layout::Hierarchical`] (Nomos), [`parse_hierarchical`]: `system/` (Repo, Sync),
//!   `cluster/`, and `namespaces/` with abstract namespaces, inheritance by [`HierarchyMode`] and
//!   NamespaceSelectors. Nomos repositories (`nomos.dev/v1alpha1` Repo, Sync, NamespaceSelector,
//!   the `nomos.dev/namespace-selector` annotation) are read as they are; Arbor's
//!   `arbor.dev/v1alpha1` Sync and `arbor.dev/namespace-selector` are accepted too.
//!
//! | rule | code | test |
//! |---|---|---|
//! | namespace directory with subdirectories | ARB2001 | `namespace_directory_with_subdirectories_is_refused` |
//! | `hierarchyMode: none` kind in an abstract namespace | ARB2002 | `hierarchy_mode_none_kind_in_abstract_namespace_is_refused` |
//! | metadata.namespace contradicting the directory | ARB2003 | `metadata_namespace_contradicting_the_directory_is_refused` |
//! | Namespace named unlike its directory | ARB2004 | `namespace_named_unlike_its_directory_is_refused` |
//! | same kind and name twice in one namespace's ancestry | ARB2005 | `same_kind_and_name_twice_in_ancestry_is_refused` |
//! | ... unless `hierarchicalQuota`: the nearest declaration wins | — | `hierarchical_quota_nearest_declaration_wins` |
//! | abstract namespace with no namespace below | ARB2006 | `abstract_namespace_without_namespace_below_is_refused` |
//! | cluster-scoped object under namespaces/ | ARB2007 | `cluster_scoped_object_under_namespaces_is_refused` |
//! | namespaced object under cluster/ | ARB2008 | `namespaced_object_under_cluster_is_refused` |
//! | kind without a Sync | ARB2009 | `kind_without_sync_is_refused` |
//! | kind of unknown scope; a CRD in cluster/ declares it | ARB2010 | `unknown_scope_is_refused_until_a_crd_declares_it` |
//! | Repo / Sync / NamespaceSelector out of place | ARB2011 | `config_objects_out_of_place_are_refused` |
//! | object where its kind cannot live | ARB2012 | `objects_outside_their_directories_are_refused` |
//! | selector annotation naming no selector in scope | ARB2013 | `unknown_namespace_selector_is_refused` |
//! | selector annotation outside abstract namespaces | ARB2014 | `selector_annotation_outside_abstract_namespace_is_refused` |
//! | invalid NamespaceSelector | ARB2015 | `invalid_namespace_selector_is_refused` |
//! | abstract objects reach every descendant namespace | — | `abstract_namespace_objects_are_inherited_by_every_descendant` |
//! | a selector limits inheritance to matching namespaces | — | `namespace_selector_limits_inheritance_to_matching_namespaces` |
//! | same kind and name twice in one directory (any mode) | ARB1004 | `same_kind_and_name_twice_in_one_directory_is_a_duplicate_even_for_quota` |
//! | one namespace in two directories | ARB1004 | `one_namespace_in_two_directories_is_a_duplicate` |
//! | invalid namespace directory name | ARB1003 | `invalid_namespace_directory_names_are_refused` |
//! | every error reported at once; any error declares nothing | — | `every_error_is_reported_at_once` |
//! | identity, names, flat duplicates, empty source | ARB1002–ARB1005 | the `input`, `names` and `flat` tests |

mod declared;
mod error;
mod flat;
mod hierarchical;
mod input;
pub mod names;
mod scope;
mod selector;
pub mod sub_path;
mod synced;
mod unique;

pub use crate::code::ErrorCode;
pub use declared::{DeclaredObject, DeclaredState, Layout};
pub use error::{SourceError, sorted as sorted_errors};
pub use flat::{FlatReader, parse_flat, parse_flat_files};
pub use hierarchical::{parse_hierarchical, parse_hierarchical_with};
pub use input::{Location, SourceFile};
pub use scope::{Scope, ScopeTable, builtin_scope};
pub use selector::{
    LabelSelector, Operator, Requirement, SELECTOR_ANNOTATIONS, namespace_selector,
    selector_reference,
};
pub use synced::{CONFIG_GROUPS, DeclaredKind, HierarchyMode};

/// Validates `files` in `layout`: the declared state, or every error found.
pub fn parse(layout: Layout, files: &[SourceFile]) -> Result<DeclaredState, Vec<SourceError>> {
    parse_with(layout, files, &ScopeTable::default())
}

/// [`parse`], knowing the scopes in `known` beyond the built-in table (a cluster's discovery).
/// A flat source places objects by their own namespace and needs no scopes.
pub fn parse_with(
    layout: Layout,
    files: &[SourceFile],
    known: &ScopeTable,
) -> Result<DeclaredState, Vec<SourceError>> {
    match layout {
        Layout::Flat => parse_flat(files),
        Layout::Hierarchical => parse_hierarchical_with(files, known),
    }
}

/// [`parse_with`], taking the files: a flat source's objects are moved into the state rather
/// than copied ([`parse_flat_files`]). A hierarchical source copies its objects into
/// every namespace that inherits them, so it is parsed as [`parse_with`] parses it.
pub fn parse_files_with(
    layout: Layout,
    files: Vec<SourceFile>,
    known: &ScopeTable,
) -> Result<DeclaredState, Vec<SourceError>> {
    match layout {
        Layout::Flat => flat::parse_flat_files(files),
        Layout::Hierarchical => parse_hierarchical_with(&files, known),
    }
}
