//! Writes whose reply is skimmed rather than decoded.
//!
//! kube-apiserver answers a create or an apply with the whole object as stored, managedFields
//! included: for an object gitsync applies that is the declared content again, and for a
//! tracking object its `spec.data` (the declared object once more). A round makes two such
//! writes per new object and keeps nothing of the replies but, for tracking objects, the
//! resourceVersion (which tells a watch event of its own write from a newer one), so decoding
//! them into objects was most of gitsync's client-side work per write. Here the reply is only
//! checked to be JSON and, where asked, its resourceVersion read; errors are kube's, as with
//! [`kube::Api`].

use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Api, Resource};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

/// The part of a write's reply that is read.
#[derive(Deserialize)]
struct Written {
    #[serde(default)]
    metadata: WrittenMetadata,
}

#[derive(Deserialize, Default)]
struct WrittenMetadata {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// The server-side apply of `desired` as `name` through `api`.
fn apply_request<K: Resource + Clone>(
    api: &Api<K>,
    name: &str,
    params: &PatchParams,
    desired: &Value,
) -> Result<http::Request<Vec<u8>>, kube::Error> {
    let mut request = Request::new(api.resource_url())
        .patch(name, params, &Patch::Apply(desired))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch");
    Ok(request)
}

/// Server-side applies `desired` as `name` through `api`; the reply is checked, not kept.
pub async fn apply<K: Resource + Clone>(
    api: &Api<K>,
    name: &str,
    params: &PatchParams,
    desired: &Value,
) -> Result<(), kube::Error> {
    let request = apply_request(api, name, params, desired)?;
    api.clone()
        .into_client()
        .request::<IgnoredAny>(request)
        .await?;
    Ok(())
}

/// Server-side applies `desired` as `name` through `api`; returns the resourceVersion written.
pub async fn apply_versioned<K: Resource + Clone>(
    api: &Api<K>,
    name: &str,
    params: &PatchParams,
    desired: &Value,
) -> Result<Option<String>, kube::Error> {
    let request = apply_request(api, name, params, desired)?;
    let written: Written = api.clone().into_client().request(request).await?;
    Ok(written.metadata.resource_version)
}

/// Creates `desired` through `api`; returns the resourceVersion written.
pub async fn create_versioned<K: Resource + Clone>(
    api: &Api<K>,
    desired: &Value,
) -> Result<Option<String>, kube::Error> {
    let body = serde_json::to_vec(desired).map_err(kube::Error::SerdeError)?;
    let mut request = Request::new(api.resource_url())
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("create");
    let written: Written = api.clone().into_client().request(request).await?;
    Ok(written.metadata.resource_version)
}
