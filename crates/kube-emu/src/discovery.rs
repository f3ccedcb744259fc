//! Discovery: aggregated discovery (`apidiscovery.k8s.io/v2`, one document for `/api` and one
//! for `/apis`) when the client asks for it, as kubectl and kube-rs' `run_aggregated` do, and
//! legacy discovery (`/api`, `/apis`, `/apis/<group>`, `/api/v1`, `/apis/<group>/<version>`)
//! otherwise; and `/version`.

use serde_json::{Value, json};

use crate::api::ServeConfig;
use crate::registry::{Registry, ResourceKind};
use crate::status::ApiError;

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": concat!("v1.32.0-arbor-kube-emu-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "none",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions(config: &ServeConfig) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": config.server_address}],
    })
}

fn group_document(group: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> = versions
        .iter()
        .map(|version| json!({"groupVersion": format!("{group}/{version}"), "version": version}))
        .collect();
    json!({
        "name": group,
        "versions": entries,
        "preferredVersion": entries.first().cloned().unwrap_or_else(|| json!({})),
    })
}

pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, versions)| group_document(&group, &versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(registry: &Registry, name: &str) -> Result<Value, ApiError> {
    let (group, versions) = registry
        .groups()
        .into_iter()
        .find(|(group, _)| group == name && !group.is_empty())
        .ok_or_else(ApiError::no_such_route)?;
    let mut document = group_document(&group, &versions);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Ok(document)
}

/// A subresource as discovery lists it.
struct Subresource {
    name: &'static str,
    verbs: &'static [&'static str],
    /// Another kind than the resource's own (`/scale` answers autoscaling/v1 Scale).
    other_kind: Option<(&'static str, &'static str, &'static str)>,
}

/// The subresources of a kind in a version, with their verbs.
fn subresources(kind: &ResourceKind, version: &str) -> Vec<Subresource> {
    let mut subresources = Vec::new();
    let served = kind.version(version);
    if served.is_some_and(|served| served.status_subresource) {
        subresources.push(Subresource {
            name: "status",
            verbs: &["get", "patch", "update"],
            other_kind: None,
        });
    }
    if served.is_some_and(|served| served.scale.is_some()) {
        subresources.push(Subresource {
            name: "scale",
            verbs: &["get", "patch", "update"],
            other_kind: Some(("autoscaling", "v1", "Scale")),
        });
    }
    if kind.kind == "Namespace" && kind.id.group.is_empty() {
        subresources.push(Subresource {
            name: "finalize",
            verbs: &["update"],
            other_kind: None,
        });
    }
    subresources
}

/// Short names and categories, where a kind has them.
fn add_names(entry: &mut Value, kind: &ResourceKind) {
    if !kind.short_names.is_empty() {
        entry["shortNames"] = json!(kind.short_names);
    }
    if !kind.categories.is_empty() {
        entry["categories"] = json!(kind.categories);
    }
}

/// `/api/v1`, `/apis/<group>/<version>`: an APIResourceList.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Result<Value, ApiError> {
    let mut resources = Vec::new();
    for kind in registry.in_group_version(group, version) {
        let mut resource = json!({
            "name": kind.id.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": kind.verbs,
        });
        add_names(&mut resource, kind);
        resources.push(resource);
        for subresource in subresources(kind, version) {
            let mut entry = json!({
                "name": format!("{}/{}", kind.id.plural, subresource.name),
                "singularName": "",
                "namespaced": kind.namespaced,
                "kind": kind.kind,
                "verbs": subresource.verbs,
            });
            if let Some((group, version, other)) = subresource.other_kind {
                entry["group"] = json!(group);
                entry["version"] = json!(version);
                entry["kind"] = json!(other);
            }
            resources.push(entry);
        }
    }
    if resources.is_empty() {
        return Err(ApiError::no_such_route());
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Ok(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// The aggregated-discovery version a client asked for in `Accept`, if any: `v2` or `v2beta1`.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    accept
        .split(',')
        .filter(|media| media.contains("as=APIGroupDiscoveryList"))
        .find_map(|media| {
            media
                .split(';')
                .map(str::trim)
                .find_map(|parameter| match parameter {
                    "v=v2" => Some("v2"),
                    "v=v2beta1" => Some("v2beta1"),
                    _ => None,
                })
        })
}

/// The Content-Type of an aggregated discovery document.
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// Aggregated discovery (`apidiscovery.k8s.io`): `/api` (core only) or `/apis` (every other
/// group), every version with its resources, in one document.
pub fn aggregated(registry: &Registry, core: bool, discovery_version: &str) -> Value {
    let items: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    let resources: Vec<Value> = registry
                        .in_group_version(&group, version)
                        .map(|kind| {
                            let response_kind = json!({"group": group, "version": version, "kind": kind.kind});
                            let mut entry = json!({
                                "resource": kind.id.plural,
                                "responseKind": response_kind,
                                "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": kind.singular,
                                "verbs": kind.verbs,
                            });
                            add_names(&mut entry, kind);
                            let subresources: Vec<Value> = subresources(kind, version)
                                .into_iter()
                                .map(|subresource| {
                                    let response_kind = match subresource.other_kind {
                                        Some((group, version, other)) => {
                                            json!({"group": group, "version": version, "kind": other})
                                        }
                                        None => response_kind.clone(),
                                    };
                                    json!({"subresource": subresource.name, "responseKind": response_kind, "verbs": subresource.verbs})
                                })
                                .collect();
                            if !subresources.is_empty() {
                                entry["subresources"] = json!(subresources);
                            }
                            entry
                        })
                        .collect();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let metadata = if group.is_empty() { json!({}) } else { json!({"name": group}) };
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{discovery_version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_group_lists_configmaps_and_namespace_subresources() {
        let registry = Registry::with_builtins();
        let core = resources(&registry, "", "v1").expect("core group served");
        let names: Vec<&str> = core["resources"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"configmaps"));
        assert!(names.contains(&"namespaces/status"));
        assert!(names.contains(&"namespaces/finalize"));
    }

    #[test]
    fn aggregated_discovery_is_chosen_from_the_accept_header() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(kubectl), Some("v2"));
        assert_eq!(aggregated_version("application/json"), None);
        let registry = Registry::with_builtins();
        let core = aggregated(&registry, true, "v2");
        assert_eq!(core["items"].as_array().expect("items").len(), 1);
        let apps = aggregated(&registry, false, "v2");
        let groups: Vec<&str> = apps["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|item| item["metadata"]["name"].as_str())
            .collect();
        assert!(groups.contains(&"apps") && !groups.contains(&""));
    }

    #[test]
    fn unknown_groups_are_not_found() {
        let registry = Registry::with_builtins();
        assert_eq!(group(&registry, "example.com").unwrap_err().code, 404);
        assert_eq!(resources(&registry, "apps", "v2").unwrap_err().code, 404);
        assert!(
            groups(&registry)["groups"]
                .as_array()
                .expect("list")
                .iter()
                .any(|g| g["name"] == "coordination.k8s.io")
        );
    }
}
