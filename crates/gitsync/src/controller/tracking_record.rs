//! Tracking objects as this replica holds them: one compact record per GitTrackObject or
//! ClusterGitTrackObject, read straight from the API server's JSON.
//!
//! ## Model
//!
//! gitsync holds every tracking object it sees in memory (the finalizer's watches, which are also
//! the rounds' inventories: [`tracking_store`](super::tracking_store)), so what one copy costs
//! is multiplied by every object the sources declare. A [`TrackingRecord`] keeps only what the
//! decisions read:
//!
//! - from `metadata`: name, namespace, uid, resourceVersion, deletionTimestamp, finalizers,
//!   ownerReferences (who holds it, and the shard of its source) and the deletion-policy
//!   annotation (what its finalizer does once the source is gone). The last two are the same
//!   for every tracking object of a source, so they are kept beside the metadata as one copy
//!   shared by those records ([`shared_values`](super::shared_values)), and read through
//!   [`TrackingRecord::owner_references`] and [`TrackingRecord::deletion_policy_annotation`];
//! - from `spec`: the tracked object's identity (its key and group/version/kind), the digest of
//!   the whole of `spec.data` (a round only asks whether the tracking object already says what it
//!   would write, [`data_digest`]) and a Secret's payload digest;
//! - from `status`: the conditions (a round writes `ObjectInSync` only when it says something
//!   the stored ones do not; a healthy tracking object has none).
//!
//! Its deserializer skips everything else as it reads (`managedFields`, the declared object's
//! content, which it digests on the way), so no JSON tree of the object is ever built. It is a
//! [`kube::Resource`] whose dynamic type is the [`TrackingResource`] (which of the two kinds), so
//! kube-runtime's watcher, reflector and controller, and `Api` lists and patches, use it as any
//! kind.
//!
//! A tracking object whose `spec` or `status` does not have the CRD's shape (stored through a
//! loose schema) still decodes: the record names the field that does not fit
//! ([`TrackingRecord::unreadable`]), so that object is reported and skipped and the watch goes on
//! with the others, as a typed watch could not.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use arbor_api::{ClusterGitTrackObject, GitTrackObject, GitTrackObjectStatus};
use arbor_policy::object::{GroupVersionKind, ObjectKey, gvk};
use arbor_runtime::decode::{DecodeError, api_resource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::api::{Api, DynamicObject};
use kube::core::DynamicResourceScope;
use kube::discovery::ApiResource;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::shared_values::SharedValues;
use super::tracking::DELETION_POLICY;

/// Which of the two tracking kinds a [`TrackingRecord`] is: its [`Resource::DynamicType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrackingResource {
    GitTrackObject,
    ClusterGitTrackObject,
}

impl TrackingResource {
    /// The kind of a tracking object in `namespace` (cluster-scoped without one; an empty
    /// namespace is none, as the API server reads it).
    pub fn in_namespace(namespace: Option<&str>) -> Self {
        match namespace {
            Some(namespace) if !namespace.is_empty() => Self::GitTrackObject,
            _ => Self::ClusterGitTrackObject,
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Self::GitTrackObject => "GitTrackObject",
            Self::ClusterGitTrackObject => "ClusterGitTrackObject",
        }
    }

    /// The kind as kube-rs names resources (Events, dynamic APIs).
    pub fn api_resource(self) -> ApiResource {
        match self {
            Self::GitTrackObject => api_resource::<GitTrackObject>(),
            Self::ClusterGitTrackObject => api_resource::<ClusterGitTrackObject>(),
        }
    }

    /// The API of tracking records of this kind in `namespace` (every namespace without one;
    /// cluster-wide for ClusterGitTrackObjects).
    pub fn api(self, client: kube::Client, namespace: Option<&str>) -> Api<TrackingRecord> {
        match (self, namespace) {
            (Self::GitTrackObject, Some(namespace)) => {
                Api::namespaced_with(client, namespace, &self)
            }
            _ => Api::all_with(client, &self),
        }
    }
}

/// One tracking object, cut down to what gitsync's decisions read (see the module docs).
#[derive(Debug, Clone)]
pub struct TrackingRecord {
    /// Only name, namespace, uid, resourceVersion, deletionTimestamp and finalizers are kept
    /// here; the ownerReferences and the deletion-policy annotation are beside it, shared.
    metadata: ObjectMeta,
    /// `metadata.ownerReferences`: the same for every tracking object of a source, so one
    /// copy is shared ([`shared_values`](super::shared_values)).
    owners: Arc<[OwnerReference]>,
    /// The deletion-policy annotations (`<key domain>/deletion-policy`, whatever the domain,
    /// with their values), shared likewise; no decision reads any other annotation.
    deletion_policy: Arc<[(String, String)]>,
    reading: Reading,
}

