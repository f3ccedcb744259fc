//! Deletion and everything it sets off: preconditions, finalizers and `deletionTimestamp`,
//! propagation policies, garbage collection through ownerReferences, namespace termination and
//! the clean-up of a deleted CRD's custom resources.
//!
//! kube-apiserver leaves most of this to controllers (garbage collector, namespace controller,
//! apiextensions finalizer) that act shortly after the write. The emulator does their work in
//! the same critical section as the write, through a work list of follow-ups, so tests see the
//! converged state as soon as the request returns; what must wait (a finalizer someone else
//! owns) waits exactly as in a cluster and resumes when the blocking object changes.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::kinds::custom_resource_definitions;
use crate::meta::{self, metadata_mut};
use crate::registry::{ResourceId, crd::CLEANUP_FINALIZER};
use crate::state::{State, namespaces, ready_to_remove};
use crate::status::ApiError;
use crate::store::{ObjectKey, ObjectRef};

/// Namespaces kube-apiserver refuses to delete.
const PROTECTED_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The finalizer that holds an owner deleted with `propagationPolicy=Foreground`.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn parse(text: &str) -> Result<Propagation, ApiError> {
        match text {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation: Propagation,
    pub dry_run: bool,
}

/// What a delete did to the object.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Gone from the store; its last state.
    Removed(Arc<Value>),
    /// Marked with `deletionTimestamp`, waiting for finalizers.
    Pending(Arc<Value>),
}

/// Work the deletion of one object leaves for others.
#[derive(Debug)]
enum FollowUp {
    /// An object left the store.
    Removed(ResourceId, Arc<Value>),
    /// Delete the dependents of an owner that is gone or deleted in the foreground, unless
    /// another owner of theirs still exists.
    DeleteDependents(String),
    DeleteNamespaceContents(String),
    DeleteCustomResources(ResourceId),
    /// A foreground owner may have lost its last blocking dependent.
    CheckOwner(String),
    /// A terminating namespace may be empty.
    CheckNamespace(String),
    /// A deleted CRD may have lost its last custom resource.
    CheckCrd(ResourceId),
}

