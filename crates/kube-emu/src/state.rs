//! The server's state behind one lock: the registry of served kinds and the object store, with
//! the create and update semantics every write path (POST, PUT, PATCH, apply) shares.
//!
//! What the server owns in an object is decided here: uid, creationTimestamp, resourceVersion,
//! generation and deletionTimestamp cannot be written by clients; a kind with a status
//! subresource keeps its status on main-resource writes and everything else on `/status`
//! writes; `generation` moves only when something outside metadata and status changes.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::kinds;
use crate::managed::{self, Writer};
use crate::meta::{self, metadata_mut};
use crate::registry::{Registry, ResourceId, ResourceKind};
use crate::status::{ApiError, Cause};
use crate::store::{ObjectKey, Store};
use crate::{strategy, validation};

/// etcd's default limit on one stored value, which kube-apiserver passes on.
const OBJECT_SIZE_LIMIT: usize = 1536 * 1024;

/// Metadata fields that only the server writes.
const SERVER_OWNED_METADATA: [&str; 6] = [
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
];

#[derive(Debug)]
pub struct State {
    pub registry: Registry,
    pub store: Store,
    /// Warnings of the last write (unknown fields), for its response's `Warning` headers.
    warnings: Vec<String>,
}

/// What a write does with fields the schema does not declare (`?fieldValidation=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and warn, kube-apiserver's default.
    #[default]
    Warn,
    /// Refuse the write.
    Strict,
}

impl FieldValidation {
    /// The `fieldValidation` query parameter; kube-apiserver's 400 for anything else.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}"
            ))),
        }
    }
}

/// How a write was asked for, beyond the object itself.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// The caller (server-side apply) already wrote `metadata.managedFields`.
    pub ownership_recorded: bool,
    pub field_validation: FieldValidation,
}

/// The namespaces resource, which several rules refer to.
pub fn namespaces() -> ResourceId {
    ResourceId::new("", "namespaces")
}

/// Letters kube-apiserver uses for generateName suffixes: no vowels, no look-alikes.
const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|byte| NAME_SUFFIX_ALPHABET[usize::from(*byte) % NAME_SUFFIX_ALPHABET.len()] as char)
        .collect()
}

/// The part of an object that `generation` tracks: everything but metadata, and but status
/// when status is a subresource of its own.
fn spec_part(kind: &ResourceKind, object: &Value) -> Map<String, Value> {
    let mut part = object.as_object().cloned().unwrap_or_default();
    for field in ["metadata", "apiVersion", "kind"] {
        part.remove(field);
    }
    if kind.has_status_subresource() {
        part.remove("status");
    }
    part
}

/// [`set_or_remove`] at a dotted path; missing parents are created for a value, and their
/// absence is already the removal.
fn set_or_remove_path(object: &mut Value, path: &str, value: Option<Value>) {
    let (parents, field) = path.rsplit_once('.').unwrap_or(("", path));
    let mut target = object;
    for segment in parents.split('.').filter(|segment| !segment.is_empty()) {
        if !target.get(segment).is_some_and(Value::is_object) {
            if value.is_none() {
                return;
            }
            target[segment] = json!({});
        }
        target = &mut target[segment];
    }
    set_or_remove(target, field, value);
}

fn set_or_remove(object: &mut Value, field: &str, value: Option<Value>) {
    if let Some(map) = object.as_object_mut() {
        match value {
            Some(value) => {
                map.insert(field.to_owned(), value);
            }
            None => {
                map.remove(field);
            }
        }
    }
}

/// Label, annotation and ownerReference rules every kind shares.
fn check_metadata(kind: &ResourceKind, object: &Value) -> Result<(), ApiError> {
    let mut causes = validation::validate_labels_and_annotations(object);
    causes.extend(validation::validate_owner_references(object));
    ApiError::invalid_if_any(&kind.id.group, &kind.kind, meta::name(object), causes)
}

/// The size of `value` as compact JSON, near enough (escapes are not counted), without
/// serializing it: every write pays for this check.
fn json_size(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(|item| json_size(item) + 1).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(key, value)| key.len() + 4 + json_size(value))
                .sum::<usize>()
                + 2
        }
    }
}

/// Refuses what etcd would not store.
fn check_size(object: &Value) -> Result<(), ApiError> {
    if json_size(object) > OBJECT_SIZE_LIMIT {
        return Err(ApiError::internal("etcdserver: request is too large"));
    }
    Ok(())
}

