//! Which API resource serves a manifest object's kind, found by discovery and remembered.
//!
//! Manifests hold any kind, so objects are handled as [`DynamicObject`]s; the resource (plural
//! name, scope) comes from the API server's discovery documents, asked once per kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arbor_policy::observe::ResourceId;
use kube::Api;
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{ApiResource, Scope, pinned_kind};

use crate::error::Error;

/// A kind as the API serves it.
#[derive(Debug, Clone)]
pub struct ServedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Discovery results, shared by the controller and every observer.
#[derive(Clone)]
pub struct Resolver {
    client: kube::Client,
    cache: Arc<Mutex<HashMap<(String, String), ServedKind>>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("kinds", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl Resolver {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The served kind of `api_version` / `kind`, from the cache or discovery.
    pub async fn served(&self, api_version: &str, kind: &str) -> Result<ServedKind, Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(served) = self.lock().get(&key) {
            return Ok(served.clone());
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) =
            pinned_kind(&self.client, &gvk)
                .await
                .map_err(|source| Error::Discovery {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                    source: Box::new(source),
                })?;
        let served = ServedKind {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        self.lock().insert(key, served.clone());
        Ok(served)
    }

    /// The API of the object `id` names, scoped to its namespace when it has one.
    pub async fn api_for(&self, id: &ResourceId) -> Result<Api<DynamicObject>, Error> {
        let served = self.served(&id.api_version, &id.kind).await?;
        Ok(match &id.namespace {
            Some(namespace) => {
                Api::namespaced_with(self.client.clone(), namespace, &served.resource)
            }
            None => Api::all_with(self.client.clone(), &served.resource),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), ServedKind>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
