//! GitTrackObjects and ClusterGitTrackObjects: one per applied object, owned by its source
//! (ownerReference with `controller: true`), carrying the gitsync finalizer.
//!
//! The applied object itself carries no ownerReference (seeds/002: garbage collection through
//! ownerReferences can delete whole clusters). Deleting a tracking object (the round prunes a
//! declaration that is gone, or garbage collection follows a deleted source) therefore ends in
//! its finalizer: [`Finalizing::decide`] asks arbor-policy, which decides with the action
//! table of seeds/000: the live object is deleted only when it carries the management label,
//! its kind is still declared (a flat source declares every kind its inventory holds), and no
//! other source declares it. While the source is being deleted with gitsync's finalizer,
//! [`deletion`](super::deletion) decides instead; for a source gone without it, the
//! `deletionPolicy` recorded on the tracking object does. The finalizer's controller
//! ([`reconcile`](super::reconcile)) carries the decision out and then lets the tracking object
//! go ([`remove_finalizer`]). Tracking objects are read as [`TrackingRecord`]s: only what
//! these decisions read ([`tracking_record`](super::tracking_record)).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arbor_api::keys::{GITSYNC_FIELD_MANAGER, GITSYNC_FINALIZER, SourceRef};
use arbor_api::source::DeletionPolicy;
use arbor_api::{ClusterGitTrack, ClusterGitTrackObject, GitTrack, GitTrackObject};
use arbor_policy::object::{GroupVersionKind, ObjectKey};
use arbor_policy::ownership::{
    ClusterGitTrackMode, Owner, OwnerRef, OwningSourceKind, TrackingHolder, TrackingObject,
};
use arbor_policy::sync::round::{
    self, Elsewhere, Finalize, FinalizeInput, OtherSource, SourceSeen, SourceStanding,
};
use arbor_policy::sync::{Action, CompareFields};
use arbor_runtime::decode::DecodeError;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Resource};
use serde_json::{Value, json};

use super::Context;
use super::error::ControllerError;
use super::paged_list::for_each_page;
use super::plan::PlannedObject;
use super::source_cache::{CachedSource, Freshness};
use super::source_handle::SourceHandle;
use super::tracking_record::{Declaration, TrackingRecord, TrackingResource, data_digest};
use crate::apply::{ApplyError, Target, skimmed_reply};

/// Name (under the key domain) of the annotation recording the source's deletion policy on a
/// tracking object, for when the source is gone.
pub const DELETION_POLICY: &str = "deletion-policy";

const API_VERSION: &str = "arbor.dev/v1alpha1";
/// Longest object name Kubernetes accepts.
const MAX_NAME: usize = 253;

/// An existing tracking object that says what it tracks, as the rounds and the finalizer read
/// it: the watch's record (or a listed one) itself, shared, never copied.
#[derive(Debug, Clone)]
pub struct Tracked {
    record: Arc<TrackingRecord>,
    declaration: Arc<Declaration>,
}

impl Tracked {
    /// `None` when the record does not say what it tracks.
    pub fn of(record: &Arc<TrackingRecord>) -> Option<Self> {
        Some(Self {
            declaration: record.declaration()?.clone(),
            record: record.clone(),
        })
    }

    /// The key of the object it tracks.
    pub fn key(&self) -> &ObjectKey {
        &self.declaration.key
    }

    pub fn gvk(&self) -> &GroupVersionKind {
        &self.declaration.gvk
    }

    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// The tracking object's name.
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// The tracking object's namespace (`None` for a ClusterGitTrackObject).
    pub fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    pub fn meta(&self) -> &ObjectMeta {
        self.record.meta()
    }

    pub fn record(&self) -> &TrackingRecord {
        &self.record
    }

    pub fn deleting(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }

