//! The kinds the server serves: the built-in table and the kinds that CustomResourceDefinitions
//! add while the server runs.
//!
//! A kind is stored once under its [`ResourceId`] (group + plural) in its storage version and
//! served in every version marked served; converting between versions of a custom resource only
//! rewrites `apiVersion`, as a CRD with the `None` conversion strategy does.

mod builtin;
pub mod crd;
pub mod view;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::schema::StructuralSchema;

/// Group and plural resource name: the identity of a stored collection.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId {
    pub group: String,
    pub plural: String,
}

impl ResourceId {
    pub fn new(group: &str, plural: &str) -> ResourceId {
        ResourceId {
            group: group.to_owned(),
            plural: plural.to_owned(),
        }
    }
}

/// `configmaps` or `deployments.apps`, as kube-apiserver names a group-resource in messages.
impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

/// Which names a kind accepts (kube's per-kind name validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain: most kinds.
    Subdomain,
    /// RFC 1123 label: Namespace, Service.
    Label,
    /// Anything usable as a path segment: RBAC kinds.
    PathSegment,
}

/// A column of `kubectl get` output (a CRD's additionalPrinterColumns).
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub column_type: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// Where a kind keeps what its `/scale` subresource shows (a CRD's `subresources.scale`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSubresource {
    /// `.spec.replicas`
    pub spec_replicas_path: String,
    /// `.status.replicas`
    pub status_replicas_path: String,
    /// A path to the selector as a string (`.status.selector`); `None` for the built-in
    /// workloads, whose selector is the `spec.selector` label selector.
    pub label_selector_path: Option<String>,
}

impl ScaleSubresource {
    /// The paths of Deployments, ReplicaSets, StatefulSets and ReplicationControllers.
    pub fn workload() -> ScaleSubresource {
        ScaleSubresource {
            spec_replicas_path: ".spec.replicas".to_owned(),
            status_replicas_path: ".status.replicas".to_owned(),
            label_selector_path: None,
        }
    }
}

/// One served version of a kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedVersion {
    pub name: String,
    /// Whether clients can use this version (a CRD's storage version may be unserved).
    pub served: bool,
    pub status_subresource: bool,
    pub scale: Option<ScaleSubresource>,
    pub printer_columns: Vec<PrinterColumn>,
    /// The CRD's `openAPIV3Schema`, for custom resources.
    pub schema: Option<Value>,
    /// The same schema compiled for pruning, defaulting and validation.
    pub structural: Option<StructuralSchema>,
}

/// Everything the server knows about one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceKind {
    pub id: ResourceId,
    pub kind: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Served versions, the storage version first.
    pub versions: Vec<ServedVersion>,
    pub verbs: Vec<&'static str>,
    pub name_rule: NameRule,
    /// Whether `metadata.generation` tracks changes outside metadata and status.
    pub tracks_generation: bool,
    /// Field-selector labels beyond `metadata.name` / `metadata.namespace`.
    pub field_labels: Vec<&'static str>,
    /// Subresources that read the whole object and write one field of it, as
    /// `(subresource, field path)`: a Pod's `ephemeralcontainers` writes
    /// `spec.ephemeralContainers`, a CertificateSigningRequest's `approval` writes
    /// `status.conditions`.
    pub field_subresources: Vec<(&'static str, &'static str)>,
    /// For a kind served from another kind's storage (`events.k8s.io` Events), that storage
    /// and the conversion between the two shapes.
    pub view: Option<view::StorageView>,
    /// Whether the kind comes from a CustomResourceDefinition.
    pub custom: bool,
}

/// Every verb of an ordinary resource, as discovery lists them.
pub const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceKind {
    pub fn storage_version(&self) -> &ServedVersion {
        &self.versions[0]
    }

    /// The served version called `name`.
    pub fn version(&self, name: &str) -> Option<&ServedVersion> {
        self.versions
            .iter()
            .find(|version| version.name == name && version.served)
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.id.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{}", self.id.group, version)
        }
    }

    pub fn storage_api_version(&self) -> String {
        self.api_version(&self.storage_version().name)
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// Where this kind's objects are stored: its own collection, or the one it is a view of.
    pub fn storage_id(&self) -> &ResourceId {
        self.view.as_ref().map_or(&self.id, |view| &view.storage)
    }

    /// The field a subresource of [`ResourceKind::field_subresources`] writes.
    pub fn field_subresource(&self, subresource: &str) -> Option<&'static str> {
        self.field_subresources
            .iter()
            .find(|(name, _)| *name == subresource)
            .map(|(_, path)| *path)
    }

    /// Whether the kind has a status subresource in any version (they agree in practice).
    pub fn has_status_subresource(&self) -> bool {
        self.storage_version().status_subresource
    }
}

/// The served kinds, keyed by group + plural.
#[derive(Debug, Clone)]
pub struct Registry {
    kinds: BTreeMap<ResourceId, Arc<ResourceKind>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::with_builtins()
    }
}

impl Registry {
    /// The registry of a fresh server: the built-in kinds only.
    pub fn with_builtins() -> Registry {
        let kinds = builtin::kinds()
            .into_iter()
            .map(|kind| (kind.id.clone(), Arc::new(kind)))
            .collect();
        Registry { kinds }
    }

    pub fn get(&self, id: &ResourceId) -> Option<&Arc<ResourceKind>> {
        self.kinds.get(id)
    }

    /// The kind served at `/apis/<group>/<version>/<plural>`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceKind>> {
        self.kinds
            .get(&ResourceId::new(group, plural))
            .filter(|kind| kind.version(version).is_some())
    }

    /// Adds or replaces a custom kind.
    pub fn register(&mut self, kind: ResourceKind) {
        self.kinds.insert(kind.id.clone(), Arc::new(kind));
    }

    pub fn unregister(&mut self, id: &ResourceId) {
        self.kinds.remove(id);
    }

    /// Served groups with their versions, preferred version first, in discovery order:
    /// built-in groups first, then custom groups alphabetically.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>, bool)> = Vec::new();
        for kind in self.kinds.values() {
            let entry = match groups
                .iter_mut()
                .find(|(group, _, _)| *group == kind.id.group)
            {
                Some(entry) => entry,
                None => {
                    groups.push((kind.id.group.clone(), Vec::new(), kind.custom));
                    groups.last_mut().expect("pushed above")
                }
            };
            for version in kind.versions.iter().filter(|version| version.served) {
                if !entry.1.contains(&version.name) {
                    entry.1.push(version.name.clone());
                }
            }
        }
        groups.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
        groups
            .into_iter()
            .map(|(group, versions, _)| (group, versions))
            .collect()
    }

    /// Kinds served in `group/version`.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a Arc<ResourceKind>> + 'a {
        self.kinds
            .values()
            .filter(move |kind| kind.id.group == group && kind.version(version).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_include_leases_and_the_core_group_first() {
        let registry = Registry::with_builtins();
        let lease = registry
            .lookup("coordination.k8s.io", "v1", "leases")
            .expect("leases are built in");
        assert!(lease.namespaced);
        assert_eq!(registry.groups()[0].0, "");
        assert!(registry.lookup("", "v2", "configmaps").is_none());
    }

    #[test]
    fn resource_ids_print_like_kube_group_resources() {
        assert_eq!(ResourceId::new("", "pods").to_string(), "pods");
        assert_eq!(
            ResourceId::new("apps", "deployments").to_string(),
            "deployments.apps"
        );
    }
}