impl State {
    /// Deletes the object at `key` as a DELETE request asks.
    pub fn delete(
        &mut self,
        resource: &ResourceId,
        key: &ObjectKey,
        options: &DeleteOptions,
        now: &str,
    ) -> Result<Deleted, ApiError> {
        let current = self
            .store
            .get(resource, key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
        if *resource == namespaces() && PROTECTED_NAMESPACES.contains(&key.name.as_str()) {
            return Err(ApiError::forbidden(
                resource,
                &key.name,
                "this namespace may not be deleted",
            ));
        }
        let preconditions = [
            ("UID", &options.precondition_uid, meta::uid(&current)),
            (
                "ResourceVersion",
                &options.precondition_resource_version,
                meta::resource_version(&current),
            ),
        ];
        for (field, expected, actual) in preconditions {
            if let Some(expected) = expected
                && expected != actual
            {
                return Err(ApiError::conflict(
                    resource,
                    &key.name,
                    &format!(
                        "Precondition failed: {field} in precondition: {expected}, {field} in object meta: {actual}"
                    ),
                ));
            }
        }
        if options.dry_run {
            return Ok(preview_deletion(
                resource,
                &current,
                options.propagation,
                now,
            ));
        }
        let mut work = VecDeque::new();
        let outcome = self.delete_object(resource, key, options.propagation, now, &mut work);
        self.settle(work, now);
        Ok(outcome.unwrap_or(Deleted::Removed(current)))
    }

    /// Removes an object whose update cleared its last finalizer, recording `last_state`.
    pub fn remove_with_last_state(
        &mut self,
        resource: &ResourceId,
        key: &ObjectKey,
        last_state: Value,
    ) -> Arc<Value> {
        let removed = self
            .store
            .remove(resource, key, Some(last_state))
            .expect("the caller read the object under the same lock");
        let now = meta::now_timestamp();
        self.settle(
            VecDeque::from([FollowUp::Removed(resource.clone(), removed.clone())]),
            &now,
        );
        removed
    }

    /// Marks or removes one object; `None` when it is not there (collected meanwhile).
    fn delete_object(
        &mut self,
        resource: &ResourceId,
        key: &ObjectKey,
        propagation: Propagation,
        now: &str,
        work: &mut VecDeque<FollowUp>,
    ) -> Option<Deleted> {
        let current = self.store.get(resource, key)?.clone();
        if meta::is_deleting(&current) {
            return Some(Deleted::Pending(current));
        }
        let uid = meta::uid(&current).to_owned();
        let mut object = (*current).clone();
        let metadata = metadata_mut(&mut object);
        metadata.insert("deletionTimestamp".into(), Value::from(now));
        metadata.insert("deletionGracePeriodSeconds".into(), Value::from(0));
        match propagation {
            Propagation::Orphan => self.orphan_dependents(&uid),
            Propagation::Foreground => {
                add_finalizer(&mut object, FOREGROUND_FINALIZER);
                work.push_back(FollowUp::DeleteDependents(uid.clone()));
                work.push_back(FollowUp::CheckOwner(uid.clone()));
            }
            Propagation::Background => {}
        }
        if *resource == namespaces() {
            object["status"] = json!({"phase": "Terminating"});
            work.push_back(FollowUp::DeleteNamespaceContents(key.name.clone()));
            work.push_back(FollowUp::CheckNamespace(key.name.clone()));
        }
        if *resource == custom_resource_definitions()
            && let Ok(kind) = crate::registry::crd::kind_from_crd(&object)
        {
            if self.store.list(&kind.id, None).next().is_some() {
                add_finalizer(&mut object, CLEANUP_FINALIZER);
            }
            work.push_back(FollowUp::DeleteCustomResources(kind.id.clone()));
            work.push_back(FollowUp::CheckCrd(kind.id));
        }
        if ready_to_remove(resource, &object) {
            let removed = self.store.remove(resource, key, None)?;
            work.push_back(FollowUp::Removed(resource.clone(), removed.clone()));
            Some(Deleted::Removed(removed))
        } else {
            Some(Deleted::Pending(self.store.put(
                resource,
                key.clone(),
                object,
            )))
        }
    }

    /// Removes ownerReferences to `owner_uid` from its dependents.
    fn orphan_dependents(&mut self, owner_uid: &str) {
        for (resource, key) in self.store.dependents_of(owner_uid) {
            if let Some(dependent) = self.store.get(&resource, &key) {
                let mut dependent = (**dependent).clone();
                if meta::remove_owner_ref(&mut dependent, owner_uid) {
                    self.store.put(&resource, key, dependent);
                }
            }
        }
    }

    /// Runs follow-ups until nothing is left to do.
    fn settle(&mut self, mut work: VecDeque<FollowUp>, now: &str) {
        while let Some(next) = work.pop_front() {
            match next {
                FollowUp::Removed(resource, object) => {
                    self.after_removal(&resource, &object, &mut work)
                }
                FollowUp::DeleteDependents(owner_uid) => {
                    let dependents = self
                        .store
                        .dependents_of(&owner_uid)
                        .into_iter()
                        .filter(|(resource, key)| {
                            self.only_owned_by_absent_or(resource, key, &owner_uid)
                        })
                        .collect();
                    self.delete_in_background(dependents, now, &mut work);
                }
                FollowUp::DeleteNamespaceContents(namespace) => {
                    let contents = self.store.objects_in_namespace(&namespace);
                    self.delete_in_background(contents, now, &mut work);
                }
                FollowUp::DeleteCustomResources(resource) => {
                    let objects = self
                        .store
                        .list(&resource, None)
                        .map(|(key, _)| (resource.clone(), key.clone()))
                        .collect();
                    self.delete_in_background(objects, now, &mut work);
                }
                FollowUp::CheckOwner(uid) => self.release_foreground_owner(&uid, &mut work),
                FollowUp::CheckNamespace(namespace) => self.finish_namespace(&namespace, &mut work),
                FollowUp::CheckCrd(resource) => self.finish_crd(&resource, &mut work),
            }
        }
    }

    /// Deletes each object with background propagation, as the garbage collector does.
    fn delete_in_background(
        &mut self,
        targets: Vec<ObjectRef>,
        now: &str,
        work: &mut VecDeque<FollowUp>,
    ) {
        for (resource, key) in targets {
            self.delete_object(&resource, &key, Propagation::Background, now, work);
        }
    }

    fn after_removal(
        &mut self,
        resource: &ResourceId,
        object: &Value,
        work: &mut VecDeque<FollowUp>,
    ) {
        self.after_change(resource);
        let uid = meta::uid(object);
        // Garbage collection: dependents whose owners are all gone go too.
        work.push_back(FollowUp::DeleteDependents(uid.to_owned()));
        for owner in meta::owner_refs(object) {
            if owner.block_owner_deletion {
                work.push_back(FollowUp::CheckOwner(owner.uid));
            }
        }
        let namespace = meta::namespace(object);
        if !namespace.is_empty() {
            work.push_back(FollowUp::CheckNamespace(namespace.to_owned()));
        }
        if self.registry.get(resource).is_some_and(|kind| kind.custom) {
            work.push_back(FollowUp::CheckCrd(resource.clone()));
        }
        if *resource == custom_resource_definitions()
            && let Ok(kind) = crate::registry::crd::kind_from_crd(object)
        {
            self.registry.unregister(&kind.id);
            self.store.drop_resource(&kind.id);
        }
    }

    /// Whether every owner of the object is `owner_uid` or no longer exists.
    fn only_owned_by_absent_or(
        &self,
        resource: &ResourceId,
        key: &ObjectKey,
        owner_uid: &str,
    ) -> bool {
        self.store.get(resource, key).is_some_and(|dependent| {
            meta::owner_refs(dependent)
                .iter()
                .all(|owner| owner.uid == owner_uid || self.store.find_uid(&owner.uid).is_none())
        })
    }

    /// Drops the foreground finalizer of an owner once no dependent blocks it.
    fn release_foreground_owner(&mut self, uid: &str, work: &mut VecDeque<FollowUp>) {
        let Some((resource, key)) = self.store.find_uid(uid).cloned() else {
            return;
        };
        let Some(owner) = self.store.get(&resource, &key) else {
            return;
        };
        if !meta::is_deleting(owner)
            || !meta::finalizers(owner)
                .iter()
                .any(|f| f == FOREGROUND_FINALIZER)
        {
            return;
        }
        let blocked = self
            .store
            .dependents_of(uid)
            .iter()
            .any(|(dep_resource, dep_key)| {
                self.store
                    .get(dep_resource, dep_key)
                    .is_some_and(|dependent| {
                        meta::owner_refs(dependent)
                            .iter()
                            .any(|owner| owner.uid == uid && owner.block_owner_deletion)
                    })
            });
        if !blocked {
            let mut owner = (**owner).clone();
            remove_finalizer(&mut owner, FOREGROUND_FINALIZER);
            self.commit_finalized(&resource, &key, owner, work);
        }
    }

    /// Removes a terminating namespace once nothing lives in it.
    fn finish_namespace(&mut self, namespace: &str, work: &mut VecDeque<FollowUp>) {
        let key = ObjectKey::new("", namespace);
        let Some(object) = self.store.get(&namespaces(), &key) else {
            return;
        };
        if !meta::is_deleting(object) || self.store.namespace_has_objects(namespace) {
            return;
        }
        let mut object = (**object).clone();
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("finalizers");
        }
        self.commit_finalized(&namespaces(), &key, object, work);
    }