    /// The tracking object itself, for Events about it.
    fn regarding(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(API_VERSION.to_owned()),
            kind: Some(self.record.resource().kind().to_owned()),
            name: Some(self.name().to_owned()),
            namespace: self.namespace().map(str::to_owned),
            uid: self.meta().uid.clone(),
            ..ObjectReference::default()
        }
    }

    /// Who holds it, seen from the source with `source_uid` ([`TrackingHolder::of`]).
    fn holder(&self, source_uid: &str) -> TrackingHolder {
        let references = self.record.owner_references().iter();
        TrackingHolder::of(
            references.map(|owner| OwnerRef {
                uid: &owner.uid,
                controller: owner.controller == Some(true),
            }),
            source_uid,
        )
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

/// The tracking objects a source can see, split by who holds them ([`TrackingHolder::of`]).
#[derive(Debug, Default)]
pub struct Inventory {
    /// The source's own (its inventory), by the key of the object each tracks.
    pub owned: BTreeMap<ObjectKey, Tracked>,
    /// Those another source or another project's controller manages (their controller
    /// ownerReference names it): an object the source declares too is a management conflict.
    pub others: BTreeMap<ObjectKey, Tracked>,
    /// Those without a controller owner (left over): a source declaring the object adopts it.
    pub unowned: BTreeSet<ObjectKey>,
}

/// Where a source's tracking objects are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InventoryRead {
    /// The watches, once they show this replica's earlier writes ([`tracking_store`](super::tracking_store)). Only
    /// where every write the store could be missing is this replica's own: a source whose
    /// tracking objects a round here has listed since this replica took it on.
    Watch,
    /// A LIST: a source this replica has just taken on (another replica, a person or the
    /// garbage collector may have changed its tracking objects, and the watch can lag behind
    /// them), and every decision that deletes.
    Fresh,
}

/// Every tracking object `handle` can see, by the key of the object it tracks, read as `read`
/// says.
pub async fn list_inventory(
    ctx: &Context,
    handle: &SourceHandle,
    read_from: InventoryRead,
) -> Result<Inventory, ControllerError> {
    let mut inventory = Inventory::default();
    let mut collect = |tracked: Tracked| match tracked.holder(&handle.uid) {
        TrackingHolder::Ours => {
            inventory.owned.insert(tracked.key().clone(), tracked);
        }
        TrackingHolder::Another => {
            inventory.others.insert(tracked.key().clone(), tracked);
        }
        TrackingHolder::Unowned => {
            inventory.unowned.insert(tracked.key().clone());
        }
    };
    match &handle.owner {
        Owner::GitTrack { namespace } => {
            let resource = TrackingResource::GitTrackObject;
            read(ctx, resource, Some(namespace), read_from, &mut collect).await?;
        }
        Owner::ClusterGitTrack => {
            let resource = TrackingResource::ClusterGitTrackObject;
            read(ctx, resource, None, read_from, &mut collect).await?;
            if ctx.settings.scope.cluster_gittrack_mode() == ClusterGitTrackMode::IncludeNamespaced
            {
                let resource = TrackingResource::GitTrackObject;
                read(ctx, resource, None, read_from, &mut collect).await?;
            }
        }
    }
    Ok(inventory)
}

/// The tracking objects of kind `resource` (in `namespace`, or everywhere), each given to
/// `collect`; one that does not decode is reported and left out (it tracks nothing the round
/// can act on).
async fn read(
    ctx: &Context,
    resource: TrackingResource,
    namespace: Option<&str>,
    read_from: InventoryRead,
    collect: &mut impl FnMut(Tracked),
) -> Result<(), ControllerError> {
    let watched = match (read_from, resource) {
        (InventoryRead::Fresh, _) => None,
        (InventoryRead::Watch, TrackingResource::ClusterGitTrackObject) => {
            ctx.tracking.cluster_gittrack_objects().await
        }
        (InventoryRead::Watch, TrackingResource::GitTrackObject) => {
            ctx.tracking.gittrack_objects(namespace).await
        }
    };
    let records: Vec<Arc<TrackingRecord>> = match watched {
        Some(records) => records,
        None => {
            let api = resource.api(ctx.client.clone(), namespace);
            let api = &api;
            let mut records = Vec::new();
            for_each_page(
                |params| async move { api.list(&params).await },
                |items| records.extend(items.into_iter().map(Arc::new)),
            )
            .await
            .map_err(|source| ControllerError::kube("list", resource.kind(), source))?;
            records
        }
    };
    for record in &records {
        if let Some(tracked) = Tracked::of(record) {
            collect(tracked);
        } else if let Some(error) = record.unreadable() {
            report_unreadable(ctx, record, &error).await;
        }
    }
    Ok(())
}

/// Reports a tracking object a field of which does not have the CRD's shape.
pub async fn report_unreadable(ctx: &Context, record: &TrackingRecord, error: &DecodeError) {
    ctx.metrics
        .undecodable
        .report(
            &ctx.recorder,
            &record.resource().api_resource(),
            &record.as_dynamic(),
            error,
        )
        .await;
}

