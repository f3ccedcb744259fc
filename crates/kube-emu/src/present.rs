//! How objects leave the server: in the requested version, and in the shape the `Accept`
//! header asks for (the object itself, `PartialObjectMetadata`, or a `Table` for kubectl).

use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::{Map, Value, json};

use crate::registry::ResourceKind;
use crate::table;

/// Which representation the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presentation {
    Object,
    /// `as=PartialObjectMetadata(List)`: metadata only (kube-rs metadata watchers).
    Metadata,
    /// `as=Table` (kubectl get), with what each row carries.
    Table(RowObject),
}

/// `includeObject` of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowObject {
    None,
    Metadata,
    Object,
}

impl Presentation {
    pub fn from_request(accept: &str, include_object: Option<&str>) -> Presentation {
        // The first acceptable type wins; kube clients list the richer types before plain JSON.
        for media in accept.split(',') {
            if media.contains("as=Table") {
                let rows = match include_object {
                    Some("None") => RowObject::None,
                    Some("Object") => RowObject::Object,
                    _ => RowObject::Metadata,
                };
                return Presentation::Table(rows);
            }
            if media.contains("as=PartialObjectMetadata") {
                return Presentation::Metadata;
            }
            if media.contains("json") || media.trim() == "*/*" {
                return Presentation::Object;
            }
        }
        Presentation::Object
    }
}

/// The stored object as the requested version of its kind.
pub fn in_version(kind: &ResourceKind, version: &str, object: &Value) -> Value {
    let object = match &kind.view {
        Some(view) => view.to_view(object.clone()),
        None => object.clone(),
    };
    let Value::Object(fields) = object else {
        return object;
    };
    // kube-apiserver writes the type first, `kind` before `apiVersion`; clients that report
    // decoding errors by position (kube-rs's "at line 1 column 17") see the same column.
    let mut ordered = Map::with_capacity(fields.len() + 2);
    ordered.insert("kind".into(), Value::from(kind.kind.clone()));
    ordered.insert("apiVersion".into(), Value::from(kind.api_version(version)));
    ordered.extend(
        fields
            .into_iter()
            .filter(|(field, _)| field != "kind" && field != "apiVersion"),
    );
    Value::Object(ordered)
}

/// A stored object written out as [`in_version`] makes it, without copying it first when the
/// kind has no view to convert through (lists and watch events of every stored object would
/// otherwise copy each one to send it once).
pub struct InVersion<'a> {
    pub kind: &'a ResourceKind,
    pub version: &'a str,
    pub object: &'a Value,
}

impl Serialize for InVersion<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (None, Value::Object(fields)) = (&self.kind.view, self.object) else {
            return in_version(self.kind, self.version, self.object).serialize(serializer);
        };
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("kind", &self.kind.kind)?;
        map.serialize_entry("apiVersion", &self.kind.api_version(self.version))?;
        for (field, value) in fields {
            if field != "kind" && field != "apiVersion" {
                map.serialize_entry(field, value)?;
            }
        }
        map.end()
    }
}

pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A response body: a stored object or list as [`InVersion`] writes it, or a value built
/// for the response.
pub enum Presented<'a> {
    Object(InVersion<'a>),
    List {
        kind: &'a ResourceKind,
        version: &'a str,
        metadata: Map<String, Value>,
        items: &'a [Arc<Value>],
    },
    Built(Value),
}

impl Serialize for Presented<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Presented::Object(object) => object.serialize(serializer),
            Presented::List {
                kind,
                version,
                metadata,
                items,
            } => {
                let mut map = serializer.serialize_map(Some(4))?;
                map.serialize_entry("kind", &kind.list_kind())?;
                map.serialize_entry("apiVersion", &kind.api_version(version))?;
                map.serialize_entry("metadata", metadata)?;
                map.serialize_entry(
                    "items",
                    &Items {
                        kind,
                        version,
                        items,
                    },
                )?;
                map.end()
            }
            Presented::Built(value) => value.serialize(serializer),
        }
    }
}

/// A list's items, each as [`InVersion`] writes it.
struct Items<'a> {
    kind: &'a ResourceKind,
    version: &'a str,
    items: &'a [Arc<Value>],
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.items.iter().map(|object| InVersion {
            kind: self.kind,
            version: self.version,
            object,
        }))
    }
}

/// One object in the requested presentation.
pub fn object<'a>(
    kind: &'a ResourceKind,
    version: &'a str,
    presentation: Presentation,
    object: &'a Value,
) -> Presented<'a> {
    match presentation {
        Presentation::Object => Presented::Object(InVersion {
            kind,
            version,
            object,
        }),
        Presentation::Metadata => Presented::Built(partial_metadata(object)),
        Presentation::Table(rows) => Presented::Built(table::table(
            kind,
            version,
            std::slice::from_ref(&Arc::new(object.clone())),
            json!({"resourceVersion": crate::meta::resource_version(object)}),
            rows,
        )),
    }
}

/// A list in the requested presentation; `list_metadata` carries resourceVersion / continue.
pub fn list<'a>(
    kind: &'a ResourceKind,
    version: &'a str,
    presentation: Presentation,
    items: &'a [Arc<Value>],
    list_metadata: Map<String, Value>,
) -> Presented<'a> {
    match presentation {
        Presentation::Object => Presented::List {
            kind,
            version,
            metadata: list_metadata,
            items,
        },
        Presentation::Metadata => Presented::Built(json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadataList",
            "metadata": list_metadata,
            "items": items.iter().map(|item| partial_metadata(item)).collect::<Vec<_>>(),
        })),
        Presentation::Table(rows) => Presented::Built(table::table(
            kind,
            version,
            items,
            Value::Object(list_metadata),
            rows,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_leave_with_kind_then_api_version_first() {
        let kind = crate::registry::Registry::with_builtins()
            .lookup("", "v1", "services")
            .cloned()
            .expect("services are built in");
        let stored =
            json!({"apiVersion": "v1", "metadata": {"name": "s"}, "kind": "Service", "spec": {}});
        let text = serde_json::to_string(&in_version(&kind, "v1", &stored)).expect("serializes");
        assert!(
            text.starts_with(r#"{"kind":"Service","apiVersion":"v1","metadata""#),
            "{text}"
        );
    }

    #[test]
    fn kubectl_accept_headers_select_tables() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            Presentation::from_request(kubectl, None),
            Presentation::Table(RowObject::Metadata)
        );
        assert_eq!(
            Presentation::from_request(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                None
            ),
            Presentation::Metadata
        );
        assert_eq!(
            Presentation::from_request("application/json", None),
            Presentation::Object
        );
        assert_eq!(Presentation::from_request("", None), Presentation::Object);
    }
}
