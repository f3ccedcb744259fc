//! Watching a kind so that one object of the wrong shape never stops the rest.
//!
//! kube-rs's typed watchers decode every list and watch event into the Rust type; an object the
//! type cannot read (a string where the type has a struct, a CRD version whose schema does not
//! constrain the spec, a field an older controller does not know the type of) fails the whole
//! list, the watcher retries forever, and no object of the kind is handled at all. The API
//! server stores such objects whenever the CRD's schema lets it, so a controller must expect
//! them.
//!
//! Controllers therefore watch [`DynamicObject`]s or [`CompactObject`]s (only `metadata` must
//! decode, and the API server guarantees its shape) and decode each object with [`decode`] or
//! [`decode_compact`] when they reconcile it.
//! An object that does not decode is reported by [`DecodeFailures::report`]: a warn log line
//! naming it and the field, a Warning Event on it, and the `arbor_<component>_undecodable_objects`
//! counter; then it is skipped and every other object of the kind goes on being reconciled.

use kube::Resource;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::compact_object::CompactObject;

/// The Event reason of an object that does not decode.
pub const UNDECODABLE_REASON: &str = "Undecodable";

/// An object that does not decode into its Rust type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object} cannot be read: {path}: {message}")]
pub struct DecodeError {
    pub kind: String,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub object: String,
    /// The field that does not decode, as a JSON path (`spec.reference`); `.` for the object.
    pub path: String,
    pub message: String,
}

/// The [`ApiResource`] to watch `K` through as [`DynamicObject`]s.
pub fn api_resource<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// `namespace/name` of an object, or `name` when it has no namespace.
pub fn object_name(object: &impl Resource) -> String {
    let meta = object.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// Decodes `object` into `K`, naming the field that does not fit.
pub fn decode<K>(object: &DynamicObject) -> Result<K, DecodeError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    decode_tree(object_name(object), serde_json::to_value(object))
}

/// [`decode`] for an object cached as a [`CompactObject`].
pub fn decode_compact<K>(object: &CompactObject) -> Result<K, DecodeError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    decode_tree(object_name(object), object.to_value(&api_resource::<K>()))
}

/// Decodes the JSON tree of the object `name` into `K`.
fn decode_tree<K>(name: String, tree: serde_json::Result<Value>) -> Result<K, DecodeError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let fail = |path: String, message: String| DecodeError {
        kind: K::kind(&()).into_owned(),
        object: name.clone(),
        path,
        message,
    };
    let mut value = tree.map_err(|error| fail(".".into(), error.to_string()))?;
    // Watch events of a typed list may leave them out; the Rust types require them.
    if let Some(fields) = value.as_object_mut() {
        fields
            .entry("apiVersion")
            .or_insert_with(|| K::api_version(&()).into_owned().into());
        fields
            .entry("kind")
            .or_insert_with(|| K::kind(&()).into_owned().into());
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        fail(path, error.into_inner().to_string())
    })
}

/// [`decode`] for kinds whose `spec` flattens a struct `S` (`#[serde(flatten)]`): serde reads a
/// flattened struct from a buffer and loses the path inside it, so a failure at `spec` is
/// located again by decoding `spec` as `S`.
pub fn decode_flattened<K, S>(object: &DynamicObject) -> Result<K, DecodeError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
    S: DeserializeOwned,
{
    decode::<K>(object).map_err(|error| {
        let Some(spec) = object.data.get("spec").filter(|_| error.path == "spec") else {
            return error;
        };
        match serde_path_to_error::deserialize::<_, S>(spec.clone()) {
            Err(inner) => DecodeError {
                path: format!("spec.{}", inner.path()),
                message: inner.into_inner().to_string(),
                ..error
            },
            Ok(_) => error,
        }
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// Reports objects that do not decode: log line, Event, metric.
#[derive(Debug, Clone, Default)]
pub struct DecodeFailures {
    counter: Family<KindLabel, Counter>,
}

impl DecodeFailures {
    /// Registers `undecodable_objects` (by kind) in a component's registry.
    pub fn register(registry: &mut Registry) -> Self {
        let failures = Self::default();
        registry.register(
            "undecodable_objects",
            "Objects skipped because they do not decode, by kind",
            failures.counter.clone(),
        );
        failures
    }

    /// How many objects of `kind` were reported.
    pub fn count(&self, kind: &str) -> u64 {
        self.counter
            .get_or_create(&KindLabel { kind: kind.into() })
            .get()
    }

    /// Logs `error` at warn, counts it and publishes a Warning Event on `object` (`resource`
    /// says which kind it is). A failed Event is logged: the report is best effort and never
    /// stops the caller.
    pub async fn report(
        &self,
        recorder: &Recorder,
        resource: &ApiResource,
        object: &impl Resource<DynamicType = ApiResource>,
        error: &DecodeError,
    ) {
        tracing::warn!(
            kind = %error.kind,
            object = %error.object,
            field = %error.path,
            %error,
            "skipping an object that does not decode; the other objects of its kind are still reconciled"
        );
        self.counter
            .get_or_create(&KindLabel {
                kind: error.kind.clone(),
            })
            .inc();
        let event = Event {
            type_: EventType::Warning,
            reason: UNDECODABLE_REASON.into(),
            note: Some(error.to_string().chars().take(1000).collect()),
            action: "Decode".into(),
            secondary: None,
        };
        if let Err(failure) = recorder.publish(&event, &object.object_ref(resource)).await {
            tracing::warn!(object = %error.object, error = %failure, "cannot publish an event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn dynamic(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named_by_its_path() {
        let object = dynamic(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "foo"},
            "data": {"key": ["not", "a", "string"]},
        }));
        let error = decode::<ConfigMap>(&object).unwrap_err();
        assert_eq!(error.path, "data.key");
        assert_eq!(error.object, "foo/settings");
        assert!(
            error
                .to_string()
                .starts_with("ConfigMap foo/settings cannot be read: data.key: ")
        );
    }

    #[test]
    fn a_compact_object_decodes_and_names_the_field_that_does_not_fit() {
        let compact =
            |value: serde_json::Value| -> CompactObject { serde_json::from_value(value).unwrap() };
        let object = compact(json!({
            "metadata": {"name": "settings", "namespace": "foo"},
            "data": {"key": ["not", "a", "string"]},
        }));
        let error = decode_compact::<ConfigMap>(&object).unwrap_err();
        assert_eq!(
            (error.path.as_str(), error.object.as_str()),
            ("data.key", "foo/settings")
        );
        let object = compact(json!({
            "metadata": {"name": "settings", "namespace": "foo"},
            "data": {"key": "value"},
        }));
        let configmap = decode_compact::<ConfigMap>(&object).unwrap();
        assert_eq!(configmap.data.unwrap()["key"], "value");
        assert_eq!(configmap.metadata.name.as_deref(), Some("settings"));
    }

    #[test]
    fn a_good_object_decodes() {
        let object = dynamic(json!({
            "metadata": {"name": "settings", "namespace": "foo"},
            "data": {"key": "value"},
        }));
        let configmap = decode::<ConfigMap>(&object).unwrap();
        assert_eq!(configmap.data.unwrap()["key"], "value");
    }
}
