//! The namespace tree of seeds/001 (Accurate) and seeds/003 (Innu): roles, propagation of
//! labels, annotations and objects, cycles, and the rules admission enforces.
//!
//! # Model
//!
//! Everything is read through a [`Keys`](crate::keys::Keys) value, so the same functions serve
//! `arbor.dev`, `accurate.cybozu.com` and `innu.cybozu.com`; seeds/003 is seeds/001 with the
//! Innu domain and is tested as such.
//!
//! - **Roles** ([`namespace`]): a namespace with `<domain>/parent` is a *sub-namespace*;
//!   otherwise `<domain>/type=root|template` makes it a *root* or a *template*, and anything
//!   else a *plain* namespace. A root, template or plain namespace with `<domain>/template` is
//!   also an *instance* of that template. A namespace's *upstream* is its parent (sub) or its
//!   template (instance); it receives labels, annotations and object copies from its upstream
//!   only. A namespace's *children* are the namespaces whose upstream it is.
//! - **Tree** ([`tree`]): all namespaces, with upstream chains, children, sub-namespaces,
//!   instances and the root above a namespace.
//! - **Configuration** ([`config`]): Accurate's file, field for field; glob key patterns
//!   ([`glob`], Go `path.Match` semantics) and naming policies ([`naming`], regular expressions
//!   with `${1}` / `${name}` capture substitution).
//! - **Labels and annotations** ([`metadata`]): `labelKeys` / `annotationKeys` select what an
//!   upstream passes on, transitively down the chain; the domain's own keys never pass.
//! - **Object copies** ([`copy`], [`decision`], [`plan`]): the copy of a source, the "differs"
//!   comparison, and the decision table (Create / Update / Delete / Leave) over source, live
//!   object, modes and `from`. `create` copies are never updated or deleted; `update` copies
//!   follow their source and go when it goes, when `from` stops naming the upstream, or when the
//!   namespace loses its upstream. `propagate*KeyExcludes` filter the copies' labels and
//!   annotations, as in Accurate.
//! - **propagate-generated** ([`generated`]).
//! - **SubNamespaces** ([`subnamespace`]): creating and deleting their namespaces.
//! - **Cycles** ([`cycles`]): cycles of upstream links and the namespaces that must halt.
//! - **Admission** ([`admission`] for Namespaces, [`sub_admission`] for SubNamespaces).
//!
//! Where the seed leaves a choice, Arbor errs on the side of never losing what it does not
//! own: an object without `<domain>/from` is never overwritten or deleted, even when a source
//! of the same name exists (it is reported as a conflict instead); a copy whose source still
//! exists is never deleted, even when the source stopped propagating.
//!
//! seeds/003's third heading reads "Namespaces w/o `innu.cybozu.com/from` and
//! `innu.cybozu.com/template` labels"; `from` is an annotation on objects, never a namespace
//! label, so the heading is read as seeds/001's (`type` and `template`), which is also what
//! the decision does: a namespace without parent and template has no upstream, and its
//! `update` copies are deleted.
//!
//! # Seed bullets and their tests
//!
//! Every test in `tests/propagation_seed.rs` runs under `arbor.dev`, `accurate.cybozu.com`
//! and `innu.cybozu.com`; the Innu run is seeds/003.
//!
//! | seeds/001 (and 003) bullet | test |
//! |---|---|
//! | SubNamespace: for a new SubNamespace, create a sub-namespace | `subnamespace_new_creates_sub_namespace` |
//! | SubNamespace: for a deleting SubNamespace, delete the sub-namespace if it exists and its `parent` is the SubNamespace's namespace | `subnamespace_deleting_deletes_sub_namespace_only_when_parent_matches` |
//! | Template instance: propagate labels and annotations from the template | `template_instance_propagates_labels_and_annotations_from_template` |
//! | Template instance: create missing copies of `create` resources of the template | `template_instance_creates_missing_copies_of_create_resources` |
//! | Template instance: create or update copies of `update` resources if missing or different | `template_instance_creates_or_updates_copies_of_update_resources` |
//! | Template instance: delete `update` copies whose `from` is not the template | `template_instance_deletes_update_copy_when_from_is_not_template` |
//! | Template instance: delete `update` copies without a resource of the same kind and name in the template | `template_instance_deletes_update_copy_when_template_has_no_source` |
//! | Namespaces without `type` and `template`: delete propagated `update` resources | `namespace_without_type_or_template_deletes_update_copies` |
//! | Template namespace: propagate labels and annotations to its instances | `template_propagates_labels_and_annotations_to_instances` |
//! | Root namespace: propagate labels and annotations to its sub-namespaces | `root_propagates_labels_and_annotations_to_sub_namespaces` |
//! | Sub-namespace: propagate labels and annotations from the parent | `sub_namespace_propagates_labels_and_annotations_from_parent` |
//! | Sub-namespace: propagate its labels and annotations to its sub-namespaces | `sub_namespace_propagates_its_labels_and_annotations_to_its_sub_namespaces` |
//! | Sub-namespace: create missing copies of `create` resources of the parent | `sub_namespace_creates_missing_copies_of_create_resources` |
//! | Sub-namespace: create or update copies of `update` resources if missing or different | `sub_namespace_creates_or_updates_copies_of_update_resources` |
//! | Sub-namespace: delete `update` copies whose `from` is not the parent | `sub_namespace_deletes_update_copy_when_from_is_not_parent` |
//! | Sub-namespace: delete `update` copies without a resource of the same kind and name in the parent | `sub_namespace_deletes_update_copy_when_parent_has_no_source` |
//! | Any namespace-scoped resource can be propagated from a template or a parent | `any_namespaced_kind_is_propagated` |
//! | `from`: parent resource exists with `propagate=update` and differs: update | `from_copy_is_updated_when_parent_resource_is_update_and_differs` |
//! | `from`: `propagate=update` and no resource of the same kind and name in the parent: delete | `from_update_copy_is_deleted_when_parent_resource_is_missing` |
//! | `from`: orphans of sources deleted while the controller was stopped are deleted at start | `from_orphan_rule_deletes_copies_whose_source_vanished_while_stopped` |
//! | `propagate=create`: create a copy in all sub-namespaces if missing | `propagate_create_creates_copy_in_all_sub_namespaces_if_missing` |
//! | `propagate=update`: create or update a copy in all sub-namespaces if missing or different | `propagate_update_creates_or_updates_copy_in_all_sub_namespaces` |
//! | `propagate`: when a resource is deleted, delete same-kind same-name `update` copies in sub-namespaces | `propagate_deleting_source_deletes_update_copies_in_sub_namespaces` |
//! | `propagate-generated`: annotate owned resources with `propagate=<the owner's mode>` | `propagate_generated_annotates_owned_resource_with_owner_mode` |
//!
//! # Beyond the seed's bullets: guarantees Arbor adds (issue #16)
//!
//! | guarantee | policy test | controller test (`crates/hierarchy/tests/seed.rs`, every domain) |
//! |---|---|---|
//! | Removed keys are removed below: a key taken off a root or parent leaves every descendant | `metadata::tests::removed_keys_are_removed_below_and_keys_nobody_propagated_are_kept` | `removed_keys_of_a_root_and_a_parent_are_removed_from_every_descendant` |
//! | ... taken off a template leaves its instances; keys nobody propagated stay | `metadata::tests::a_namespace_in_place_needs_no_write` | `removed_keys_of_a_template_are_removed_from_its_instances` |
//! | ... taken off a SubNamespace's spec leaves its namespace | `metadata::tests::keys_held_only_by_propagating_managers_count_as_propagated` | `removed_keys_of_a_sub_namespace_spec_are_removed_from_its_namespace` |
//! | propagate-generated for an owner of any kind (read through the API, per-kind discovery cache) | `generated::tests` (the owner is an input) | `propagate_generated_works_for_an_owner_of_a_kind_not_watched` |
//! | Same-name object without `from`: left, with an Event `CopyBlocked`, the metric, and ExplainPropagation naming [`decision::NAME_OCCUPIED_RULE`] (see [`decision`]) | `decision` rows 6-7 | `same_name_object_without_from_keeps_the_copy_out_visibly` |
//! | One undecodable SubNamespace never stops the others (spec optional; wrong types named by field) | `subnamespace::tests::decode_names_the_wrong_typed_field` | `beyond.rs`: `one_undecodable_sub_namespace_never_stops_the_others` |
//! | The SubNamespace group follows the domain (Accurate's documented manifest, no spec) | — | `subnamespace_without_spec_in_the_domain_group_creates_sub_namespace` |
//! | Migration in place: zero writes where nothing differs, the predecessor's finalizer finished | `metadata::tests::the_created_by_record_is_never_stale` | `migration.rs` (accurate and innu) |
//!
//! The decision table itself is tested row by row in [`decision`]; the property that a copy
//! is updated only for an `update` source and deleted only when itself `update` (so a copy
//! whose mode is not `update` is never updated nor deleted) is in
//! `tests/propagation_properties.rs`; cycles in `tests/propagation_cycles.rs`; every tree rule
//! in `tests/propagation_tree_rules.rs`.