/// The version a body is written in: its `apiVersion` when the kind serves it, else the
/// storage version.
fn body_version(kind: &ResourceKind, object: &Value) -> String {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|api_version| api_version.rsplit('/').next())
        .filter(|version| kind.version(version).is_some())
        .map_or_else(|| kind.storage_version().name.clone(), str::to_owned)
}

/// The APIService kube-apiserver registers for a group version it serves itself: named
/// `<version>.<group>` (`v1.` for the core group), no backing service, Available. Priorities
/// follow discovery order, as the served groups' APIServices do.
fn local_api_service(
    group: &str,
    version: &str,
    group_index: usize,
    version_index: usize,
) -> Value {
    let group_priority = 18_000_i64.saturating_sub(100 * group_index as i64).max(1);
    let version_priority = 15_i64.saturating_sub(version_index as i64).max(1);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}"),
            "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
        "spec": {"group": group, "version": version,
            "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
        "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local",
            "message": "Local APIServices are always available",
            "lastTransitionTime": meta::now_timestamp()}]},
    })
}

/// Whether a deleted object may leave the store: no finalizers, and for a namespace no
/// `spec.finalizers` either (the namespace controller's "kubernetes" finalizer).
pub fn ready_to_remove(resource: &ResourceId, object: &Value) -> bool {
    meta::is_deleting(object)
        && meta::finalizers(object).is_empty()
        && (*resource != namespaces()
            || meta::string_list(meta::lookup_path(object, "spec.finalizers")).is_empty())
}

