//! Which API resource serves a kind, asked of the API server once and remembered.
//!
//! Declared objects are of any kind, so they are handled as [`DynamicObject`]s. Only positive
//! answers are cached: a kind that is not served yet (its CustomResourceDefinition was applied
//! a moment ago) is asked again next time, and [`Discovery::wait_served`] polls for it.

use std::time::Duration;

use arbor_policy::object::GroupVersionKind;
pub use arbor_runtime::discovery::ServedKind;
use arbor_runtime::discovery::{DiscoveryError, KindCache};
use kube::Api;
use kube::core::DynamicObject;

use super::error::ApplyError;

/// Discovery results shared by every source.
#[derive(Debug, Clone)]
pub struct Discovery {
    kinds: KindCache,
}

impl Discovery {
    pub fn new(client: kube::Client) -> Self {
        Self {
            kinds: KindCache::new(client),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.kinds.client()
    }

    /// The served kind of `gvk`, or [`ApplyError::KindNotServed`].
    pub async fn served(&self, gvk: &GroupVersionKind) -> Result<ServedKind, ApplyError> {
        let wanted = kube::core::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
        self.kinds
            .served(&wanted)
            .await
            .map_err(|error| match error {
                DiscoveryError::NotServed { .. } => ApplyError::KindNotServed { gvk: gvk.clone() },
                DiscoveryError::Failed { source, .. } => ApplyError::Discovery {
                    gvk: gvk.clone(),
                    source,
                },
            })
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

    /// The version the API server recommends for a kind named without one; `None` when the
    /// kind is not served.
    pub async fn recommended_version(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Option<String>, ApplyError> {
        match self.kinds.recommended_version(group, kind).await {
            Ok(version) => Ok(Some(version)),
            Err(DiscoveryError::NotServed { .. }) => Ok(None),
            Err(DiscoveryError::Failed { gvk, source }) => Err(ApplyError::Discovery {
                gvk: GroupVersionKind {
                    group: gvk.group.into(),
                    version: gvk.version.into(),
                    kind: gvk.kind.into(),
                },
                source,
            }),
        }
    }

    /// Forgets every answer, so kinds whose definitions changed are looked up again.
    pub fn refresh(&self) {
        self.kinds.refresh();
    }

    /// The API for objects of `served` in `namespace` (cluster-wide when `None`).
    pub fn api(&self, served: &ServedKind, namespace: Option<&str>) -> Api<DynamicObject> {
        self.kinds.api(served, namespace)
    }
}
