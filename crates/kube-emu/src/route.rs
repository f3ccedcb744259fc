//! Request URLs: which resource, namespace, object and subresource a path names, and the query
//! parameters of the request.

use std::collections::HashMap;

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/version`.
    Version,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: every other group.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`: the resources of a group version.
    GroupVersion {
        group: String,
        version: String,
    },
    /// `/openapi/v2`, `/openapi/v3`, `/openapi/v3/<path>`.
    OpenApi(String),
    Resource(ResourceTarget),
    /// `/__emu/<path>`: the emulator's own endpoints.
    Admin(String),
    Unknown,
}

/// A resource path: `/api/v1/namespaces/ns/configmaps/name/status` and its relatives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceTarget {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

fn resource_target(group: &str, version: &str, rest: &[&str]) -> Option<ResourceTarget> {
    let target = |plural: &str, namespace: Option<&str>, tail: &[&str]| {
        let (name, subresource) = match tail {
            [] => (None, None),
            [name] => (Some(*name), None),
            [name, subresource] => (Some(*name), Some(*subresource)),
            _ => return None,
        };
        Some(ResourceTarget {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: subresource.map(str::to_owned),
        })
    };
    match rest {
        // `namespaces/<ns>/<plural>/...` names namespaced objects, except that the namespace
        // object's own subresources (`namespaces/<ns>/status`, `/finalize`) share the shape.
        ["namespaces", namespace, sub]
            if group.is_empty() && matches!(*sub, "status" | "finalize") =>
        {
            target("namespaces", None, &[namespace, sub])
        }
        ["namespaces", namespace, plural, tail @ ..] => target(plural, Some(namespace), tail),
        [plural, tail @ ..] => target(plural, None, tail),
        [] => None,
    }
}

/// Decodes `%XX` escapes; invalid escapes are kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[index] {
            b'%' if index + 2 < bytes.len() => {
                match (hex(bytes[index + 1]), hex(bytes[index + 2])) {
                    (Some(high), Some(low)) => {
                        decoded.push((high * 16 + low) as u8);
                        index += 3;
                        continue;
                    }
                    _ => decoded.push(b'%'),
                }
            }
            other => decoded.push(other),
        }
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

pub fn parse_path(path: &str) -> Route {
    let segments: Vec<String> = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .map(percent_decode)
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["version"] => Route::Version,
        ["__emu", rest @ ..] => Route::Admin(rest.join("/")),
        ["openapi", rest @ ..] => Route::OpenApi(rest.join("/")),
        ["api"] => Route::CoreVersions,
        ["api", version] => Route::GroupVersion {
            group: String::new(),
            version: (*version).to_owned(),
        },
        ["api", version, rest @ ..] => {
            resource_target("", version, rest).map_or(Route::Unknown, Route::Resource)
        }
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["apis", group, version] => Route::GroupVersion {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        },
        ["apis", group, version, rest @ ..] => {
            resource_target(group, version, rest).map_or(Route::Unknown, Route::Resource)
        }
        _ => Route::Unknown,
    }
}

/// Query parameters; a repeated parameter keeps its last value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(query: Option<&str>) -> Query {
        let pairs = query
            .unwrap_or_default()
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let decode = |text: &str| percent_decode(&text.replace('+', " "));
                (decode(key), decode(value))
            })
            .collect();
        Query(pairs)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A boolean parameter: `watch=true`, `watch=1`.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    pub fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourceTarget {
        match parse_path(path) {
            Route::Resource(target) => target,
            other => panic!("{path} is not a resource path: {other:?}"),
        }
    }

    #[test]
    fn namespaced_object_paths() {
        let target = resource("/api/v1/namespaces/team/configmaps/settings");
        assert_eq!(target.namespace.as_deref(), Some("team"));
        assert_eq!(target.plural, "configmaps");
        assert_eq!(target.name.as_deref(), Some("settings"));
        let status = resource("/apis/apps/v1/namespaces/team/deployments/web/status");
        assert_eq!(status.subresource.as_deref(), Some("status"));
        assert_eq!(status.group, "apps");
    }

    #[test]
    fn the_namespace_object_and_its_status() {
        let namespace = resource("/api/v1/namespaces/team");
        assert_eq!(namespace.plural, "namespaces");
        assert_eq!(namespace.name.as_deref(), Some("team"));
        let status = resource("/api/v1/namespaces/team/status");
        assert_eq!(status.plural, "namespaces");
        assert_eq!(status.subresource.as_deref(), Some("status"));
        let list = resource("/api/v1/namespaces/team/secrets");
        assert_eq!(list.plural, "secrets");
        assert_eq!(list.name, None);
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse_path("/api"), Route::CoreVersions);
        assert_eq!(parse_path("/apis/apps"), Route::Group("apps".into()));
        assert!(matches!(
            parse_path("/apis/apps/v1"),
            Route::GroupVersion { .. }
        ));
        assert_eq!(parse_path("/nothing/here"), Route::Unknown);
        assert_eq!(parse_path("/__emu/faults"), Route::Admin("faults".into()));
    }

    #[test]
    fn query_values_are_decoded() {
        let query = Query::parse(Some(
            "labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&dryRun=All",
        ));
        assert_eq!(query.get("labelSelector"), Some("app=web,tier in (a)"));
        assert!(query.flag("watch"));
        assert!(query.dry_run());
    }
}
