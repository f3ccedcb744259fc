//! Application observers (seeds/004, Krake's Kubernetes application observer).
//!
//! # Model
//!
//! An Application declares a **manifest** (the Kubernetes resources to create) and optionally
//! a custom **observer schema**: a list of partial resources naming which fields are observed.
//! In a written schema each resource gives its identity (`apiVersion`, `kind`,
//! `metadata.name`, optionally `metadata.namespace`) and every other field it observes with
//! the value `null`; every list ends with a control entry
//! `{observer_schema_list_min_length: N, observer_schema_list_max_length: M}` bounding the
//! list's length (`M = 0`: unlimited). Elements are observed by index.
//!
//! * [`parse_custom_schema`] validates a custom schema against the manifest and collects every
//!   error ([`SchemaError`]: resource index and identity, exact [`FieldPath`], reason code).
//! * [`default_schema`] observes every field of a manifest resource, each list bounded to its
//!   own length; [`ObserverSchema::for_application`] combines the custom schema with the
//!   defaults for the resources it does not name.
//! * [`last_applied_manifest`]: the manifest, plus observed fields it leaves out taken from the
//!   API's answer to the apply. The user's values always win.
//! * [`last_observed_manifest`] / [`ResourceSchema::project`]: live objects reduced to their
//!   observed fields; each observed list ends with `{observer_schema_list_current_length: n}`
//!   so length changes beyond the observed elements show.
//! * [`observe`]: the observer's step: the new last observed manifest, or nothing when it
//!   equals the stored status.
//! * [`ResourceDelta::between`]: the controller's comparison of last applied and last observed:
//!   resources to create, to delete, and modified ones with the paths that differ. Unobserved
//!   fields never differ; an observed list outside its bounds is a modification.
//! * [`place`]: where a manifest object lands: only in the Application's own namespace (a
//!   namespaced object without one gets it, another namespace or a cluster-scoped kind is a
//!   [`ManifestProblem`] naming the field). Table test `placement::tests`; through the running
//!   controller in arbor-observer's tests.
//! * [`observer_lifecycle`] and [`ApplicationState::next_action`]: when observers are stopped
//!   and started around the controller's actions.
//!
//! Resources are matched by [`ResourceId`] (apiVersion, kind, namespace, name), so an object
//! that is not in the application is never observed, whatever it looks like.
//!
//! # Seed coverage
//!
//! Tests in `tests/observe_seed.rs` unless noted; `schema` is `tests/observe_schema.rs`,
//! `properties` is `tests/observe_properties.rs`.
//!
//! | seeds/004 bullet or row | test |
//! |---|---|
//! | `spec`: desired state, set by the user, not modified by the controllers | `spec_is_the_desired_state_set_by_the_user_and_never_changed_by_the_controller` |
//! | `status`: current state as seen in the real world, set by the controllers | `status_is_the_current_state_set_by_the_observer_from_the_real_world` |
//! | Resources must have a `spec` **AND** a `status` attribute to be reconciled | `resource_needs_spec_and_status_to_be_reconciled` ([`check_reconcilable`], for untyped resources; not called by arbor-observer, see below) |
//! | Loop 1-3: resource created on the API, created in the real world, then observed | `observer_started_after_resources_created` |
//! | Loop 4-5: actual state same as `status`: nothing happens | `status_equal_to_observed_means_nothing_happens` |
//! | Loop 6-7: actual state differs: resource modified, observer updates `status` | `status_differs_means_resource_modified` |
//! | Loop 8: controller applies the desired state on the actual resource | `controller_reconciles_by_applying_desired_state_on_actual_resource` |
//! | Loop 9: the workflow starts again from step 3 | `after_reconciliation_status_follows_desired_state` |
//! | Warning: reconciliation only for Kubernetes `Application` resources | scope of this module: it models Applications only |
//! | One observer per application with resources; it watches all resources of the spec | `observer_watches_every_resource_in_the_application_specification` |
//! | nginx: changed container image in the `Deployment` is detected | `changed_container_image_in_deployment_is_detected` |
//! | nginx: changed label in the `Service` is detected | `changed_label_in_service_is_detected` |
//! | nginx: controller sees the deviation and updates `Deployment` and `Service` | `deviation_with_spec_updates_deployment_and_service_accordingly` |
//! | Observed fields controlled by a custom observer schema | `observed_fields_are_controlled_by_a_custom_observer_schema`, `change_to_unobserved_field_is_not_a_difference`, `minimal_schema_only_checks_that_the_resource_exists` |
//! | Comparing last applied and last observed: parts created, updated or deleted | `comparing_last_applied_and_last_observed_yields_resources_to_create`, `..._to_delete`, `changed_container_image_in_deployment_is_detected` |
//! | Creation: observer created after the resources are created | `observer_started_after_resources_created` |
//! | Update: observer stopped before, new observer started after | `lifecycle_update_observer_stopped_before_started_after` |
//! | Deletion: observer stopped before the resources are deleted | `lifecycle_delete_observer_stopped_before_not_started_after` |
//! | Table row Create: stopped before No, started after Yes | `lifecycle_create_observer_not_stopped_before_started_after` |
//! | Table row Update: stopped before Yes, started after Yes | `lifecycle_update_observer_stopped_before_started_after` |
//! | Table row Delete: stopped before Yes, started after No | `lifecycle_delete_observer_stopped_before_not_started_after` |
//! | On status change: periodic check, status read and compared | `status_equal_to_observed_means_nothing_happens`, `status_differs_means_resource_modified` |
//! | On status change: `status` updated to match what the observer fetched | `changed_status_matches_what_the_observer_fetched_from_the_cluster` |
//! | On status change: reconciliation is an update, observer stopped before and started after | `reconciliation_is_an_update_observer_stopped_before_started_after` |
//! | On status change: afterwards `status` follows the desired state | `after_reconciliation_status_follows_desired_state` |
//! | Warning: a resource added manually is not managed | `resource_added_manually_is_not_managed` |
//!
//! Schema format (Krake's observer schema documentation):
//!
//! | rule | test |
//! |---|---|
//! | Default schema: every manifest field, each list min = max = its length | schema: `default_schema_observes_every_manifest_field_with_lists_bounded_to_their_length` |
//! | Custom schema replaces the default for the resources it names | schema: `custom_schema_replaces_the_default_only_for_the_resources_it_names` |
//! | Observed field absent from the manifest is filled from the API (lastAppliedManifest) | `observed_field_left_out_of_manifest_is_filled_from_api_response` |
//! | List outside `[min, max]` is reverted | `list_outside_its_bounds_is_a_modification` |
//! | Extra observed list elements may be absent, but not changed | `optional_observed_list_element_may_come_and_go_but_not_change` |
//! | `observer_schema_list_max_length: 0` is unlimited | schema: `max_length_zero_means_unlimited_and_allows_any_minimum` |
//! | Projection through the own default schema compares equal | properties: `projection_through_own_default_schema_compares_equal` |
//!
//! | validation error (reason code) | schema test |
//! |---|---|
//! | every error collected, with exact path | `all_errors_are_collected_not_just_the_first`, `error_names_resource_index_identity_and_exact_path` |
//! | `ResourceNotAMapping` | `schema_resource_that_is_not_a_mapping_is_refused` |
//! | `MissingIdentity` | `missing_api_version_is_refused`, `missing_kind_is_refused`, `missing_metadata_name_is_refused`, `manifest_resource_without_identity_is_refused` |
//! | `IdentityNotAString` | `identity_that_is_not_a_string_is_refused` |
//! | `MetadataNotAMapping` | `metadata_that_is_not_a_mapping_is_refused` |
//! | `LeafNotNull` | `observed_field_with_a_value_is_refused` |
//! | `MissingListControl` | `list_without_control_entry_is_refused` |
//! | `MalformedListControl` | `control_entry_without_both_lengths_is_refused`, `control_entry_with_unknown_key_is_refused` |
//! | `ListLengthNotInteger` | `list_length_that_is_not_an_integer_is_refused` |
//! | `NegativeListLength` | `negative_list_length_is_refused` |
//! | `MinAboveMax` | `minimum_above_maximum_is_refused` |
//! | `MaxBelowObservedElements` | `maximum_below_the_number_of_observed_elements_is_refused` |
//! | `ShapeDiffersFromManifest` | `schema_shape_differing_from_manifest_is_refused` |
//! | `ResourceNotInManifest` | `schema_resource_not_in_manifest_is_refused`, `schema_namespace_selects_one_resource_and_no_namespace_selects_all_of_that_name` |
//! | `DuplicateResource` | `resource_observed_twice_is_refused` |
//!
//! One Application whose spec does not decode is reported (warn log, Event, metric) and
//! skipped; every other Application is observed: `arbor-observer`
//! `undecodable::an_application_that_does_not_decode_is_reported_and_the_others_are_observed`.
//!
//! ## Why arbor-observer does not call [`check_reconcilable`]
//!
//! In Krake a resource is a free-form document, so "no `spec`" and "no `status`" are states
//! the controller must check before it reconciles. Arbor's only kind that is reconciled this
//! way, `Application` (arbor.dev), rules both out by its type, before any decision is taken:
//! - `spec` is required by the CRD's schema and by the typed `Application`: the API server
//!   refuses an Application without it, and one that does not decode never reaches
//!   `reconcile`. There is always a desired state.
//! - Reconciliation proper (seed loop steps 6-8: the controller applies the desired state
//!   because the observed state deviates) is [`ResourceDelta::between`] the status's
//!   `last_applied_manifest` and `last_observed_manifest`, taken only once the status says the
//!   Application was created (`observedGeneration` set, [`ApplicationState::next_action`]).
//!   Without a status there is nothing observed to reconcile from, and the action is the
//!   first creation, which the seed's lifecycle table lists separately (Create: observer
//!   started after), not a reconciliation.
//!
//! So the bullet holds for every Application by construction, and a call in the controller
//! could never refuse one: [`check_reconcilable`] stays the executable reading of the bullet
//! for documents without a type, and its test is the bullet's.

mod applied;
mod compare;
mod default;
mod error;
mod identity;
mod lifecycle;
mod parse;
mod path;
mod placement;
mod project;
mod reconcile;
mod schema;

pub use applied::last_applied_manifest;
pub use compare::{
    Difference, FieldDifference, ModifiedResource, ResourceDelta, field_differences,
};
pub use default::default_schema;
pub use error::{Origin, SchemaError, SchemaErrorReason, SchemaErrors};
pub use identity::ResourceId;
pub use lifecycle::{ApplicationAction, ApplicationState, ObserverLifecycle, observer_lifecycle};
pub use parse::parse_custom_schema;
pub use path::{FieldPath, Segment};
pub use placement::{ManifestProblem, manifest_kind, place, with_namespace};
pub use project::{last_observed_manifest, without_list_lengths};
pub use reconcile::{NotReconcilable, Observation, check_reconcilable, observe};
pub use schema::{
    LIST_CURRENT_LENGTH_KEY, LIST_MAX_LENGTH_KEY, LIST_MIN_LENGTH_KEY, ListBounds, ObserverSchema,
    ResourceSchema, SchemaNode,
};
