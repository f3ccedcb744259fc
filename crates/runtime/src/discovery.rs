//! Which API resource serves a kind, asked of the API server once and remembered.
//!
//! Controllers that handle objects of any kind (declared in git, listed in an Application's
//! manifest) work with `DynamicObject`s and need each kind's plural name and scope. Only
//! positive answers are cached: a kind that is not served yet (its CustomResourceDefinition
//! was applied a moment ago) is asked again on the next lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kube::Api;
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{ApiResource, Scope, pinned_kind};

/// A kind as the API serves it.
#[derive(Debug, Clone)]
pub struct ServedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// A kind could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The API server does not serve the kind (yet).
    #[error("{} is not served by the API server", describe(.gvk))]
    NotServed { gvk: GroupVersionKind },
    /// Discovery itself failed; the kind may or may not be served.
    #[error("discovery of {} failed: {source}", describe(.gvk))]
    Failed {
        gvk: GroupVersionKind,
        #[source]
        source: Box<kube::Error>,
    },
}

fn describe(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{} {}", gvk.version, gvk.kind)
    } else {
        format!("{}/{} {}", gvk.group, gvk.version, gvk.kind)
    }
}

/// Discovery answers shared by every task of a controller.
#[derive(Clone)]
pub struct KindCache {
    client: kube::Client,
    cache: Arc<Mutex<HashMap<GroupVersionKind, ServedKind>>>,
}

impl std::fmt::Debug for KindCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCache")
            .field("kinds", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl KindCache {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The served kind of `gvk`, from the cache or discovery.
    pub async fn served(&self, gvk: &GroupVersionKind) -> Result<ServedKind, DiscoveryError> {
        if let Some(served) = self.lock().get(gvk) {
            return Ok(served.clone());
        }
        let (resource, capabilities) = match pinned_kind(&self.client, gvk).await {
            Ok(found) => found,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Err(DiscoveryError::NotServed { gvk: gvk.clone() });
            }
            Err(kube::Error::Discovery(_)) => {
                return Err(DiscoveryError::NotServed { gvk: gvk.clone() });
            }
            Err(source) => {
                return Err(DiscoveryError::Failed {
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

    /// The version the API server recommends for `group`'s `kind` (its preferred version, else
    /// the most stable one that serves the kind): what a client that names an object only by
    /// kind, like `arborctl explain ConfigMap/team/handmade`, means.
    pub async fn recommended_version(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<String, DiscoveryError> {
        let unversioned = || GroupVersionKind {
            group: group.to_owned(),
            version: String::new(),
            kind: kind.to_owned(),
        };
        let api_group = match kube::discovery::group(&self.client, group).await {
            Ok(api_group) => api_group,
            Err(kube::Error::Discovery(_)) => {
                return Err(DiscoveryError::NotServed { gvk: unversioned() });
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Err(DiscoveryError::NotServed { gvk: unversioned() });
            }
            Err(source) => {
                return Err(DiscoveryError::Failed {
                    gvk: unversioned(),
                    source: Box::new(source),
                });
            }
        };
        if let Some((resource, _)) = api_group.recommended_kind(kind) {
            return Ok(resource.version);
        }
        // The preferred version may not serve the kind while an older one still does.
        api_group
            .versions()
            .find(|version| {
                api_group
                    .versioned_resources(version)
                    .iter()
                    .any(|(resource, _)| resource.kind == kind)
            })
            .map(str::to_owned)
            .ok_or_else(|| DiscoveryError::NotServed { gvk: unversioned() })
    }

    /// Forgets every answer, so kinds whose definitions changed are looked up again.
    pub fn refresh(&self) {
        self.lock().clear();
    }

    /// The API for objects of `served` in `namespace`; cluster-wide when the kind is
    /// cluster-scoped or no namespace is given.
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
