//! A watched object held small in a controller's cache.
//!
//! A [`kube::api::DynamicObject`] holds its fields as a tree of `serde_json::Value`s: every
//! key and string its own allocation, every map a hash table. An object a controller caches
//! whole is read rarely (when it is reconciled, and once more if it is listed), yet held for
//! as long as it exists. An observer's Application, with its manifests, observer schemas and
//! the manifests its status records, is about 40 KB as such a tree and a tenth of that as JSON
//! text; 1,000 of them were a third of the observer's heap.
//!
//! A [`CompactObject`] keeps what a cache and a controller read of every object typed (its
//! `metadata`: name, namespace, uid, resourceVersion, generation, finalizers, deletion
//! timestamp), and everything else as one compact JSON text, decoded into the controller's type
//! when it is reconciled ([`crate::decode::decode_compact`]). It is watched as a `DynamicObject` is
//! (`Api::all_with(client, &api_resource)`), so one object of the wrong shape still never
//! stops the watch of the others.

use std::borrow::Cow;
use std::fmt;

use kube::Resource;
use kube::api::{ObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use kube::discovery::ApiResource;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// An object's type and metadata, and the rest of it as JSON text (see the module docs).
#[derive(Debug, Clone)]
pub struct CompactObject {
    pub types: Option<TypeMeta>,
    pub metadata: ObjectMeta,
    /// Every top-level field but `apiVersion`, `kind` and `metadata`, as one JSON object.
    rest: Box<RawValue>,
}

impl CompactObject {
    /// The whole object as a JSON tree, `types` filled in from `resource` where the object
    /// leaves them out (a watch event of a typed list may).
    pub fn to_value(&self, resource: &ApiResource) -> Result<Value, serde_json::Error> {
        let mut fields: Map<String, Value> = serde_json::from_str(self.rest.get())?;
        let (api_version, kind) = match &self.types {
            Some(types) => (types.api_version.clone(), types.kind.clone()),
            None => (resource.api_version.clone(), resource.kind.clone()),
        };
        let mut object = Map::with_capacity(fields.len() + 3);
        object.insert("apiVersion".into(), api_version.into());
        object.insert("kind".into(), kind.into());
        object.insert("metadata".into(), serde_json::to_value(&self.metadata)?);
        object.append(&mut fields);
        Ok(Value::Object(object))
    }

    /// The text of every field but the type and metadata.
    pub fn rest(&self) -> &str {
        self.rest.get()
    }
}

impl Resource for CompactObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(resource: &ApiResource) -> Cow<'_, str> {
        resource.group.as_str().into()
    }

    fn version(resource: &ApiResource) -> Cow<'_, str> {
        resource.version.as_str().into()
    }

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        resource.kind.as_str().into()
    }

    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        resource.api_version.as_str().into()
    }

    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        resource.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> Deserialize<'de> for CompactObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CompactVisitor)
    }
}

struct CompactVisitor;

impl<'de> Visitor<'de> for CompactVisitor {
    type Value = CompactObject;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CompactObject, A::Error> {
        let (mut api_version, mut kind, mut metadata) = (None, None, None);
        let mut rest = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // A repeated key keeps its last value, as the API server's JSON decoding does.
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = Some(map.next_value::<ObjectMeta>()?),
                _ => {
                    rest.insert(key, map.next_value::<Value>()?);
                }
            }
        }
        // The API server sends both or neither (a watch of a typed list may leave them out);
        // the resource watched names them then.
        let types = match (api_version, kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        let rest = serde_json::value::to_raw_value(&rest).map_err(de::Error::custom)?;
        Ok(CompactObject {
            types,
            // As for a DynamicObject: an item without metadata must not fail its whole list
            // (and with it the watch of every object of the kind).
            metadata: metadata.unwrap_or_default(),
            rest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn application() -> Value {
        json!({
            "apiVersion": "arbor.dev/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "shop", "namespace": "team", "uid": "u-1",
                         "resourceVersion": "7", "finalizers": ["arbor.dev/observer"]},
            "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "settings"}, "data": {"a": "1"}}]},
            "status": {"state": "Running", "conditions": []},
        })
    }

    #[test]
    fn an_object_reads_back_as_the_api_server_sent_it() {
        let text = serde_json::to_string(&application()).unwrap();
        let compact: CompactObject = serde_json::from_str(&text).unwrap();
        assert_eq!(compact.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(compact.types.as_ref().unwrap().kind, "Application");
        let resource = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("arbor.dev", "v1alpha1", "Application"),
            "applications",
        );
        assert_eq!(compact.to_value(&resource).unwrap(), application());
        assert!(!compact.rest().contains("u-1") && compact.rest().starts_with("{\"spec\""));
    }

    #[test]
    fn a_watch_event_without_types_takes_them_from_the_resource() {
        let mut object = application();
        let fields = object.as_object_mut().unwrap();
        fields.remove("apiVersion");
        fields.remove("kind");
        let compact: CompactObject = serde_json::from_value(object).unwrap();
        assert!(compact.types.is_none());
        let resource = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("arbor.dev", "v1alpha1", "Application"),
            "applications",
        );
        assert_eq!(compact.to_value(&resource).unwrap(), application());
    }

    #[test]
    fn an_object_without_metadata_reads_as_a_dynamic_object_does_and_a_non_object_is_refused() {
        let compact: CompactObject =
            serde_json::from_value(json!({"kind": "Application", "spec": {}})).unwrap();
        let dynamic: kube::api::DynamicObject =
            serde_json::from_value(json!({"kind": "Application", "spec": {}})).unwrap();
        assert_eq!(compact.metadata, dynamic.metadata);
        let error = serde_json::from_value::<CompactObject>(json!(["not", "an", "object"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("a Kubernetes object"), "{error}");
    }

    #[test]
    fn a_list_and_a_watch_event_decode_into_compact_objects() {
        let list: kube::core::ObjectList<CompactObject> = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "9"},
            "items": [application()],
        }))
        .unwrap();
        assert_eq!(list.items[0].metadata.name.as_deref(), Some("shop"));
        let line =
            serde_json::to_string(&json!({"type": "MODIFIED", "object": application()})).unwrap();
        let event: kube::core::WatchEvent<CompactObject> = serde_json::from_str(&line).unwrap();
        let kube::core::WatchEvent::Modified(object) = event else {
            panic!("a MODIFIED event");
        };
        assert!(object.rest().contains("\"Running\""));
    }
}