pub mod admission;
pub mod config;
pub mod copy;
pub mod cycles;
pub mod decision;
pub mod generated;
pub mod glob;
pub mod metadata;
pub mod mode;
pub mod namespace;
pub mod naming;
pub mod plan;
pub mod sub_admission;
pub mod subnamespace;
pub mod tree;

pub use admission::{
    Admission, TreeRule, review_namespace_create, review_namespace_delete, review_namespace_update,
};
pub use config::{
    CREATED_BY_LABEL, ConfigError, NamingPolicySpec, PropagationConfig, PropagationRules,
    WatchedKind,
};
pub use copy::{CopyError, build_copy, copy_differs};
pub use cycles::{CycleReport, find_cycles};
pub use decision::{
    CopyDecision, CopyFacts, FromFact, LeaveReason, LiveFact, NAME_OCCUPIED_RULE, SourceFact,
    decide,
};
pub use generated::{AnnotationToAdd, OwnerReference, controller_of, generated_propagation};
pub use glob::{KeyPattern, KeyPatterns, PatternError};
pub use metadata::{
    ACCURATE_FIELD_MANAGER, MetadataChange, NamespaceMetadata, PropagatedKeys, StaleKeys,
    desired_metadata, metadata_change, predecessor_field_managers,
};
pub use mode::PropagateMode;
pub use namespace::{NamespaceState, NamespaceType, Role, RoleKind, Upstream};
pub use naming::{NamingError, NamingPolicy, check_naming};
pub use plan::{
    CopyAction, PlanError, PlannedCopy, decide_copy, plan_fan_out, plan_namespace_copies,
};
pub use sub_admission::{review_sub_namespace_create, review_sub_namespace_delete};
pub use subnamespace::{
    SubNamespace, SubNamespaceAction, SubNamespaceDecodeError, SubNamespaceDeletion,
    finalize_sub_namespace, reconcile_sub_namespace,
};
pub use tree::{NamespaceTree, TreeError, UpstreamChain};
