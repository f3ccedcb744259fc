//! GitTrackObjects and ClusterGitTrackObjects: one per applied object, owned by its source
//! (ownerReference with `controller: true`), carrying the gitsync finalizer.
//!
//! The applied object itself carries no ownerReference (seeds/002: garbage collection through
//! ownerReferences can delete whole clusters). Deleting a tracking object (the round prunes a
//! declaration that is gone, or garbage collection follows a deleted source) therefore ends in
//! [`finalize`], which decides with the action table of seeds/000: the live object is deleted
//! only when it carries the management label, its kind is still declared, and the source's
//! `deletionPolicy` is not `Orphan`.

use std::collections::BTreeMap;

use arbor_api::keys::{GITSYNC_FIELD_MANAGER, GITSYNC_FINALIZER, SourceRef};
use arbor_api::source::DeletionPolicy;
use arbor_api::{ClusterGitTrack, ClusterGitTrackObject, DeclaredObject, GitTrack, GitTrackObject};
use arbor_policy::object::{GroupVersionKind, ObjectKey, gvk};
use arbor_policy::ownership::{ClusterGitTrackMode, Owner, TrackingObject};
use arbor_policy::sync::CompareFields;
use arbor_runtime::decode::{DecodeError, api_resource, decode_flattened};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::Context;
use super::error::ControllerError;
use super::handle::SourceHandle;
use super::plan::PlannedObject;
use crate::apply::{ApplyError, Target};

/// Name (under the key domain) of the annotation recording the source's deletion policy on a
/// tracking object, for when the source is gone.
pub const DELETION_POLICY: &str = "deletion-policy";

const API_VERSION: &str = "arbor.dev/v1alpha1";
/// Longest object name Kubernetes accepts.
const MAX_NAME: usize = 253;

/// A GitTrackObject or ClusterGitTrackObject, as the controllers use it.
pub trait TrackingKind: Resource<DynamicType = ()> + Clone {
    /// The declared object it tracks.
    fn data(&self) -> &Value;
    /// Its stored status conditions.
    fn conditions(&self) -> &[Condition];
}

impl TrackingKind for GitTrackObject {
    fn data(&self) -> &Value {
        &self.spec.object.data
    }

    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| &status.conditions)
    }
}

impl TrackingKind for ClusterGitTrackObject {
    fn data(&self) -> &Value {
        &self.spec.object.data
    }

    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |status| &status.conditions)
    }
}

/// Decodes a tracking object watched or listed as a dynamic object, naming the field that does
/// not fit.
pub fn decode_tracking<K>(object: &DynamicObject) -> Result<K, DecodeError>
where
    K: TrackingKind + serde::de::DeserializeOwned,
{
    decode_flattened::<K, DeclaredObject>(object)
}

/// An existing tracking object.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub key: ObjectKey,
    pub gvk: GroupVersionKind,
    pub name: String,
    pub namespace: Option<String>,
    pub meta: ObjectMeta,
    pub data: Value,
    pub conditions: Vec<Condition>,
}

impl Tracked {
    fn of<K: TrackingKind>(object: &K) -> Option<Self> {
        let data = object.data().clone();
        let namespace = object.meta().namespace.clone();
        let mut key = ObjectKey::of(&data).ok()?;
        key.namespace = namespace.clone().or(key.namespace);
        if K::kind(&()) == "ClusterGitTrackObject" {
            key.namespace = None;
        }
        Some(Self {
            gvk: gvk(&data).ok()?,
            key,
            name: object.name_any(),
            namespace,
            meta: object.meta().clone(),
            data,
            conditions: object.conditions().to_vec(),
        })
    }

    pub fn deleting(&self) -> bool {
        self.meta.deletion_timestamp.is_some()
    }

    fn owned_by(&self, uid: &str) -> bool {
        self.meta
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.uid == uid && owner.controller == Some(true))
    }
}

/// The tracking object's name for `key`: `<kind>.<group>.<name>` in lower case (the group left
/// out for the core group), shortened with a hash when longer than a name may be.
pub fn tracking_name(key: &ObjectKey) -> String {
    let kind = key.group_kind.kind.to_ascii_lowercase();
    let name = if key.group_kind.group.is_empty() {
        format!("{kind}.{}", key.name)
    } else {
        format!("{kind}.{}.{}", key.group_kind.group, key.name)
    };
    if name.len() <= MAX_NAME {
        return name;
    }
    let digest = fnv1a(name.as_bytes());
    let keep = MAX_NAME - 17;
    let mut cut = keep;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{digest:016x}", name[..cut].trim_end_matches(['.', '-']))
}

