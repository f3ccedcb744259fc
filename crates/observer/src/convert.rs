//! Building the gRPC messages of `arbor.v1` from what the observer knows.

use std::time::SystemTime;

use arbor_api::Application;
use arbor_policy::object::GroupVersionKind;
use arbor_policy::observe::ResourceId;
use arbor_proto::from_kube;
use arbor_proto::v1::{DriftEvent, DriftKind, ObjectRef};
use kube::core::Resource;

use crate::registry::AppKey;

/// Who reports drift, in [`DriftEvent::reporter`].
pub const REPORTER: &str = "arbor-observer";

pub fn object_ref(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
    let gvk = GroupVersionKind::from_api_version(api_version, kind);
    ObjectRef {
        group: gvk.group.into(),
        version: gvk.version.into(),
        kind: gvk.kind.into(),
        namespace: namespace.unwrap_or_default().to_owned(),
        name: name.to_owned(),
    }
}

pub fn resource_ref(id: &ResourceId) -> ObjectRef {
    object_ref(&id.api_version, &id.kind, id.namespace.as_deref(), &id.name)
}

pub fn application_ref(key: &AppKey) -> ObjectRef {
    object_ref(
        &Application::api_version(&()),
        &Application::kind(&()),
        Some(&key.namespace),
        &key.name,
    )
}

/// A drift event as seen now; `observed_json` empty for deletions.
pub fn drift_event(
    object: ObjectRef,
    kind: DriftKind,
    changed_fields: Vec<String>,
    observed_json: String,
) -> DriftEvent {
    DriftEvent {
        object: Some(object),
        kind: kind.into(),
        observed_at: Some(from_kube::timestamp(SystemTime::now())),
        changed_fields,
        observed_json,
        reporter: REPORTER.to_owned(),
        source: None,
        application: None,
    }
}

/// A field path as drift events print it: `spec.replicas`, not `.spec.replicas`.
pub fn field_name(path: &impl std::fmt::Display) -> String {
    path.to_string().trim_start_matches('.').to_owned()
}