/// The ownerReferences of the records seen lately.
static OWNERS: SharedValues<[OwnerReference]> = SharedValues::new();
/// The deletion-policy annotations of the records seen lately.
static DELETION_POLICIES: SharedValues<[(String, String)]> = SharedValues::new();

#[derive(Debug, Clone)]
enum Reading {
    /// It says what it tracks.
    Declares(Arc<Declaration>),
    /// It reads, but names no object it tracks (`spec.data` without apiVersion, kind or name).
    NamesNothing,
    /// A field does not have the CRD's shape.
    Unreadable(Box<Unreadable>),
}

/// What a tracking object says about the object it tracks.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The tracked object's key; its namespace is the tracking object's.
    pub key: ObjectKey,
    pub gvk: GroupVersionKind,
    /// The digest of the whole of `spec.data`.
    pub data_digest: DataDigest,
    /// The digest of a Secret's payload (`spec.payloadDigest`).
    pub payload_digest: Option<String>,
    /// The stored status conditions.
    pub conditions: Vec<Condition>,
}

/// A field of a tracking object that does not have the CRD's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unreadable {
    /// As a JSON path (`spec.name`); `.` for the object.
    path: String,
    message: String,
}

impl TrackingRecord {
    /// What the tracking object says it tracks; `None` when it names nothing or does not read.
    pub fn declaration(&self) -> Option<&Arc<Declaration>> {
        match &self.reading {
            Reading::Declares(declaration) => Some(declaration),
            Reading::NamesNothing | Reading::Unreadable(_) => None,
        }
    }

    /// The field that does not have the CRD's shape, as the error reporting it.
    pub fn unreadable(&self) -> Option<DecodeError> {
        let Reading::Unreadable(unreadable) = &self.reading else {
            return None;
        };
        let name = self.metadata.name.as_deref().unwrap_or_default();
        Some(DecodeError {
            kind: self.resource().kind().to_owned(),
            object: match self.metadata.namespace.as_deref() {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name.to_owned(),
            },
            path: unreadable.path.clone(),
            message: unreadable.message.clone(),
        })
    }

    /// `metadata.ownerReferences` (kept beside the metadata, not in it).
    pub fn owner_references(&self) -> &[OwnerReference] {
        &self.owners
    }

    /// The value of annotation `key` when it is a deletion-policy annotation (the only ones
    /// kept); `None` otherwise.
    pub fn deletion_policy_annotation(&self, key: &str) -> Option<&str> {
        // The last, as a map of the annotations would hold a key given twice.
        self.deletion_policy
            .iter()
            .rev()
            .find(|(kept, _)| kept == key)
            .map(|(_, value)| value.as_str())
    }

    /// Which kind it is: tracking objects in a namespace are GitTrackObjects.
    pub fn resource(&self) -> TrackingResource {
        TrackingResource::in_namespace(self.metadata.namespace.as_deref())
    }

    /// Its metadata as a dynamic object with nothing else, for reports that name it.
    pub fn as_dynamic(&self) -> DynamicObject {
        DynamicObject {
            types: None,
            metadata: self.metadata.clone(),
            data: Value::Null,
        }
    }

    /// The resourceVersion as the revision it is.
    pub fn version(&self) -> Option<u64> {
        self.metadata.resource_version.as_deref()?.parse().ok()
    }
}

impl Resource for TrackingRecord {
    type DynamicType = TrackingResource;
    type Scope = DynamicResourceScope;

    fn kind(resource: &TrackingResource) -> Cow<'_, str> {
        match resource {
            TrackingResource::GitTrackObject => GitTrackObject::kind(&()),
            TrackingResource::ClusterGitTrackObject => ClusterGitTrackObject::kind(&()),
        }
    }

    fn group(resource: &TrackingResource) -> Cow<'_, str> {
        match resource {
            TrackingResource::GitTrackObject => GitTrackObject::group(&()),
            TrackingResource::ClusterGitTrackObject => ClusterGitTrackObject::group(&()),
        }
    }

    fn version(resource: &TrackingResource) -> Cow<'_, str> {
        match resource {
            TrackingResource::GitTrackObject => GitTrackObject::version(&()),
            TrackingResource::ClusterGitTrackObject => ClusterGitTrackObject::version(&()),
        }
    }

    fn plural(resource: &TrackingResource) -> Cow<'_, str> {
        match resource {
            TrackingResource::GitTrackObject => GitTrackObject::plural(&()),
            TrackingResource::ClusterGitTrackObject => ClusterGitTrackObject::plural(&()),
        }
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A SHA-256 of a JSON value written canonically: object keys sorted at every depth, so two
/// equal values have one digest whatever order their keys came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataDigest([u8; 32]);