/// A stable 64-bit hash (FNV-1a), so a shortened name is the same in every process.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every tracking object that `handle` owns, by the key of the object it tracks.
pub async fn list_owned(
    ctx: &Context,
    handle: &SourceHandle,
) -> Result<BTreeMap<ObjectKey, Tracked>, ControllerError> {
    let mut owned = BTreeMap::new();
    let mut collect = |tracked: Option<Tracked>| {
        if let Some(tracked) = tracked.filter(|t| t.owned_by(&handle.uid)) {
            owned.insert(tracked.key.clone(), tracked);
        }
    };
    match &handle.owner {
        Owner::GitTrack { namespace } => {
            for object in list::<GitTrackObject>(ctx, Some(namespace)).await? {
                collect(Tracked::of(&object));
            }
        }
        Owner::ClusterGitTrack => {
            for object in list::<ClusterGitTrackObject>(ctx, None).await? {
                collect(Tracked::of(&object));
            }
            if ctx.settings.scope.cluster_gittrack_mode() == ClusterGitTrackMode::IncludeNamespaced
            {
                for object in list::<GitTrackObject>(ctx, None).await? {
                    collect(Tracked::of(&object));
                }
            }
        }
    }
    Ok(owned)
}

/// The tracking objects of kind `K` (in `namespace`, or everywhere); one that does not decode is
/// reported and left out (it tracks nothing the round can act on), the others are returned.
async fn list<K>(ctx: &Context, namespace: Option<&str>) -> Result<Vec<K>, ControllerError>
where
    K: TrackingKind + serde::de::DeserializeOwned,
{
    let resource = api_resource::<K>();
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(ctx.client.clone(), namespace, &resource),
        None => Api::all_with(ctx.client.clone(), &resource),
    };
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|source| ControllerError::kube("list", K::kind(&()).into_owned(), source))?;
    let mut objects = Vec::with_capacity(listed.items.len());
    for object in &listed.items {
        match decode_tracking::<K>(object) {
            Ok(decoded) => objects.push(decoded),
            Err(error) => {
                ctx.metrics
                    .undecodable
                    .report(&ctx.recorder, &resource, object, &error)
                    .await;
            }
        }
    }
    Ok(objects)
}

/// The tracking object `planned` needs, as applied.
fn desired_tracking(ctx: &Context, handle: &SourceHandle, planned: &PlannedObject) -> Value {
    let (kind, namespace) = match &planned.tracking {
        TrackingObject::GitTrackObject { namespace } => ("GitTrackObject", Some(namespace)),
        TrackingObject::ClusterGitTrackObject => ("ClusterGitTrackObject", None),
    };
    let mut metadata = json!({
        "name": tracking_name(&planned.key),
        "ownerReferences": [handle.owner_reference],
        "finalizers": [GITSYNC_FINALIZER],
        "annotations": {
            ctx.settings.keys.custom(DELETION_POLICY): deletion_policy_text(handle.deletion_policy),
        },
    });
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "name": planned.key.name,
            "kind": planned.key.group_kind.kind,
            "data": planned.desired,
        },
    })
}

fn deletion_policy_text(policy: DeletionPolicy) -> &'static str {
    match policy {
        DeletionPolicy::Delete => "Delete",
        DeletionPolicy::Orphan => "Orphan",
    }
}

/// Makes the tracking object of `planned` exist as it should; returns whether it wrote.
/// A tracking object being deleted is left to its finalizer, which asks for a new round.
pub async fn ensure(
    ctx: &Context,
    handle: &SourceHandle,
    planned: &PlannedObject,
    existing: Option<&Tracked>,
) -> Result<bool, ControllerError> {
    let desired = desired_tracking(ctx, handle, planned);
    if let Some(existing) = existing
        && (existing.deleting() || is_current(existing, &desired))
    {
        return Ok(false);
    }
    let name = tracking_name(&planned.key);
    let params = PatchParams::apply(GITSYNC_FIELD_MANAGER).force();
    let result = match &planned.tracking {
        TrackingObject::GitTrackObject { namespace } => {
            let api: Api<GitTrackObject> = Api::namespaced(ctx.client.clone(), namespace);
            api.patch(&name, &params, &Patch::Apply(&desired))
                .await
                .map(drop)
        }
        TrackingObject::ClusterGitTrackObject => {
            let api: Api<ClusterGitTrackObject> = Api::all(ctx.client.clone());
            api.patch(&name, &params, &Patch::Apply(&desired))
                .await
                .map(drop)
        }
    };
    let tracking = match &planned.tracking {
        TrackingObject::GitTrackObject { namespace } => {
            format!("GitTrackObject {namespace}/{name}")
        }
        TrackingObject::ClusterGitTrackObject => format!("ClusterGitTrackObject {name}"),
    };
    let object = format!("{tracking} of {}", super::notice::describe(&planned.key));
    result.map_err(|source| ControllerError::kube("apply", object, source))?;
    Ok(true)
}