impl State {
    pub fn new(history_window: usize) -> State {
        let mut state = State {
            registry: Registry::with_builtins(),
            store: Store::new(history_window),
            warnings: Vec::new(),
        };
        let kind = state
            .registry
            .get(&namespaces())
            .cloned()
            .expect("namespaces are built in");
        let writer = Writer::system();
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let namespace =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            state
                .create(&kind, None, namespace, &writer, &WriteOptions::default())
                .expect("the initial namespaces are valid");
        }
        state.create_bootstrap_objects(&writer);
        state
    }

    /// What kube-apiserver itself keeps in every cluster and clients look for: the `kubernetes`
    /// Service in `default` (its first service address, port 443 to the server's default
    /// secure port 6443) and one local APIService per built-in group version.
    fn create_bootstrap_objects(&mut self, writer: &Writer) {
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
        });
        let mut objects = vec![(ResourceId::new("", "services"), service)];
        for (group_index, (group, versions)) in self.registry.groups().into_iter().enumerate() {
            for (version_index, version) in versions.iter().enumerate() {
                objects.push((
                    ResourceId::new("apiregistration.k8s.io", "apiservices"),
                    local_api_service(&group, version, group_index, version_index),
                ));
            }
        }
        for (resource, object) in objects {
            let kind = self
                .registry
                .get(&resource)
                .cloned()
                .expect("bootstrap kinds are built in");
            let namespace = meta::namespace(&object).to_owned();
            let namespace = (!namespace.is_empty()).then_some(namespace);
            let status = object.get("status").cloned();
            let created = self
                .create(
                    &kind,
                    namespace.as_deref(),
                    object,
                    writer,
                    &WriteOptions::default(),
                )
                .expect("the bootstrap objects are valid");
            // Status goes through its subresource, as the controller that reports it writes it.
            if let Some(status) = status {
                let mut with_status = (*created).clone();
                with_status["status"] = status;
                self.update(
                    &kind,
                    &ObjectKey::of(&created),
                    with_status,
                    Some("status"),
                    writer,
                    &WriteOptions::default(),
                )
                .expect("the bootstrap statuses are valid");
            }
        }
    }

    /// Checks the request's namespace against the body and the namespace's lifecycle.
    fn check_namespace(
        &self,
        kind: &ResourceKind,
        url_namespace: Option<&str>,
        object: &mut Value,
        creating: bool,
    ) -> Result<(), ApiError> {
        let body_namespace = meta::namespace(object).to_owned();
        if !kind.namespaced {
            metadata_mut(object).remove("namespace");
            return Ok(());
        }
        let namespace = url_namespace.unwrap_or_default();
        if !body_namespace.is_empty() && body_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        metadata_mut(object).insert("namespace".into(), Value::from(namespace));
        if !creating {
            return Ok(());
        }
        match self
            .store
            .get(&namespaces(), &ObjectKey::new("", namespace))
        {
            None => Err(ApiError::not_found(&namespaces(), namespace)),
            Some(ns) if meta::is_deleting(ns) => Err(ApiError::namespace_terminating(
                &kind.id,
                meta::name(object),
                namespace,
            )),
            Some(_) => Ok(()),
        }
    }

    /// Fills in the name from `generateName`, then validates it.
    fn assign_name(&self, kind: &ResourceKind, object: &mut Value) -> Result<(), ApiError> {
        if meta::name(object).is_empty() {
            let prefix = meta::meta_str(object, "generateName")
                .unwrap_or_default()
                .to_owned();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    &kind.id.group,
                    &kind.kind,
                    "",
                    vec![Cause::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
            let namespace = meta::namespace(object).to_owned();
            let name = std::iter::repeat_with(|| format!("{prefix}{}", random_suffix()))
                .find(|name| {
                    self.store
                        .get(&kind.id, &ObjectKey::new(&namespace, name))
                        .is_none()
                })
                .expect("the candidate names never run out");
            metadata_mut(object).insert("name".into(), Value::from(name));
        }
        let name = meta::name(object).to_owned();
        let causes = validation::validate_name(&name, kind.name_rule);
        if !causes.is_empty() {
            return Err(ApiError::invalid(&kind.id.group, &kind.kind, &name, causes));
        }
        Ok(())
    }

    /// The warnings of the last write, once.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// What the apiextensions server does to a custom resource before storing it: prunes
    /// undeclared fields (warning about them or refusing them per `fieldValidation`), applies
    /// defaults, and validates against the schema of the version the body is written in.
    fn admit_custom_resource(
        &mut self,
        kind: &ResourceKind,
        version: &str,
        object: &mut Value,
        old: Option<&Value>,
        options: &WriteOptions,
    ) -> Result<(), ApiError> {
        let Some(schema) = kind
            .version(version)
            .unwrap_or_else(|| kind.storage_version())
            .structural
            .as_ref()
        else {
            return Ok(());
        };
        let pruned = schema.prune(object);
        let unknown: Vec<String> = pruned
            .iter()
            .map(|path| format!("unknown field \"{path}\""))
            .collect();
        match options.field_validation {
            FieldValidation::Strict if !unknown.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "{kind_name} in version \"{version}\" cannot be handled as a {kind_name}: strict decoding error: {}",
                    unknown.join(", "),
                    kind_name = kind.kind,
                )));
            }
            FieldValidation::Warn => self.warnings.extend(unknown),
            _ => {}
        }
        ApiError::invalid_if_any(
            &kind.id.group,
            &kind.kind,
            meta::name(object),
            schema.validate(object, old),
        )
    }

    /// The node ports and cluster IPs held by the stored Services other than `key`, when `kind`
    /// is Service: read from the store, so what a deleted or retyped Service held is free again
    /// at once.
    fn held_by_other_services(&self, kind: &ResourceKind, key: &ObjectKey) -> strategy::Held {
        let mut held = strategy::Held::default();
        if kind.custom || kind.id != ResourceId::new("", "services") {
            return held;
        }
        for (_, service) in self
            .store
            .list(&kind.id, None)
            .filter(|(other, _)| *other != key)
        {
            let ports = meta::lookup_path(service, "spec.ports").and_then(Value::as_array);
            held.node_ports.extend(
                ports
                    .into_iter()
                    .flatten()
                    .filter_map(|port| port.get("nodePort")?.as_i64()),
            );
            let ips = meta::lookup_path(service, "spec.clusterIPs").and_then(Value::as_array);
            held.cluster_ips.extend(
                ips.into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .chain(meta::lookup_path(service, "spec.clusterIP").and_then(Value::as_str))
                    .filter(|ip| !ip.is_empty() && *ip != "None")
                    .map(str::to_owned),
            );
        }
        held
    }

    /// Creates `object` as a `kind` in `url_namespace`.
    pub fn create(
        &mut self,
        kind: &Arc<ResourceKind>,
        url_namespace: Option<&str>,
        mut object: Value,
        writer: &Writer,
        options: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        if !meta::resource_version(&object).is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        self.warnings.clear();
        let version = body_version(kind, &object);
        self.check_namespace(kind, url_namespace, &mut object, true)?;
        self.assign_name(kind, &mut object)?;
        let key = ObjectKey::of(&object);
        if self.store.get(&kind.id, &key).is_some() {
            return Err(ApiError::already_exists(&kind.id, &key.name));
        }
        set_or_remove(
            &mut object,
            "apiVersion",
            Some(Value::from(kind.storage_api_version())),
        );
        set_or_remove(&mut object, "kind", Some(Value::from(kind.kind.clone())));
        let metadata = metadata_mut(&mut object);
        for field in SERVER_OWNED_METADATA {
            metadata.remove(field);
        }
        metadata.insert("uid".into(), Value::from(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), Value::from(writer.now.clone()));
        if kind.tracks_generation {
            metadata.insert("generation".into(), Value::from(1));
        }
        if kind.has_status_subresource() {
            set_or_remove(&mut object, "status", None);
        }
        if kind.custom {
            self.admit_custom_resource(kind, &version, &mut object, None, options)?;
        }
        let held = self.held_by_other_services(kind, &key);
        strategy::on_create(kind, &mut object, &held)?;
        check_metadata(kind, &object)?;
        check_size(&object)?;
        let new_kind = kinds::prepare_create(kind, &self.registry, &mut object, &writer.now)?;
        if !options.ownership_recorded {
            managed::record(kind, None, &mut object, writer);
        }
        if options.dry_run {
            let mut preview = object;
            metadata_mut(&mut preview).insert("resourceVersion".into(), Value::from(""));
            return Ok(Arc::new(preview));
        }
        if let Some(new_kind) = new_kind {
            self.registry.register(new_kind);
        }
        let stored = self.store.put(&kind.id, key, object);
        self.after_change(&kind.id);
        Ok(stored)
    }

    /// What controllers of a real cluster do right after a change: ClusterRole aggregation.
    pub(crate) fn after_change(&mut self, resource: &ResourceId) {
        if crate::rbac::is_cluster_roles(resource) {
            crate::rbac::bootstrap::aggregate(&mut self.store);
        }
    }

    /// Replaces the object at `key` with `body`, on the main resource or a subresource.
    pub fn update(
        &mut self,
        kind: &Arc<ResourceKind>,
        key: &ObjectKey,
        mut body: Value,
        subresource: Option<&str>,
        writer: &Writer,
        options: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        self.warnings.clear();
        let old = self
            .store
            .get(&kind.id, key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.id, &key.name))?;
        let requested_uid = meta::uid(&body);
        if !requested_uid.is_empty() && requested_uid != meta::uid(&old) {
            return Err(ApiError::conflict(
                &kind.id,
                &key.name,
                &format!(
                    "Precondition failed: UID in precondition: {requested_uid}, UID in object meta: {}",
                    meta::uid(&old)
                ),
            ));
        }
        let requested_version = meta::resource_version(&body);
        if !requested_version.is_empty() && requested_version != meta::resource_version(&old) {
            return Err(ApiError::stale_resource_version(&kind.id, &key.name));
        }
        let url_namespace = kind.namespaced.then_some(key.namespace.as_str());
        let version = body_version(kind, &body);
        self.check_namespace(kind, url_namespace, &mut body, false)?;
        let mut new = match subresource {
            None => {
                if kind.has_status_subresource() {
                    set_or_remove(&mut body, "status", old.get("status").cloned());
                }
                body
            }
            Some("status") => {
                let mut new = (*old).clone();
                set_or_remove(&mut new, "status", body.get("status").cloned());
                // Ownership recorded by apply on the status subresource travels in the body.
                if let Some(managed) = meta::lookup_path(&body, "metadata.managedFields") {
                    metadata_mut(&mut new).insert("managedFields".into(), managed.clone());
                }
                new
            }
            Some("finalize") if kind.id == namespaces() => {
                let mut new = (*old).clone();
                let finalizers = meta::lookup_path(&body, "spec.finalizers").cloned();
                if let Some(spec) = new.get_mut("spec") {
                    set_or_remove(spec, "finalizers", finalizers);
                }
                new
            }
            Some(subresource) => {
                let path = kind
                    .field_subresource(subresource)
                    .ok_or_else(ApiError::no_such_route)?;
                let mut new = (*old).clone();
                set_or_remove_path(&mut new, path, meta::lookup_path(&body, path).cloned());
                new
            }
        };
        self.keep_server_fields(kind, &old, &mut new)?;
        if kind.custom {
            self.admit_custom_resource(kind, &version, &mut new, Some(&old), options)?;
        }
        let held = self.held_by_other_services(kind, key);
        strategy::on_update(kind, &old, &mut new, &held)?;
        check_metadata(kind, &new)?;
        check_size(&new)?;
        if kind.tracks_generation && spec_part(kind, &new) != spec_part(kind, &old) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            metadata_mut(&mut new).insert("generation".into(), Value::from(generation));
        }
        let new_kind = kinds::prepare_update(kind, subresource, &old, &mut new, &writer.now)?;
        if new == *old {
            return Ok(old);
        }
        if !options.ownership_recorded {
            managed::record(kind, Some(&old), &mut new, writer);
        }
        if options.dry_run {
            return Ok(Arc::new(new));
        }
        if let Some(new_kind) = new_kind {
            self.registry.register(new_kind);
        }
        if ready_to_remove(&kind.id, &new) {
            return Ok(self.remove_with_last_state(&kind.id, key, new));
        }
        let stored = self.store.put(&kind.id, key.clone(), new);
        self.after_change(&kind.id);
        Ok(stored)
    }

    /// Restores what clients cannot change and refuses what they may not do to a live object.
    fn keep_server_fields(
        &self,
        kind: &ResourceKind,
        old: &Value,
        new: &mut Value,
    ) -> Result<(), ApiError> {
        set_or_remove(
            new,
            "apiVersion",
            Some(Value::from(kind.storage_api_version())),
        );
        set_or_remove(new, "kind", Some(Value::from(kind.kind.clone())));
        let old_metadata = old
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let had_managed_fields = meta::lookup_path(new, "metadata.managedFields").is_some();
        let metadata = metadata_mut(new);
        for field in SERVER_OWNED_METADATA
            .into_iter()
            .chain(["name", "namespace"])
        {
            match old_metadata.get(field) {
                Some(value) => metadata.insert(field.to_owned(), value.clone()),
                None => metadata.remove(field),
            };
        }
        if !had_managed_fields && let Some(managed) = old_metadata.get("managedFields") {
            metadata.insert("managedFields".into(), managed.clone());
        }
        if meta::is_deleting(old) {
            let before = meta::finalizers(old);
            let added: Vec<String> = meta::finalizers(new)
                .into_iter()
                .filter(|finalizer| !before.contains(finalizer))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &kind.id.group,
                    &kind.kind,
                    meta::name(old),
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                        ),
                    )],
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new(100)
    }

    fn kind(state: &State, group: &str, plural: &str) -> Arc<ResourceKind> {
        state
            .registry
            .get(&ResourceId::new(group, plural))
            .cloned()
            .expect("built in")
    }

    fn write(
        state: &mut State,
        kind: &Arc<ResourceKind>,
        object: &Value,
        subresource: Option<&str>,
    ) -> Arc<Value> {
        state
            .update(
                kind,
                &ObjectKey::of(object),
                object.clone(),
                subresource,
                &Writer::system(),
                &WriteOptions::default(),
            )
            .expect("updated")
    }

    fn create_deployment(state: &mut State) -> Arc<Value> {
        let deployments = kind(state, "apps", "deployments");
        let object = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}, "status": {"replicas": 9}});
        state
            .create(
                &deployments,
                Some("default"),
                object,
                &Writer::system(),
                &WriteOptions::default(),
            )
            .expect("created")
    }

    #[test]
    fn a_fresh_state_has_the_default_namespaces() {
        let state = state();
        assert!(
            state
                .store
                .get(&namespaces(), &ObjectKey::new("", "default"))
                .is_some()
        );
        assert!(
            state
                .store
                .get(&namespaces(), &ObjectKey::new("", "kube-system"))
                .is_some()
        );
    }

    #[test]
    fn create_drops_status_of_kinds_with_a_status_subresource_and_starts_generation_at_one() {
        let mut state = state();
        let created = create_deployment(&mut state);
        assert!(created.get("status").is_none());
        assert_eq!(created["metadata"]["generation"], 1);
        assert!(!meta::uid(&created).is_empty());
    }

    #[test]
    fn generation_moves_on_spec_changes_only() {
        let mut state = state();
        let created = create_deployment(&mut state);
        let deployments = kind(&state, "apps", "deployments");
        let mut labelled = (*created).clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        let labelled = write(&mut state, &deployments, &labelled, None);
        assert_eq!(labelled["metadata"]["generation"], 1);
        let mut scaled = (*labelled).clone();
        scaled["spec"]["replicas"] = json!(3);
        let scaled = write(&mut state, &deployments, &scaled, None);
        assert_eq!(scaled["metadata"]["generation"], 2);
    }

    #[test]
    fn status_writes_change_only_status_and_main_writes_keep_status() {
        let mut state = state();
        let created = create_deployment(&mut state);
        let deployments = kind(&state, "apps", "deployments");
        let mut status_write = (*created).clone();
        status_write["status"] = json!({"replicas": 1});
        status_write["spec"]["replicas"] = json!(5);
        let after_status = write(&mut state, &deployments, &status_write, Some("status"));
        assert_eq!(after_status["status"]["replicas"], 1);
        assert_eq!(after_status["spec"]["replicas"], 1);
        let mut main_write = (*after_status).clone();
        main_write["status"] = json!({"replicas": 7});
        let after_main = write(&mut state, &deployments, &main_write, None);
        assert_eq!(after_main["status"]["replicas"], 1);
    }

    #[test]
    fn without_a_status_subresource_status_changes_move_generation() {
        let mut state = state();
        let crd = json!({
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                     "names": {"plural": "gadgets", "kind": "Gadget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
        });
        let crds = kind(&state, "apiextensions.k8s.io", "customresourcedefinitions");
        state
            .create(
                &crds,
                None,
                crd,
                &Writer::system(),
                &WriteOptions::default(),
            )
            .expect("CRD created");
        let gadgets = kind(&state, "example.com", "gadgets");
        let created = state
            .create(
                &gadgets,
                None,
                json!({"metadata": {"name": "g"}, "status": {"a": 1}}),
                &Writer::system(),
                &WriteOptions::default(),
            )
            .expect("created");
        assert_eq!(created["status"]["a"], 1, "status is plain data here");
        let mut changed = (*created).clone();
        changed["status"]["a"] = json!(2);
        let changed = write(&mut state, &gadgets, &changed, None);
        assert_eq!(changed["metadata"]["generation"], 2);
    }

    #[test]
    fn server_owned_metadata_cannot_be_overwritten() {
        let mut state = state();
        let created = create_deployment(&mut state);
        let deployments = kind(&state, "apps", "deployments");
        let mut forged = (*created).clone();
        forged["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
        forged["metadata"]["labels"] = json!({"changed": "yes"});
        let updated = write(&mut state, &deployments, &forged, None);
        assert_eq!(meta::uid(&updated), meta::uid(&created));
        assert_eq!(
            updated["metadata"]["creationTimestamp"],
            created["metadata"]["creationTimestamp"]
        );
    }

    #[test]
    fn an_update_naming_another_uid_fails_its_precondition() {
        let mut state = state();
        let created = create_deployment(&mut state);
        let deployments = kind(&state, "apps", "deployments");
        let mut forged = (*created).clone();
        forged["metadata"]["uid"] = json!("forged");
        let error = state
            .update(
                &deployments,
                &ObjectKey::of(&forged),
                forged.clone(),
                None,
                &Writer::system(),
                &WriteOptions::default(),
            )
            .expect_err("another object's uid");
        assert_eq!(error.code, 409);
        assert_eq!(
            error.message,
            format!(
                "Operation cannot be fulfilled on deployments.apps \"web\": Precondition failed: UID in precondition: forged, UID in object meta: {}",
                meta::uid(&created)
            )
        );
    }

    #[test]
    fn invalid_labels_and_oversized_objects_are_refused() {
        let mut state = state();
        let config_maps = kind(&state, "", "configmaps");
        let mut create = |object: Value| {
            state.create(
                &config_maps,
                Some("default"),
                object,
                &Writer::system(),
                &WriteOptions::default(),
            )
        };
        let error = create(json!({"metadata": {"name": "a", "labels": {"k": "not ok"}}}))
            .expect_err("a space in a label value");
        assert_eq!(error.code, 422);
        assert!(
            error.message.starts_with(
                "ConfigMap \"a\" is invalid: metadata.labels: Invalid value: \"not ok\""
            ),
            "{}",
            error.message
        );
        let error = create(json!({"metadata": {"name": "b", "annotations": {"a": "x".repeat(1024 * 1024)}, "labels": {}}}))
            .expect_err("annotations over 256 KiB");
        assert!(
            error.message.contains("metadata.annotations: Too long"),
            "{}",
            error.message
        );
    }
}
