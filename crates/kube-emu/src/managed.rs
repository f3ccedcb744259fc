//! Field ownership of writes that are not server-side apply: the bridge between the request
//! path and the patch engine's `record_update`, which keeps `metadata.managedFields` as
//! kube-apiserver does.

use serde_json::Value;

use crate::patch::{self, ListSemantics, WriteContext};
use crate::registry::ResourceKind;

/// Who writes, when, and through which API version.
#[derive(Debug, Clone)]
pub struct Writer {
    pub field_manager: String,
    pub now: String,
    pub api_version: String,
    pub subresource: Option<String>,
    pub force: bool,
}

impl Writer {
    /// The server itself (initial namespaces, garbage collection): it records no ownership,
    /// like kube-apiserver's own controllers writing through internal paths.
    pub fn system() -> Writer {
        Writer {
            field_manager: String::new(),
            now: crate::meta::now_timestamp(),
            api_version: String::new(),
            subresource: None,
            force: false,
        }
    }

    pub fn context(&self) -> WriteContext {
        WriteContext {
            field_manager: self.field_manager.clone(),
            force: self.force,
            subresource: self.subresource.clone(),
            now: self.now.clone(),
            api_version: self.api_version.clone(),
        }
    }
}

/// How the lists of `kind` merge: the built-in table, or the CRD's schema.
pub fn list_semantics(kind: &ResourceKind) -> ListSemantics {
    match &kind.storage_version().schema {
        Some(schema) if kind.custom => ListSemantics::from_openapi_schema(schema),
        _ => ListSemantics::for_builtin(&kind.id.group, &kind.kind),
    }
}

/// Records the fields `writer` changed from `old` to `new` in `new.metadata.managedFields`.
pub fn record(kind: &ResourceKind, old: Option<&Value>, new: &mut Value, writer: &Writer) {
    if writer.field_manager.is_empty() {
        return;
    }
    patch::record_update(old, new, &writer.context(), &list_semantics(kind));
}