/// What a tracking object says of the object it tracks and of its source: the parts a round
/// checks in the stored one ([`is_current`]) and writes when they differ ([`desired_tracking`]).
/// A Secret's payload is not copied into it, only its digest ([`arbor_policy::secret`]): the
/// applier takes the payload from the parsed repository, and a finalizer needs only the
/// object's identity.
struct TrackedContent<'a> {
    /// The deletion-policy annotation's key and value.
    policy: (String, &'static str),
    /// `spec.data`: the object as applied, without a Secret's payload.
    data: Cow<'a, Value>,
    /// `spec.payloadDigest`: a Secret's payload digest.
    payload_digest: Option<String>,
}

impl<'a> TrackedContent<'a> {
    /// For the object applied as `desired` by the source of `handle`.
    fn of(ctx: &Context, handle: &SourceHandle, desired: &'a Value) -> Self {
        Self {
            policy: (
                ctx.settings.keys.custom(DELETION_POLICY),
                deletion_policy_text(handle.deletion_policy),
            ),
            data: arbor_policy::secret::without_payload(desired),
            payload_digest: ctx.fetcher.payload_digest(desired),
        }
    }
}

/// The tracking object `planned` needs, as applied, saying `content`.
fn desired_tracking(
    handle: &SourceHandle,
    planned: &PlannedObject,
    content: TrackedContent<'_>,
) -> Value {
    let (kind, namespace) = match &planned.tracking {
        TrackingObject::GitTrackObject { namespace } => ("GitTrackObject", Some(namespace)),
        TrackingObject::ClusterGitTrackObject => ("ClusterGitTrackObject", None),
    };
    let mut metadata = json!({
        "name": tracking_name(&planned.key),
        "ownerReferences": [handle.owner_reference],
        "finalizers": [GITSYNC_FINALIZER],
        "annotations": {content.policy.0: content.policy.1},
    });
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    let mut tracking = json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "name": planned.key.name,
            "kind": planned.key.group_kind.kind,
            "data": content.data,
        },
    });
    if let Some(digest) = content.payload_digest {
        tracking["spec"]["payloadDigest"] = json!(digest);
    }
    tracking
}

fn deletion_policy_text(policy: DeletionPolicy) -> &'static str {
    match policy {
        DeletionPolicy::Delete => "Delete",
        DeletionPolicy::Orphan => "Orphan",
    }
}

/// Makes the tracking object of `planned` (applied as `desired`) exist as it should; returns
/// whether it wrote.
/// A tracking object being deleted is left to its finalizer, which asks for a new round.
///
/// `existing` is the source's own tracking object; `adopt` says a tracking object without a
/// controller owner is there to take. Otherwise the tracking object is created, not applied:
/// two sources that declare one object in the same moment cannot both win it (the loser gets
/// `AlreadyExists`, and at its next round a management conflict).
pub async fn ensure(
    ctx: &Context,
    handle: &SourceHandle,
    planned: &PlannedObject,
    desired: &Value,
    existing: Option<&Tracked>,
    adopt: bool,
) -> Result<bool, ControllerError> {
    let content = TrackedContent::of(ctx, handle, desired);
    if let Some(existing) = existing
        && (existing.deleting() || is_current(existing, &content))
    {
        return Ok(false);
    }
    let desired = desired_tracking(handle, planned, content);
    let name = tracking_name(&planned.key);
    let create = existing.is_none() && !adopt;
    let (namespace, result) = match &planned.tracking {
        TrackingObject::GitTrackObject { namespace } => {
            let api: Api<GitTrackObject> = Api::namespaced(ctx.client.clone(), namespace);
            (
                Some(namespace.as_str()),
                write_tracking(&api, &name, &desired, create).await,
            )
        }
        TrackingObject::ClusterGitTrackObject => {
            let api: Api<ClusterGitTrackObject> = Api::all(ctx.client.clone());
            (None, write_tracking(&api, &name, &desired, create).await)
        }
    };
    let tracking = match &planned.tracking {
        TrackingObject::GitTrackObject { namespace } => {
            format!("GitTrackObject {namespace}/{name}")
        }
        TrackingObject::ClusterGitTrackObject => format!("ClusterGitTrackObject {name}"),
    };
    let object = format!("{tracking} of {}", super::notice::describe(&planned.key));
    let verb = if create { "create" } else { "apply" };
    let version = result.map_err(|source| ControllerError::kube(verb, object, source))?;
    ctx.tracking.wrote(namespace, &name, version.as_deref());
    Ok(true)
}