fn is_current(existing: &Tracked, desired: &Value) -> bool {
    let meta = &existing.meta;
    let finalized = meta
        .finalizers
        .iter()
        .flatten()
        .any(|finalizer| finalizer == GITSYNC_FINALIZER);
    let annotations_match = desired["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(key, value)| {
            meta.annotations
                .as_ref()
                .and_then(|annotations| annotations.get(key))
                .is_some_and(|found| Some(found.as_str()) == value.as_str())
        });
    finalized && annotations_match && existing.data == desired["spec"]["data"]
}

/// Deletes a tracking object; its finalizer then decides about the live object.
pub async fn delete(ctx: &Context, tracked: &Tracked) -> Result<(), ControllerError> {
    let result = match &tracked.namespace {
        Some(namespace) => {
            let api: Api<GitTrackObject> = Api::namespaced(ctx.client.clone(), namespace);
            api.delete(&tracked.name, &DeleteParams::background())
                .await
                .map(drop)
        }
        None => {
            let api: Api<ClusterGitTrackObject> = Api::all(ctx.client.clone());
            api.delete(&tracked.name, &DeleteParams::background())
                .await
                .map(drop)
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ControllerError::kube(
            "delete tracking object",
            &tracked.name,
            source,
        )),
    }
}

/// The source that owns a tracking object, from its controller ownerReference.
fn owner_source(tracked: &Tracked) -> Option<(SourceRef, String)> {
    let owner = tracked
        .meta
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))?;
    let source = match owner.kind.as_str() {
        "GitTrack" => SourceRef::GitTrack {
            namespace: tracked.namespace.clone()?,
            name: owner.name.clone(),
        },
        "ClusterGitTrack" => SourceRef::ClusterGitTrack {
            name: owner.name.clone(),
        },
        _ => return None,
    };
    Some((source, owner.uid.clone()))
}

/// Whether the source exists with this uid and is not being deleted. Only its metadata is
/// read, so a source whose spec does not decode still holds its objects.
async fn source_alive(
    ctx: &Context,
    source: &SourceRef,
    uid: &str,
) -> Result<bool, ControllerError> {
    let alive =
        |meta: &ObjectMeta| meta.uid.as_deref() == Some(uid) && meta.deletion_timestamp.is_none();
    let read = |source| ControllerError::kube("read source", "owner", source);
    Ok(match source {
        SourceRef::GitTrack { namespace, name } => {
            let api: Api<GitTrack> = Api::namespaced(ctx.client.clone(), namespace);
            api.get_metadata_opt(name)
                .await
                .map_err(read)?
                .is_some_and(|s| alive(&s.metadata))
        }
        SourceRef::ClusterGitTrack { name } => {
            let api: Api<ClusterGitTrack> = Api::all(ctx.client.clone());
            api.get_metadata_opt(name)
                .await
                .map_err(read)?
                .is_some_and(|s| alive(&s.metadata))
        }
    })
}

/// The owner of a tracking object, when this instance reconciles it.
pub fn watched_owner(ctx: &Context, object: &impl TrackingKind) -> bool {
    let Some(tracked) = Tracked::of(object) else {
        return false;
    };
    let Some((source, _)) = owner_source(&tracked) else {
        return false;
    };
    let owner = match &source {
        SourceRef::GitTrack { namespace, .. } => Owner::gittrack(namespace.clone()),
        SourceRef::ClusterGitTrack { .. } => Owner::ClusterGitTrack,
    };
    ctx.settings.scope.watches().watches_owner(&owner)
}

