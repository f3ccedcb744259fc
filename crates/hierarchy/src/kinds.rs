//! The kinds the controller watches, resolved by discovery.
//!
//! `watches` in the configuration names kinds by group, version and kind. Each must be served
//! and namespaced: only namespaced objects are propagated, so a cluster-scoped or unknown kind
//! is a start-up error that names the entry.

use std::collections::BTreeMap;

use arbor_policy::object::GroupKind;
use arbor_policy::propagation::WatchedKind;
use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};

/// Why a configured kind cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    #[error("watches[{index}] ({kind}): the cluster does not serve this kind: {source}")]
    NotServed {
        index: usize,
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "watches[{index}] ({kind}): the kind is cluster-scoped; only namespaced kinds propagate"
    )]
    ClusterScoped { index: usize, kind: String },
}

/// The resolved kinds, by group and kind.
#[derive(Debug, Clone, Default)]
pub struct WatchedKinds {
    by_group_kind: BTreeMap<GroupKind, ApiResource>,
}

impl WatchedKinds {
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKind, &ApiResource)> {
        self.by_group_kind.iter()
    }

    pub fn get(&self, group_kind: &GroupKind) -> Option<&ApiResource> {
        self.by_group_kind.get(group_kind)
    }

    pub fn len(&self) -> usize {
        self.by_group_kind.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_group_kind.is_empty()
    }
}

/// Checks one discovered kind; separate from discovery so the rule is tested without a server.
pub fn accept(
    index: usize,
    kind: &WatchedKind,
    resource: ApiResource,
    capabilities: &ApiCapabilities,
) -> Result<(GroupKind, ApiResource), KindError> {
    if capabilities.scope == Scope::Cluster {
        return Err(KindError::ClusterScoped {
            index,
            kind: describe(kind),
        });
    }
    Ok((GroupKind::new(&kind.group, &kind.kind), resource))
}

/// Resolves every configured kind through discovery.
pub async fn resolve(client: &Client, watches: &[WatchedKind]) -> Result<WatchedKinds, KindError> {
    let mut by_group_kind = BTreeMap::new();
    for (index, kind) in watches.iter().enumerate() {
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let (resource, capabilities) =
            kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|source| KindError::NotServed {
                    index,
                    kind: describe(kind),
                    source,
                })?;
        let (group_kind, resource) = accept(index, kind, resource, &capabilities)?;
        by_group_kind.insert(group_kind, resource);
    }
    Ok(WatchedKinds { by_group_kind })
}

fn describe(kind: &WatchedKind) -> String {
    if kind.group.is_empty() {
        format!("{}/{}", kind.version, kind.kind)
    } else {
        format!("{}/{} {}", kind.group, kind.version, kind.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::discovery::ApiCapabilities;

    fn capabilities(scope: Scope) -> ApiCapabilities {
        ApiCapabilities {
            scope,
            subresources: vec![],
            operations: vec![],
        }
    }

    #[test]
    fn cluster_scoped_kind_is_refused_naming_the_entry() {
        let kind = WatchedKind {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            kind: "ClusterRole".into(),
        };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
        ));
        let error = accept(2, &kind, resource, &capabilities(Scope::Cluster))
            .unwrap_err()
            .to_string();
        assert!(error.contains("watches[2]"), "{error}");
        assert!(error.contains("ClusterRole"), "{error}");
    }

    #[test]
    fn namespaced_kind_is_accepted() {
        let kind = WatchedKind {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
        };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Secret"));
        let (group_kind, _) = accept(0, &kind, resource, &capabilities(Scope::Namespaced)).unwrap();
        assert_eq!(group_kind, GroupKind::new("", "Secret"));
    }
}