    /// Removes a deleted CRD once its custom resources are gone.
    fn finish_crd(&mut self, resource: &ResourceId, work: &mut VecDeque<FollowUp>) {
        let key = ObjectKey::new("", &resource.to_string());
        let Some(crd) = self.store.get(&custom_resource_definitions(), &key) else {
            return;
        };
        if !meta::is_deleting(crd) || self.store.list(resource, None).next().is_some() {
            return;
        }
        let mut crd = (**crd).clone();
        remove_finalizer(&mut crd, CLEANUP_FINALIZER);
        self.commit_finalized(&custom_resource_definitions(), &key, crd, work);
    }

    /// Stores an object a controller just finalized, or removes it when nothing holds it.
    fn commit_finalized(
        &mut self,
        resource: &ResourceId,
        key: &ObjectKey,
        object: Value,
        work: &mut VecDeque<FollowUp>,
    ) {
        if ready_to_remove(resource, &object) {
            if let Some(removed) = self.store.remove(resource, key, Some(object)) {
                work.push_back(FollowUp::Removed(resource.clone(), removed));
            }
        } else if self
            .store
            .get(resource, key)
            .map(|current| **current != object)
            == Some(true)
        {
            self.store.put(resource, key.clone(), object);
        }
    }
}

fn add_finalizer(object: &mut Value, finalizer: &str) {
    let mut finalizers = meta::finalizers(object);
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(finalizer.to_owned());
        meta::set_finalizers(object, &finalizers);
    }
}

fn remove_finalizer(object: &mut Value, finalizer: &str) {
    let finalizers: Vec<String> = meta::finalizers(object)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    meta::set_finalizers(object, &finalizers);
}

/// What a dry-run delete reports: the object as it would be marked, or as it is when it would
/// go at once.
fn preview_deletion(
    resource: &ResourceId,
    current: &Arc<Value>,
    propagation: Propagation,
    now: &str,
) -> Deleted {
    let mut object = (**current).clone();
    metadata_mut(&mut object).insert("deletionTimestamp".into(), Value::from(now));
    if propagation == Propagation::Foreground {
        add_finalizer(&mut object, FOREGROUND_FINALIZER);
    }
    if ready_to_remove(resource, &object) {
        Deleted::Removed(current.clone())
    } else {
        Deleted::Pending(Arc::new(object))
    }
}