async fn write_tracking<K>(
    api: &Api<K>,
    name: &str,
    desired: &Value,
    create: bool,
) -> Result<Option<String>, kube::Error>
where
    K: Resource + Clone,
{
    // Only the resourceVersion of the reply is read: the rest is the declared object again.
    if create {
        skimmed_reply::create_versioned(api, desired).await
    } else {
        let params = PatchParams::apply(GITSYNC_FIELD_MANAGER).force();
        skimmed_reply::apply_versioned(api, name, &params, desired).await
    }
}

/// Whether `existing` already says `content` and carries gitsync's finalizer: checked without
/// building the tracking object, since in a round where nothing changed every object takes this
/// path.
fn is_current(existing: &Tracked, content: &TrackedContent<'_>) -> bool {
    let finalized = existing
        .meta()
        .finalizers
        .iter()
        .flatten()
        .any(|finalizer| finalizer == GITSYNC_FINALIZER);
    let (policy_key, policy) = &content.policy;
    let declaration = existing.declaration();
    finalized
        && existing.record().deletion_policy_annotation(policy_key) == Some(*policy)
        && declaration.data_digest == data_digest(&content.data)
        && declaration.payload_digest == content.payload_digest
}

/// Deletes a tracking object; its finalizer then decides about the live object.
pub async fn delete(ctx: &Context, tracked: &Tracked) -> Result<(), ControllerError> {
    // Only the tracking object that was read: one of the same name another source created
    // since (the read can be the watch's, which lags) is refused with 409, not deleted.
    let params = DeleteParams {
        preconditions: tracked.meta().uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    let namespace = tracked.namespace();
    let api = TrackingResource::in_namespace(namespace).api(ctx.client.clone(), namespace);
    // Answered with the object when a finalizer keeps it (then at a new resourceVersion), with
    // a status when it is gone.
    let result = api.delete(tracked.name(), &params).await.map(|answer| {
        answer
            .left()
            .and_then(|kept| kept.meta().resource_version.clone())
    });
    match result {
        Ok(Some(kept)) => {
            ctx.tracking.wrote(namespace, tracked.name(), Some(&kept));
            Ok(())
        }
        Ok(None) => {
            let before = tracked.meta().resource_version.as_deref();
            ctx.tracking.let_go(namespace, tracked.name(), before);
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ControllerError::kube(
            "delete tracking object",
            tracked.name(),
            source,
        )),
    }
}

/// A tracking object's controller ownerReference, whoever it names.
fn controller_reference(record: &TrackingRecord) -> Option<&OwnerReference> {
    record
        .owner_references()
        .iter()
        .find(|owner| owner.controller == Some(true))
}

/// The source that owns a tracking object, from its controller ownerReference when that names
/// one of Arbor's sources ([`OwningSourceKind::named_by`]: group and kind).
fn owner_source(record: &TrackingRecord) -> Option<(SourceRef, String)> {
    let owner = controller_reference(record)?;
    let arbor_group = GitTrack::group(&());
    let source = match OwningSourceKind::named_by(&arbor_group, &owner.api_version, &owner.kind)? {
        OwningSourceKind::GitTrack => SourceRef::GitTrack {
            namespace: record.meta().namespace.clone()?,
            name: owner.name.clone(),
        },
        OwningSourceKind::ClusterGitTrack => SourceRef::ClusterGitTrack {
            name: owner.name.clone(),
        },
    };
    Some((source, owner.uid.clone()))
}

/// Who manages the object `tracked` tracks, as a name and a uid: the Arbor source its
/// controller ownerReference names (`GitTrack/<namespace>/<name>`), or else whatever that
/// reference names (`<Kind>/<name> (<apiVersion>)`). Another project's controller is a holder
/// too: kube-apiserver allows one controller per object, so adopting the tracking object could
/// only fail, and the object it tracks is not Arbor's to overwrite.
pub fn manager(tracked: &Tracked) -> Option<(String, String)> {
    if let Some((source, uid)) = owner_source(tracked.record()) {
        return Some((source.to_string(), uid));
    }
    controller_reference(tracked.record()).map(|owner| {
        (
            format!("{}/{} ({})", owner.kind, owner.name, owner.api_version),
            owner.uid.clone(),
        )
    })
}

/// Where the source stands ([`SourceStanding::of`]). Only its metadata is read, so a source
/// whose spec does not decode still holds its objects.
async fn source_standing(
    ctx: &Context,
    source: &SourceRef,
    uid: &str,
) -> Result<SourceStanding, ControllerError> {
    let read = |source| ControllerError::kube("read source", "owner", source);
    let meta = match source {
        SourceRef::GitTrack { namespace, name } => {
            let api: Api<GitTrack> = Api::namespaced(ctx.client.clone(), namespace);
            api.get_metadata_opt(name)
                .await
                .map_err(read)?
                .map(|found| found.metadata)
        }
        SourceRef::ClusterGitTrack { name } => {
            let api: Api<ClusterGitTrack> = Api::all(ctx.client.clone());
            api.get_metadata_opt(name)
                .await
                .map_err(read)?
                .map(|found| found.metadata)
        }
    };
    let seen = meta.as_ref().map(|meta| SourceSeen {
        uid: meta.uid.as_deref(),
        deleting: meta.deletion_timestamp.is_some(),
        finalized: meta
            .finalizers
            .iter()
            .flatten()
            .any(|finalizer| finalizer == GITSYNC_FINALIZER),
    });
    Ok(SourceStanding::of(seen, uid))
}

/// Whether this instance finalizes `object`: it watches the tracking object's owner. A tracking
/// object that names no source, or no object it tracks, is finalized by every instance that
/// sees it, which only lets it go (the same patch, whoever sends it).
pub fn watched_owner(ctx: &Context, record: &TrackingRecord) -> bool {
    let owner = record.declaration().and_then(|_| owner_source(record));
    let Some((source, _)) = owner else {
        return true;
    };
    let owner = match &source {
        SourceRef::GitTrack { namespace, .. } => Owner::gittrack(namespace.clone()),
        SourceRef::ClusterGitTrack { .. } => Owner::ClusterGitTrack,
    };
    ctx.settings.scope.watches().watches_owner(&owner)
}

/// Whether sources other than `owner` declare `key`, and which ones ([`OtherSource`]): a round
/// of theirs on this instance that declared it (a declaration the ownership matrix refused, or
/// of a kind the source has no Sync for, cannot take an object over, so it does not keep one
/// either), or their status reporting a management conflict on it, whichever replica ran that
/// round, from `sources` (`None`: they could not be seen, and whether another declares the
/// object is unknown unless this instance's rounds say so).
pub fn others_declaring(
    ctx: &Context,
    owner: Option<&SourceRef>,
    key: &ObjectKey,
    sources: Option<&[CachedSource]>,
) -> (Elsewhere, Vec<SourceRef>) {
    let mut others: BTreeMap<SourceRef, OtherSource> = BTreeMap::new();
    let unknown = OtherSource {
        here: None,
        conflict_reported: false,
        deleting: false,
    };
    for (source, _, record) in ctx.registry.declarations(key) {
        if Some(&source) != owner {
            others.entry(source).or_insert(unknown).here = Some(record.state.may_manage());
        }
    }
    for source in sources.into_iter().flatten() {
        if Some(&source.reference) != owner {
            let other = others.entry(source.reference.clone()).or_insert(unknown);
            other.conflict_reported = source.reports_conflict_on(key);
            other.deleting = source.deleting();
        }
    }
    let elsewhere = Elsewhere::of(sources.is_some(), others.values().copied());
    let declaring = others
        .into_iter()
        .filter(|(_, other)| other.declares())
        .map(|(source, _)| source)
        .collect();
    (elsewhere, declaring)
}

/// Every source this instance watches, for [`others_declaring`]: `None` when they cannot be
/// listed (then whether another declares an object is unknown, and nothing is deleted).
pub async fn other_sources(ctx: &Context, freshness: Freshness) -> Option<Vec<CachedSource>> {
    match ctx.sources.all(&ctx.client, &ctx.settings, freshness).await {
        Ok(sources) => Some(sources),
        Err(error) => {
            tracing::warn!(%error, "cannot list the sources; whether another source declares an object is unknown, so nothing is deleted for now");
            None
        }
    }
}

/// The sources other than `owner` that declare `key` ([`others_declaring`]), from the source
/// caches as they are.
pub fn declared_elsewhere(
    ctx: &Context,
    owner: Option<&SourceRef>,
    key: &ObjectKey,
) -> Vec<SourceRef> {
    let cached = ctx.sources.cached(&ctx.settings);
    others_declaring(ctx, owner, key, cached.as_deref()).1
}

/// What the finalizer of one Terminating tracking object does
/// ([`finalize`](arbor_policy::sync::round::finalize)'s decision), and what it needs to carry
/// it out.
#[derive(Debug)]
pub struct Finalizing {
    /// `None` when the tracking object does not say what it tracks: it is let go and nothing
    /// else is touched.
    tracked: Option<Tracked>,
    decision: Finalize,
    owning: Option<SourceRef>,
    /// Other sources that declare the object.
    others: Vec<SourceRef>,
}

impl Finalizing {
    /// Decides for `record`, reading where its source stands.
    pub async fn decide(
        ctx: &Context,
        record: &Arc<TrackingRecord>,
    ) -> Result<Self, ControllerError> {
        let Some(tracked) = Tracked::of(record) else {
            tracing::warn!(tracking = %record.meta().name.as_deref().unwrap_or_default(), "a tracking object being deleted names no object it tracks (spec.kind, spec.name, spec.data): it is let go and nothing else is touched");
            return Ok(Self {
                tracked: None,
                decision: Finalize::Orphan,
                owning: None,
                others: Vec::new(),
            });
        };
        let owner = owner_source(tracked.record());
        let standing = match &owner {
            Some((source, uid)) => source_standing(ctx, source, uid).await?,
            None => SourceStanding::Unowned,
        };
        let alive = standing == SourceStanding::Alive;
        let owning = owner.map(|(source, _)| source);
        // Read in place: a prune finalizes every tracking object of a source, and a copy of
        // the source's record (one entry per declared object) for each was quadratic.
        let (still_declared, declarations_known) = owning
            .as_ref()
            .filter(|_| alive)
            .and_then(|source| {
                ctx.registry.view(source, |record| {
                    // The registry is this instance's: empty for a source until a round of
                    // it finishes here (after a restart, or a shard taken over from another
                    // replica).
                    (
                        record.objects.contains_key(tracked.key()),
                        record.good.is_some(),
                    )
                })
            })
            .unwrap_or((false, false));
        let orphan = tracked
            .record()
            .deletion_policy_annotation(&ctx.settings.keys.custom(DELETION_POLICY))
            .is_some_and(|policy| policy == "Orphan");
        let kind_declared = owning.as_ref().filter(|_| alive).and_then(|source| {
            ctx.registry
                .declares_inventory_kind(source, &tracked.key().group_kind)
        });
        let decide = |sources: Option<Vec<CachedSource>>| {
            let (elsewhere, others) =
                others_declaring(ctx, owning.as_ref(), tracked.key(), sources.as_deref());
            let decision = round::finalize(FinalizeInput {
                source: standing,
                still_declared,
                declared_elsewhere: elsewhere,
                orphan,
                kind_declared,
                declarations_known,
            });
            (decision, others)
        };
        // From the caches first; a decision that may delete is made again from a fresh list.
        let (mut decision, mut others) = decide(other_sources(ctx, Freshness::Cached).await);
        if let Some(fresh) = Freshness::Cached.to_confirm(decision.may_delete()) {
            (decision, others) = decide(other_sources(ctx, fresh).await);
        }
        Ok(Self {
            tracked: Some(tracked),
            decision,
            owning,
            others,
        })
    }

    /// Whether the finalizer waits: for a round of the owning source (its deletion, which plans
    /// every object together and removes this finalizer, or the first round here of a living
    /// source, without which its declarations are unknown), which it asks for, or until the
    /// other sources can be seen.
    pub fn waits(&self, ctx: &Context) -> bool {
        let for_a_round = matches!(
            self.decision,
            Finalize::WaitForSourceDeletion | Finalize::WaitForRound
        );
        if let (true, Some(source)) = (for_a_round, &self.owning) {
            ctx.registry.request_round(source);
        }
        for_a_round || self.decision == Finalize::WaitForOtherSources
    }

    /// Carries the decision out on the tracked object; the tracking object is let go after it.
    /// Returns the sources to ask for a round once it is gone.
    pub async fn carry_out(&self, ctx: &Context) -> Result<Vec<SourceRef>, ControllerError> {
        let Some(tracked) = &self.tracked else {
            return Ok(Vec::new());
        };
        Ok(match self.decision {
            Finalize::WaitForSourceDeletion
            | Finalize::WaitForRound
            | Finalize::WaitForOtherSources
            | Finalize::Orphan => Vec::new(),
            Finalize::ReleaseUnowned => {
                let message = format!(
                    "{} names no source as its controller (its source was deleted with \
                     propagationPolicy=Orphan, or the ownerReference was removed): it is let go and \
                     {} is left on the cluster, since nothing says it is Arbor's to delete",
                    tracked.name(),
                    super::notice::describe(tracked.key())
                );
                let notice = super::notice::Notice::warning("ReleasedUnowned", "Finalize", message);
                super::notice::publish(ctx, &tracked.regarding(), tracked.name(), &notice).await;
                self.others.clone()
            }
            Finalize::Recreate => self.owning.iter().cloned().collect(),
            Finalize::ReleaseToAnotherSource => {
                tracing::info!(object = %tracked.key(), declared_by = %self.others[0], "tracking object released to another source");
                self.others.clone()
            }
            Finalize::ApplyTable { sync_declared } => {
                remove_object(ctx, tracked, sync_declared).await?;
                Vec::new()
            }
        })
    }
}

/// Applies the action table to the object `tracked` tracks, with nothing declared for it:
/// deleted when it carries the management label (row 5) and `sync_declared`, left otherwise.
/// Returns whether it was deleted.
pub async fn remove_object(
    ctx: &Context,
    tracked: &Tracked,
    sync_declared: bool,
) -> Result<bool, ControllerError> {
    let compare = CompareFields::AllDeclared;
    let key = tracked.key();
    let target = Target {
        gvk: tracked.gvk(),
        namespace: key.namespace.as_deref(),
        name: &key.name,
        sync_declared,
        desired: None,
        compare: &compare,
    };
    match ctx.applier.live(&target).await {
        Ok(live) => {
            let outcome = ctx.applier.sync_object(&target, live.as_ref()).await?;
            tracing::info!(object = %key, row = outcome.decision.row.number(), action = %outcome.decision.action, "tracking object finalized");
            if outcome.wrote
                && let Some((source, uid)) = owner_source(tracked.record())
            {
                let why = format!(
                    "its tracking object {} was deleted (seeds/000 row {}: {})",
                    tracked.name(),
                    outcome.decision.row.number(),
                    outcome.decision.row.reason()
                );
                let object = super::notice::describe(key);
                super::notice::deleted(ctx, &source, &uid, &object, &why).await;
            }
            Ok(outcome.decision.action == Action::Delete)
        }
        // Nothing of an unserved kind can be on the cluster.
        Err(ApplyError::KindNotServed { .. }) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Lets a tracking object go without touching the object it tracks.
pub async fn release(ctx: &Context, tracked: &Tracked) -> Result<(), ControllerError> {
    remove_finalizer(ctx, tracked.name(), tracked.meta()).await?;
    delete(ctx, tracked).await
}

/// The JSON patch that removes gitsync's finalizer from an object with `meta`, and only it: it
/// tests the entry before removing it, so it needs no resourceVersion (a status written
/// meanwhile costs no conflict) and never drops a finalizer someone else added. `None` when
/// the finalizer is not there.
pub fn finalizer_removal(meta: &ObjectMeta) -> Option<json_patch::Patch> {
    let index = meta
        .finalizers
        .iter()
        .flatten()
        .position(|finalizer| finalizer == GITSYNC_FINALIZER)?;
    let patch = serde_json::from_value(json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": GITSYNC_FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]))
    .expect("a well-formed JSON patch");
    Some(patch)
}

/// Removes gitsync's finalizer from a tracking object, and only it: a JSON patch that tests the entry before removing
/// it, so a finalizer added meanwhile by someone else is kept and a stale copy of the object
/// costs no conflict.
pub async fn remove_finalizer(
    ctx: &Context,
    name: &str,
    meta: &ObjectMeta,
) -> Result<(), ControllerError> {
    let Some(patch) = finalizer_removal(meta) else {
        return Ok(());
    };
    let namespace = meta.namespace.as_deref();
    let api = TrackingResource::in_namespace(namespace).api(ctx.client.clone(), namespace);
    let result = api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(drop);
    match result {
        Ok(()) => {
            let before = meta.resource_version.as_deref();
            ctx.tracking.let_go(meta.namespace.as_deref(), name, before);
            Ok(())
        }
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