impl DataDigest {
    fn of(canonical: &[u8]) -> Self {
        let mut bytes = [0; 32];
        bytes.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, canonical).as_ref());
        Self(bytes)
    }
}

/// The digest of `value` (a tracking object's `spec.data` as gitsync would write it): the same
/// canonical form the records' deserializer digests from the wire.
pub fn data_digest(value: &Value) -> DataDigest {
    // A `Value` is always some JSON value, and every JSON value has a canonical form.
    let canonical = Canonical::deserialize(value).expect("every JSON value has a canonical form");
    DataDigest::of(&canonical.0)
}

// ---- Reading the wire -------------------------------------------------------------------------

impl<'de> Deserialize<'de> for TrackingRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RecordVisitor)
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum TopField {
    Metadata,
    Spec,
    Status,
    #[serde(other)]
    Other,
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = TrackingRecord;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a GitTrackObject or ClusterGitTrackObject")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TrackingRecord, A::Error> {
        let mut metadata: Option<Metadata> = None;
        let mut spec: Option<Spec> = None;
        let mut status: Option<Value> = None;
        while let Some(field) = map.next_key::<TopField>()? {
            match field {
                TopField::Metadata => metadata = Some(map.next_value()?),
                TopField::Spec => spec = Some(map.next_value()?),
                // Present only once a condition was written (rarely): read whole, then typed.
                TopField::Status => status = Some(map.next_value()?),
                TopField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let Metadata {
            name,
            namespace,
            uid,
            resource_version,
            deletion_timestamp,
            finalizers,
            owner_references,
            deletion_policy,
        } = metadata.unwrap_or_default();
        let metadata = ObjectMeta {
            name,
            // `""` is the API server's "no namespace": kept as such, it would make a
            // ClusterGitTrackObject read as a GitTrackObject in namespace "".
            namespace: namespace.filter(|namespace| !namespace.is_empty()),
            uid,
            resource_version,
            deletion_timestamp,
            finalizers,
            ..ObjectMeta::default()
        };
        let owners = OWNERS.share(owner_references.unwrap_or_default());
        let deletion_policy = DELETION_POLICIES.share(deletion_policy);
        let reading = match spec {
            None => Reading::unreadable(".", "missing field `spec`".to_owned()),
            Some(Spec {
                problem: Some(problem),
                ..
            }) => Reading::Unreadable(Box::new(problem)),
            Some(spec) => match status.map(conditions).transpose() {
                Err(problem) => Reading::Unreadable(Box::new(problem)),
                Ok(conditions) => spec.declaration(
                    metadata.namespace.as_deref(),
                    conditions.unwrap_or_default(),
                ),
            },
        };
        Ok(TrackingRecord {
            metadata,
            owners,
            deletion_policy,
            reading,
        })
    }
}

impl Reading {
    fn unreadable(path: &str, message: String) -> Self {
        Self::Unreadable(Box::new(Unreadable {
            path: path.to_owned(),
            message,
        }))
    }
}

/// The stored conditions, decoded as the CRD's status type. A null status or null conditions
/// are none (the typed kind read them so), not a status that does not read.
fn conditions(mut status: Value) -> Result<Vec<Condition>, Unreadable> {
    if let Some(fields) = status.as_object_mut()
        && fields.get("conditions").is_some_and(Value::is_null)
    {
        fields.remove("conditions");
    }
    if status.is_null() {
        return Ok(Vec::new());
    }
    serde_path_to_error::deserialize::<_, GitTrackObjectStatus>(status)
        .map(|status| status.conditions)
        .map_err(|error| Unreadable {
            path: format!("status.{}", error.path()),
            message: error.into_inner().to_string(),
        })
}

/// The metadata fields a record keeps; the rest (managedFields above all) is skipped unread.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(
        default,
        rename = "annotations",
        deserialize_with = "deletion_policy_only"
    )]
    deletion_policy: Vec<(String, String)>,
}

