//! Which API resource serves a manifest object's kind, found by discovery and remembered.
//!
//! Manifests hold any kind, so objects are handled as [`DynamicObject`]s; the resource (plural
//! name, scope) comes from the API server's discovery documents, asked once per kind.

use arbor_policy::observe::ResourceId;
use arbor_runtime::discovery::KindCache;
pub use arbor_runtime::discovery::ServedKind;
use kube::Api;
use kube::core::{DynamicObject, GroupVersionKind};

use crate::error::Error;

/// Discovery results, shared by the controller and every observer.
#[derive(Debug, Clone)]
pub struct Resolver {
    kinds: KindCache,
}

impl Resolver {
    pub fn new(client: kube::Client) -> Self {
        Self {
            kinds: KindCache::new(client),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.kinds.client()
    }

    /// The served kind of `api_version` / `kind`, from the cache or discovery.
    pub async fn served(&self, api_version: &str, kind: &str) -> Result<ServedKind, Error> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        self.kinds
            .served(&gvk)
            .await
            .map_err(|source| Error::Discovery {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                source: Box::new(source),
            })
    }

    /// The API of the object `id` names, scoped to its namespace when it has one.
    pub async fn api_for(&self, id: &ResourceId) -> Result<Api<DynamicObject>, Error> {
        let served = self.served(&id.api_version, &id.kind).await?;
        let client = self.client();
        Ok(match &id.namespace {
            Some(namespace) => Api::namespaced_with(client, namespace, &served.resource),
            None => Api::all_with(client, &served.resource),
        })
    }
}
