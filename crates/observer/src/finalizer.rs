//! Adding the observer's finalizer to an Application.
//!
//! `kube::runtime::finalizer` adds a finalizer to an object that has none with a JSON patch
//! whose first operation tests `/metadata/finalizers` for `null`; kube-apiserver accepts that
//! test on an absent field, arbor-kube-emu refuses it (422). So the finalizer is added here,
//! with a JSON patch guarded by the resourceVersion (another writer in between makes it fail
//! and the reconcile is retried), and `finalizer()` finds it in place.

use arbor_api::Application;
use arbor_api::keys::OBSERVER_FINALIZER;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, TestOperation};
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::ResourceExt;
use serde_json::json;

use crate::error::Error;

/// Whether the finalizer must be added before anything else is done.
pub fn missing(application: &Application) -> bool {
    application.metadata.deletion_timestamp.is_none()
        && !application
            .finalizers()
            .iter()
            .any(|finalizer| finalizer == OBSERVER_FINALIZER)
}

/// Adds the finalizer, provided the Application did not change since it was read.
pub async fn add(api: &Api<Application>, application: &Application) -> Result<(), Error> {
    let name = application.name_any();
    let (path, value) = if application.finalizers().is_empty() {
        (
            PointerBuf::from_tokens(["metadata", "finalizers"]),
            json!([OBSERVER_FINALIZER]),
        )
    } else {
        (
            PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
            json!(OBSERVER_FINALIZER),
        )
    };
    let operations = vec![
        PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
            value: json!(application.resource_version()),
        }),
        PatchOperation::Add(AddOperation { path, value }),
    ];
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Json::<()>(json_patch::Patch(operations)),
    )
    .await
    .map_err(|source| Error::Application {
        application: format!("{}/{name}", application.namespace().unwrap_or_default()),
        source: Box::new(source),
    })?;
    Ok(())
}