/// Of the annotations, only the deletion policy (`<key domain>/deletion-policy`, whatever the
/// domain): no decision reads any other.
fn deletion_policy_only<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<(String, String)>, D::Error> {
    struct Annotations;

    impl<'de> Visitor<'de> for Annotations {
        type Value = Vec<(String, String)>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("annotations")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_map(self)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                let policy = key
                    .rsplit_once('/')
                    .is_some_and(|(_, name)| name == DELETION_POLICY);
                if policy {
                    let value = map.next_value::<String>()?;
                    kept.push((key, value));
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }

    deserializer.deserialize_option(Annotations)
}

/// `spec` as read: the fields of `DeclaredObject`, each checked for its type as the typed kind
/// would check it, without failing the read.
#[derive(Default)]
struct Spec {
    name: bool,
    kind: bool,
    /// The canonical form's digest and the identity of `spec.data`.
    data: Option<(DataDigest, Value)>,
    payload_digest: Option<String>,
    /// The first field that does not fit, in the order read.
    problem: Option<Unreadable>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum SpecField {
    Name,
    Kind,
    Data,
    PayloadDigest,
    #[serde(other)]
    Other,
}

impl Spec {
    fn misfit(&mut self, field: &str, problem: Option<String>) {
        if let (None, Some(message)) = (&self.problem, problem) {
            self.problem = Some(Unreadable {
                path: format!("spec.{field}"),
                message,
            });
        }
    }

    /// What the tracking object (in `namespace`) says it tracks.
    fn declaration(self, namespace: Option<&str>, conditions: Vec<Condition>) -> Reading {
        let Some((data_digest, identity)) = self.data else {
            return Reading::NamesNothing;
        };
        let (Ok(mut key), Ok(gvk)) = (ObjectKey::of(&identity), gvk(&identity)) else {
            return Reading::NamesNothing;
        };
        // A GitTrackObject's object is in the tracking object's namespace; a
        // ClusterGitTrackObject's is cluster-scoped.
        key.namespace = namespace.map(Into::into);
        Reading::Declares(Arc::new(Declaration {
            key,
            gvk,
            data_digest,
            payload_digest: self.payload_digest,
            conditions,
        }))
    }
}

impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SpecVisitor)
    }
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = Spec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tracking object's spec")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Spec, A::Error> {
        let mut spec = Spec::default();
        while let Some(field) = map.next_key::<SpecField>()? {
            match field {
                SpecField::Name => {
                    let name = map.next_value::<Text>()?;
                    spec.name = name.0.is_ok();
                    spec.misfit("name", name.0.err());
                }
                SpecField::Kind => {
                    let kind = map.next_value::<Text>()?;
                    spec.kind = kind.0.is_ok();
                    spec.misfit("kind", kind.0.err());
                }
                SpecField::Data => {
                    let data = map.next_value::<Data>()?;
                    spec.data = Some((DataDigest::of(&data.canonical), data.identity));
                }
                SpecField::PayloadDigest => match map.next_value::<Option<Text>>()? {
                    Some(Text(Ok(digest))) => spec.payload_digest = Some(digest),
                    Some(Text(Err(message))) => spec.misfit("payloadDigest", Some(message)),
                    None => {}
                },
                SpecField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        for (field, present) in [
            ("name", spec.name),
            ("kind", spec.kind),
            ("data", spec.data.is_some()),
        ] {
            if !present && spec.problem.is_none() {
                spec.problem = Some(Unreadable {
                    path: "spec".into(),
                    message: format!("missing field `{field}`"),
                });
            }
        }
        Ok(spec)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Spec, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Spec::misread(de::Unexpected::Seq, &self))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Spec, E> {
        Ok(Spec::misread(de::Unexpected::Str(text), &self))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Spec, E> {
        Ok(Spec::misread(de::Unexpected::Bool(value), &self))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Spec, E> {
        Ok(Spec::misread(de::Unexpected::Signed(value), &self))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Spec, E> {
        Ok(Spec::misread(de::Unexpected::Unsigned(value), &self))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Spec, E> {
        Ok(Spec::misread(de::Unexpected::Float(value), &self))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Spec, E> {
        Ok(Spec::misread(de::Unexpected::Unit, &self))
    }
}

impl Spec {
    /// A `spec` that is not an object at all.
    fn misread(found: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self {
            problem: Some(Unreadable {
                path: "spec".into(),
                message: invalid_type(found, expected),
            }),
            ..Self::default()
        }
    }
}

/// serde's words for a value of the wrong type.
fn invalid_type(found: de::Unexpected<'_>, expected: &dyn de::Expected) -> String {
    <serde_json::Error as de::Error>::invalid_type(found, expected).to_string()
}

/// A string field, or what was found instead of a string.
struct Text(Result<String, String>);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl TextVisitor {
    fn instead(&self, found: de::Unexpected<'_>) -> Text {
        Text(Err(invalid_type(found, self)))
    }
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
        Ok(Text(Ok(text.to_owned())))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Text, E> {
        Ok(Text(Ok(text)))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Text, E> {
        Ok(self.instead(de::Unexpected::Bool(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Text, E> {
        Ok(self.instead(de::Unexpected::Signed(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Text, E> {
        Ok(self.instead(de::Unexpected::Unsigned(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Text, E> {
        Ok(self.instead(de::Unexpected::Float(value)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(self.instead(de::Unexpected::Unit))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(self.instead(de::Unexpected::Seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(self.instead(de::Unexpected::Map))
    }
}

/// `spec.data` as read: its canonical form (to digest) and its identity (apiVersion, kind,
/// metadata.name and metadata.namespace, where they are strings).
struct Data {
    canonical: Vec<u8>,
    identity: Value,
}

impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let canonical = Canonical::deserialize(deserializer)?;
        let identity = identity(&canonical.1);
        Ok(Self {
            canonical: canonical.0,
            identity,
        })
    }
}

/// The identity of a declared object from its top-level entries in canonical form.
fn identity(entries: &[(String, Vec<u8>)]) -> Value {
    let entry = |name: &str| {
        entries
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_slice())
    };
    let text = |canonical: &[u8]| serde_json::from_slice::<Text>(canonical).ok()?.0.ok();
    let mut identity = serde_json::Map::new();
    for field in ["apiVersion", "kind"] {
        if let Some(value) = entry(field).and_then(text) {
            identity.insert(field.to_owned(), Value::String(value));
        }
    }
    let mut metadata = serde_json::Map::new();
    if let Some(Ok(named)) = entry("metadata").map(serde_json::from_slice::<Named>) {
        for (field, value) in [("name", named.name), ("namespace", named.namespace)] {
            if let Some(Text(Ok(value))) = value {
                metadata.insert(field.to_owned(), Value::String(value));
            }
        }
    }
    identity.insert("metadata".to_owned(), Value::Object(metadata));
    Value::Object(identity)
}

/// A declared object's name and namespace, whatever else its metadata holds.
#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    name: Option<Text>,
    #[serde(default)]
    namespace: Option<Text>,
}

/// A JSON value written canonically as it is read: object keys sorted at every depth (a key
/// given twice counts once, the last, as in a parsed `Value`), no whitespace, scalars as
/// `serde_json` writes them. With the top level's entries when it is an object.
#[derive(Default)]
struct Canonical(Vec<u8>, Entries);

type Entries = Vec<(String, Vec<u8>)>;

impl Canonical {
    fn scalar(value: &impl serde::Serialize) -> Self {
        // Writing a scalar into memory cannot fail.
        Self(serde_json::to_vec(value).unwrap_or_default(), Vec::new())
    }
}

impl<'de> Deserialize<'de> for Canonical {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CanonicalVisitor)
    }
}

struct CanonicalVisitor;

impl<'de> Visitor<'de> for CanonicalVisitor {
    type Value = Canonical;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Canonical, E> {
        Ok(Canonical::scalar(&value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Canonical, E> {
        Ok(Canonical::scalar(&value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Canonical, E> {
        Ok(Canonical::scalar(&value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Canonical, E> {
        // The API server stores custom resources as Go's unstructured values, which write a
        // float with no fractional part (`1.0`, `1e3` from YAML) as the integer (`1`, `1000`):
        // digested as that integer, the declared value and the stored one agree.
        const TWO_63: f64 = 9_223_372_036_854_775_808.0;
        if value.fract() == 0.0 {
            if (-TWO_63..TWO_63).contains(&value) {
                return Ok(Canonical::scalar(&(value as i64)));
            }
            if (0.0..2.0 * TWO_63).contains(&value) {
                return Ok(Canonical::scalar(&(value as u64)));
            }
        }
        // As a parsed `Value` holds it: a number that is not finite is null.
        Ok(match serde_json::Number::from_f64(value) {
            Some(number) => Canonical::scalar(&number),
            None => Canonical::scalar(&()),
        })
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Canonical, E> {
        Ok(Canonical::scalar(&text))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Canonical, E> {
        Ok(Canonical::scalar(&()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Canonical, E> {
        Ok(Canonical::scalar(&()))
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Canonical, D::Error> {
        Canonical::deserialize(inner)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Canonical, A::Error> {
        let mut out = vec![b'['];
        let mut first = true;
        while let Some(item) = seq.next_element::<Canonical>()? {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&item.0);
        }
        out.push(b']');
        Ok(Canonical(out, Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Canonical, A::Error> {
        let mut entries: Entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<Canonical>()?;
            entries.push((key, value.0));
        }
        // Stable: a key given twice keeps its order of arrival, and the last one given stays.
        entries.sort_by(|(a, _), (b, _)| a.cmp(b));
        entries.dedup_by(|later, kept| {
            let repeated = later.0 == kept.0;
            if repeated {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            repeated
        });
        let mut out = vec![b'{'];
        for (index, (key, value)) in entries.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&Canonical::scalar(key).0);
            out.push(b':');
            out.extend_from_slice(value);
        }
        out.push(b'}');
        Ok(Canonical(out, entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(value: Value) -> TrackingRecord {
        serde_json::from_slice(&serde_json::to_vec(&value).unwrap()).unwrap()
    }

    fn declared() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "elsewhere", "labels": {"a": "b"}},
            "data": {"big": "x".repeat(1000), "n": [1, -2, 2.5, 1e300, true, null]},
        })
    }

    #[test]
    fn equal_values_have_one_digest_whatever_their_key_order() {
        let a = json!({"kind": "ConfigMap", "data": {"a": "1", "b": [1, {"y": 2, "x": 1}]}});
        let b = json!({"data": {"b": [1, {"x": 1, "y": 2}], "a": "1"}, "kind": "ConfigMap"});
        assert_eq!(data_digest(&a), data_digest(&b));
        let c = json!({"kind": "ConfigMap", "data": {"a": "1", "b": [{"x": 1, "y": 2}, 1]}});
        assert_ne!(data_digest(&a), data_digest(&c), "array order counts");
        assert_eq!(
            data_digest(&json!({"a": 1})),
            data_digest(&json!({"a": 1.0})),
            "the API server writes 1.0 as 1"
        );
        assert_ne!(
            data_digest(&json!({"a": 1})),
            data_digest(&json!({"a": 1.5}))
        );
        assert_ne!(
            data_digest(&json!({"a": "1"})),
            data_digest(&json!({"a": 1}))
        );
    }

    #[test]
    fn the_digest_read_from_the_wire_is_the_digest_of_the_value() {
        for data in [
            declared(),
            json!({"é": "\u{1F600}\n\"", "a": {"z": [], "y": {}}, "m": -0.0, "big": u64::MAX}),
            json!([1, "two", null, {"b": 1, "a": 2}]),
            json!("text"),
            json!(-3),
        ] {
            let read: Data = serde_json::from_str(&data.to_string()).unwrap();
            assert_eq!(
                DataDigest::of(&read.canonical),
                data_digest(&data),
                "{data}"
            );
        }
        let twice: Data = serde_json::from_str(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        assert_eq!(
            DataDigest::of(&twice.canonical),
            data_digest(&json!({"a": 3, "b": 2})),
            "a key given twice counts once, the last, as a parsed value holds it"
        );
    }

    #[test]
    fn records_of_one_source_share_its_owner_reference_and_deletion_policy() {
        let of_apps = |name: &str| {
            record(json!({
                "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrackObject",
                "metadata": {
                    "name": name, "namespace": "shop",
                    "annotations": {"arbor.dev/deletion-policy": "Delete"},
                    "ownerReferences": [{"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                                         "name": "apps", "uid": "s-1", "controller": true}],
                },
                "spec": {"name": name, "kind": "ConfigMap", "data": declared()},
            }))
        };
        let (a, b) = (of_apps("a"), of_apps("b"));
        assert!(Arc::ptr_eq(&a.owners, &b.owners));
        assert!(Arc::ptr_eq(&a.deletion_policy, &b.deletion_policy));
        assert_eq!(
            b.deletion_policy_annotation("arbor.dev/deletion-policy"),
            Some("Delete")
        );
    }

    #[test]
    fn a_record_keeps_what_the_decisions_read_and_nothing_else() {
        let read = record(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrackObject",
            "metadata": {
                "name": "configmap.settings", "namespace": "shop", "uid": "u-1",
                "resourceVersion": "42", "generation": 3,
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "finalizers": ["arbor.dev/gitsync"],
                "labels": {"team": "a"},
                "annotations": {"arbor.dev/deletion-policy": "Orphan", "note": "x"},
                "ownerReferences": [{"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                                     "name": "apps", "uid": "s-1", "controller": true}],
                "managedFields": [{"manager": "arbor-gitsync", "operation": "Apply"}],
            },
            "spec": {"name": "settings", "kind": "ConfigMap", "data": declared(),
                     "payloadDigest": "hmac-sha256:00"},
            "status": {"conditions": [{"type": "ObjectInSync", "status": "False",
                                       "reason": "Drifted", "message": "m",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }));
        let meta = read.meta();
        assert_eq!(meta.name.as_deref(), Some("configmap.settings"));
        assert_eq!(meta.uid.as_deref(), Some("u-1"));
        assert_eq!(read.version(), Some(42));
        assert!(meta.deletion_timestamp.is_some());
        assert_eq!(meta.finalizers, Some(vec!["arbor.dev/gitsync".to_owned()]));
        assert_eq!(read.owner_references().len(), 1);
        assert_eq!(read.owner_references()[0].uid, "s-1");
        assert_eq!(
            read.deletion_policy_annotation("arbor.dev/deletion-policy"),
            Some("Orphan")
        );
        assert_eq!(read.deletion_policy_annotation("note"), None);
        assert!(
            meta.labels.is_none()
                && meta.managed_fields.is_none()
                && meta.generation.is_none()
                && meta.annotations.is_none()
                && meta.owner_references.is_none(),
            "the metadata holds only what is read from it; the rest is beside it, shared"
        );
        let declaration = read.declaration().expect("it says what it tracks");
        assert_eq!(declaration.key.to_string(), "ConfigMap/shop/settings");
        assert_eq!(declaration.gvk.version, "v1");
        assert_eq!(declaration.data_digest, data_digest(&declared()));
        assert_eq!(
            declaration.payload_digest.as_deref(),
            Some("hmac-sha256:00")
        );
        assert_eq!(declaration.conditions[0].reason, "Drifted");
        assert!(read.unreadable().is_none());
        assert_eq!(read.resource(), TrackingResource::GitTrackObject);
    }

    #[test]
    fn a_cluster_scoped_record_tracks_a_cluster_scoped_object() {
        let read = record(json!({
            "metadata": {"name": "namespace.shop"},
            "spec": {"name": "shop", "kind": "Namespace",
                     "data": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}},
        }));
        let declaration = read.declaration().unwrap();
        assert_eq!(declaration.key.namespace, None);
        assert_eq!(read.resource(), TrackingResource::ClusterGitTrackObject);
    }

    #[test]
    fn a_field_of_the_wrong_shape_is_named_and_the_record_still_reads() {
        let read = record(json!({
            "metadata": {"name": "configmap.stray", "namespace": "foo"},
            "spec": {"name": 5, "kind": ["ConfigMap"]},
        }));
        let error = read.unreadable().expect("spec.name is not a string");
        assert_eq!(error.path, "spec.name");
        assert_eq!(error.object, "foo/configmap.stray");
        assert_eq!(error.kind, "GitTrackObject");
        assert!(error.message.contains("expected a string"), "{error}");
        assert!(read.declaration().is_none());

        let missing = record(json!({"metadata": {"name": "a", "namespace": "foo"},
                                    "spec": {"name": "a", "kind": "ConfigMap"}}));
        assert_eq!(
            missing.unreadable().unwrap().message,
            "missing field `data`"
        );
        let bad_status = record(json!({
            "metadata": {"name": "a", "namespace": "foo"},
            "spec": {"name": "a", "kind": "ConfigMap", "data": declared()},
            "status": {"conditions": [{"type": "ObjectInSync"}]},
        }));
        assert!(
            bad_status
                .unreadable()
                .unwrap()
                .path
                .starts_with("status.conditions")
        );
        let not_an_object = record(json!({"metadata": {"name": "a"}, "spec": "text"}));
        assert_eq!(not_an_object.unreadable().unwrap().path, "spec");
    }

    #[test]
    fn a_record_that_names_no_object_reads_but_declares_nothing() {
        let read = record(json!({
            "metadata": {"name": "a", "namespace": "foo"},
            "spec": {"name": "a", "kind": "ConfigMap", "data": {"kind": "ConfigMap"}},
        }));
        assert!(read.unreadable().is_none());
        assert!(read.declaration().is_none());
    }

    fn tracking_object(extra: Value) -> Value {
        let mut object = json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrackObject",
            "metadata": {"name": "configmap.settings", "namespace": "shop", "uid": "u-1",
                         "resourceVersion": "7", "finalizers": ["arbor.dev/gitsync"]},
            "spec": {"name": "settings", "kind": "ConfigMap", "data": declared()},
        });
        for (field, value) in extra.as_object().unwrap() {
            object[field] = value.clone();
        }
        object
    }

    #[test]
    fn a_null_status_or_null_conditions_are_no_conditions() {
        for status in [json!(null), json!({"conditions": null}), json!({})] {
            let read = record(tracking_object(json!({"status": status})));
            assert!(
                read.unreadable().is_none(),
                "{status}: {:?}",
                read.unreadable()
            );
            assert!(
                read.declaration().unwrap().conditions.is_empty(),
                "{status}"
            );
        }
        let wrong = record(tracking_object(json!({"status": {"conditions": "none"}})));
        assert_eq!(wrong.unreadable().unwrap().path, "status.conditions");
    }

    #[test]
    fn an_empty_namespace_is_no_namespace() {
        let read = record(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "ClusterGitTrackObject",
            "metadata": {"name": "namespace.shop", "namespace": ""},
            "spec": {"name": "shop", "kind": "Namespace",
                     "data": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}},
        }));
        assert_eq!(read.resource(), TrackingResource::ClusterGitTrackObject);
        assert_eq!(read.meta().namespace, None);
        assert_eq!(read.declaration().unwrap().key.namespace, None);
        assert_eq!(
            TrackingResource::in_namespace(Some("")),
            TrackingResource::ClusterGitTrackObject
        );
    }

    #[test]
    fn a_whole_float_is_digested_as_the_integer_the_api_server_stores() {
        let declared = json!({"replicas": 1.0, "limit": 1e3, "big": 1e19, "neg": -2.0});
        let stored = r#"{"replicas": 1, "limit": 1000, "big": 10000000000000000000, "neg": -2}"#;
        let read: Data = serde_json::from_str(stored).unwrap();
        assert_eq!(DataDigest::of(&read.canonical), data_digest(&declared));
        for (declared, stored) in [(2.5, "2.5"), (1e300, "1e300")] {
            let read: Data = serde_json::from_str(stored).unwrap();
            assert_eq!(
                DataDigest::of(&read.canonical),
                data_digest(&json!(declared)),
                "{stored}"
            );
        }
        assert_ne!(data_digest(&json!(2.5)), data_digest(&json!(2)));
    }

    #[test]
    fn of_a_key_given_many_times_the_last_counts() {
        let read: Data =
            serde_json::from_str(r#"{"b": 1, "a": 1, "a": 2, "c": 0, "a": 3, "b": 4, "c": 5}"#)
                .unwrap();
        assert_eq!(
            String::from_utf8(read.canonical).unwrap(),
            r#"{"a":3,"b":4,"c":5}"#
        );
    }

    #[test]
    fn a_watch_event_with_its_object_before_its_type_decodes() {
        let object = tracking_object(json!({}));
        let text = format!(r#"{{"object": {object}, "type": "MODIFIED"}}"#);
        let event: kube::core::WatchEvent<TrackingRecord> = serde_json::from_str(&text).unwrap();
        let kube::core::WatchEvent::Modified(read) = event else {
            panic!("a MODIFIED event: {event:?}");
        };
        assert!(read.unreadable().is_none());
        assert_eq!(read.version(), Some(7));
        let declaration = read.declaration().unwrap();
        assert_eq!(declaration.key.to_string(), "ConfigMap/shop/settings");
        assert_eq!(declaration.data_digest, data_digest(&declared()));
    }

    #[test]
    fn the_delete_and_patch_replies_decode_as_records() {
        // DELETE of an object a finalizer keeps: the object, marked, at a new resourceVersion.
        let kept = record(tracking_object(json!({"metadata": {
            "name": "configmap.settings", "namespace": "shop", "uid": "u-1",
            "resourceVersion": "8", "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["arbor.dev/gitsync"]}})));
        assert_eq!(kept.version(), Some(8));
        assert!(kept.meta().deletion_timestamp.is_some());
        // The JSON patch that removes the finalizer: answered with the object without it.
        let released = record(tracking_object(json!({"metadata": {
            "name": "configmap.settings", "namespace": "shop", "uid": "u-1",
            "resourceVersion": "9", "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": []}})));
        assert_eq!(released.version(), Some(9));
        assert_eq!(released.meta().finalizers, Some(Vec::new()));
        assert!(released.declaration().is_some());
    }
}
