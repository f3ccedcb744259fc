//! Which API resource serves a kind, asked of the API server once and remembered.
//!
//! Declared objects are of any kind, so they are handled as [`DynamicObject`]s. Only positive
//! answers are cached: a kind that is not served yet (its CustomResourceDefinition was applied
//! a moment ago) is asked again next time, and [`Discovery::wait_served`] polls for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arbor_policy::object::GroupVersionKind;
use kube::Api;
use kube::core::DynamicObject;
use kube::discovery::{ApiResource, Scope, pinned_kind};

use super::error::ApplyError;

/// A kind as the API serves it.
#[derive(Debug, Clone)]
pub struct ServedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Discovery results shared by every source.
#[derive(Clone)]
pub struct Discovery {
    client: kube::Client,
    cache: Arc<Mutex<HashMap<GroupVersionKind, ServedKind>>>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery").finish_non_exhaustive()
    }
}

impl Discovery {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The served kind of `gvk`, or [`ApplyError::KindNotServed`].
    pub async fn served(&self, gvk: &GroupVersionKind) -> Result<ServedKind, ApplyError> {
        if let Some(served) = self.lock().get(gvk) {
            return Ok(served.clone());
        }
        let wanted = kube::core::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
        let (resource, capabilities) = match pinned_kind(&self.client, &wanted).await {
            Ok(found) => found,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Err(ApplyError::KindNotServed { gvk: gvk.clone() });
            }
            Err(kube::Error::Discovery(_)) => {
                return Err(ApplyError::KindNotServed { gvk: gvk.clone() });
            }
            Err(source) => {
                return Err(ApplyError::Discovery {
                    gvk: gvk.clone(),
                    source: Box::new(source),
                });
            }
        };
        let served = ServedKind {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        self.lock().insert(gvk.clone(), served.clone());
        Ok(served)
    }

    /// Waits up to `patience` for `gvk` to be served: the API server serves a new
    /// CustomResourceDefinition's kind a little after accepting it.
    pub async fn wait_served(
        &self,
        gvk: &GroupVersionKind,
        patience: Duration,
    ) -> Result<ServedKind, ApplyError> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            match self.served(gvk).await {
                Err(ApplyError::KindNotServed { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other,
            }
        }
    }

    /// Forgets every answer, so kinds whose definitions changed are looked up again.
    pub fn refresh(&self) {
        self.lock().clear();
    }

    /// The API for objects of `served` in `namespace` (cluster-wide when `None`).
    pub fn api(&self, served: &ServedKind, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace.filter(|_| served.namespaced) {
            Some(namespace) => {
                Api::namespaced_with(self.client.clone(), namespace, &served.resource)
            }
            None => Api::all_with(self.client.clone(), &served.resource),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, ServedKind>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