/// The finalizer: applies the action table to the tracked object, then lets the tracking
/// object go.
pub async fn finalize<K: TrackingKind>(ctx: &Context, object: &K) -> Result<(), ControllerError> {
    let Some(tracked) = Tracked::of(object) else {
        return remove_finalizer(ctx, object).await;
    };
    let owner = owner_source(&tracked);
    let alive = match &owner {
        Some((source, uid)) => source_alive(ctx, source, uid).await?,
        None => false,
    };
    let still_declared = alive
        && owner.as_ref().is_some_and(|(source, _)| {
            ctx.registry
                .get(source)
                .is_some_and(|record| record.objects.contains_key(&tracked.key))
        });
    if still_declared {
        // Deleted by hand while git still declares it: the next round recreates it.
        remove_finalizer(ctx, object).await?;
        if let Some((source, _)) = &owner {
            ctx.registry.request_round(source);
        }
        return Ok(());
    }
    let orphan = tracked
        .meta
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(&ctx.settings.keys.custom(DELETION_POLICY)))
        .is_some_and(|policy| policy == "Orphan");
    if alive || !orphan {
        // The source's Sync for the kind may be gone (seeds/000 row 8: no action); a deleted
        // source with the Delete policy no longer declares anything it had.
        let sync_declared = match &owner {
            Some((source, _)) if alive => ctx
                .registry
                .declares_kind(source, &tracked.key.group_kind)
                .unwrap_or(true),
            _ => true,
        };
        let compare = CompareFields::AllDeclared;
        let target = Target {
            gvk: &tracked.gvk,
            namespace: tracked.key.namespace.as_deref(),
            name: &tracked.key.name,
            sync_declared,
            desired: None,
            compare: &compare,
        };
        match ctx.applier.live(&target).await {
            Ok(live) => {
                let outcome = ctx.applier.sync_object(&target, live.as_ref()).await?;
                tracing::info!(object = %tracked.key, row = outcome.decision.row.number(), action = %outcome.decision.action, "tracking object finalized");
                if outcome.wrote
                    && let Some((source, uid)) = &owner
                {
                    let why = format!(
                        "its tracking object {} was deleted (seeds/000 row {}: {})",
                        tracked.name,
                        outcome.decision.row.number(),
                        outcome.decision.row.reason()
                    );
                    let object = super::notice::describe(&tracked.key);
                    super::notice::deleted(ctx, source, uid, &object, &why).await;
                }
            }
            // Nothing of an unserved kind can be on the cluster.
            Err(ApplyError::KindNotServed { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    remove_finalizer(ctx, object).await
}

async fn remove_finalizer<K: TrackingKind>(
    ctx: &Context,
    object: &K,
) -> Result<(), ControllerError> {
    let remaining: Vec<String> = object
        .meta()
        .finalizers
        .iter()
        .flatten()
        .filter(|finalizer| *finalizer != GITSYNC_FINALIZER)
        .cloned()
        .collect();
    let patch = json!({
        "metadata": {
            "finalizers": remaining,
            "resourceVersion": object.meta().resource_version,
        }
    });
    let name = object.name_any();
    let result = match object.meta().namespace.as_deref() {
        Some(namespace) => {
            let api: Api<GitTrackObject> = Api::namespaced(ctx.client.clone(), namespace);
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
        None => {
            let api: Api<ClusterGitTrackObject> = Api::all(ctx.client.clone());
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ControllerError::kube("remove finalizer", name, source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_policy::object::GroupKind;

    fn key(group: &str, kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            group_kind: GroupKind::new(group, kind),
            namespace: Some("team".into()),
            name: name.into(),
        }
    }

    #[test]
    fn tracking_names_say_kind_group_and_name() {
        assert_eq!(
            tracking_name(&key("", "ConfigMap", "settings")),
            "configmap.settings"
        );
        assert_eq!(
            tracking_name(&key("rbac.authorization.k8s.io", "Role", "job-creator")),
            "role.rbac.authorization.k8s.io.job-creator"
        );
    }

    #[test]
    fn long_tracking_names_are_shortened_stably() {
        let long = key("", "ConfigMap", &"a".repeat(250));
        let name = tracking_name(&long);
        assert_eq!(name.len(), MAX_NAME);
        assert_eq!(name, tracking_name(&long));
        assert_ne!(name, tracking_name(&key("", "ConfigMap", &"a".repeat(249))));
    }
}
