//! Webhook configurations as stored objects, read into [`Webhook`]s, and which webhooks a
//! request matches: rules, scope, matchPolicy, namespaceSelector and objectSelector, evaluated as
//! kube-apiserver's webhook dispatcher does.

use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::meta;
use crate::registry::ResourceId;
use crate::selector::LabelSelector;
use crate::store::Store;

/// kube-apiserver's default and maximum `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
const MAX_TIMEOUT_SECONDS: u64 = 30;

pub fn mutating_configurations() -> ResourceId {
    ResourceId::new(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    )
}

pub fn validating_configurations() -> ResourceId {
    ResourceId::new(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    )
}

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a configuration.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub name: String,
    rules: Vec<Value>,
    equivalent: bool,
    namespace_selector: Result<LabelSelector, String>,
    object_selector: Result<LabelSelector, String>,
    /// failurePolicy Ignore.
    pub fail_open: bool,
    pub timeout: Duration,
    pub destination: Result<Destination, String>,
    /// The PEM CA certificates the webhook's serving certificate must chain to.
    pub ca_bundle: Result<Option<Vec<u8>>, String>,
}

/// What a request looks like to the rules.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespaced: bool,
}

fn listed(values: Option<&Value>, wanted: &str) -> bool {
    meta::string_list(values)
        .iter()
        .any(|value| value == "*" || value == wanted)
}

fn selector(webhook: &Value, field: &str) -> Result<LabelSelector, String> {
    match webhook.get(field) {
        None | Some(Value::Null) => Ok(LabelSelector::default()),
        Some(value) => {
            LabelSelector::from_object(value).map_err(|error| format!("{field}: {error}"))
        }
    }
}

fn destination(client: &Value) -> Result<Destination, String> {
    if let Some(url) = client.get("url").and_then(Value::as_str) {
        return Ok(Destination::Url(url.to_owned()));
    }
    let service = client
        .get("service")
        .ok_or("clientConfig needs url or service")?;
    let text = |field: &str| {
        service
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let port = match service.get("port").and_then(Value::as_u64) {
        None => 443,
        Some(port) => {
            u16::try_from(port).map_err(|_| format!("service port {port} is out of range"))?
        }
    };
    Ok(Destination::Service {
        namespace: text("namespace"),
        name: text("name"),
        path: text("path"),
        port,
    })
}

fn ca_bundle(client: &Value) -> Result<Option<Vec<u8>>, String> {
    match client.get("caBundle").and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Some)
            .map_err(|error| format!("caBundle is not base64: {error}")),
    }
}

impl Webhook {
    fn parse(webhook: &Value) -> Webhook {
        let client = webhook.get("clientConfig").cloned().unwrap_or(Value::Null);
        let timeout = webhook
            .get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        Webhook {
            name: webhook
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            rules: webhook
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            // v1 defaults matchPolicy to Equivalent.
            equivalent: webhook.get("matchPolicy").and_then(Value::as_str) != Some("Exact"),
            namespace_selector: selector(webhook, "namespaceSelector"),
            object_selector: selector(webhook, "objectSelector"),
            fail_open: webhook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
            timeout: Duration::from_secs(timeout),
            destination: destination(&client),
            ca_bundle: ca_bundle(&client),
        }
    }

    /// Whether any rule names this operation on this resource.
    pub fn rules_match(&self, request: &RequestFacts<'_>) -> bool {
        self.rules.iter().any(|rule| {
            let resource_listed = meta::string_list(rule.get("resources"))
                .iter()
                .any(|entry| {
                    let (resource, subresource) = entry.split_once('/').unwrap_or((entry, ""));
                    (resource == "*" || resource == request.resource)
                        && (subresource == "*" || subresource == request.subresource)
                });
            let scope = rule.get("scope").and_then(Value::as_str).unwrap_or("*");
            let scope_matches = match scope {
                "Cluster" => !request.namespaced,
                "Namespaced" => request.namespaced,
                _ => true,
            };
            listed(rule.get("operations"), request.operation)
                && listed(rule.get("apiGroups"), request.group)
                && (self.equivalent || listed(rule.get("apiVersions"), request.version))
                && resource_listed
                && scope_matches
        })
    }

    /// The namespaceSelector against the labels of `namespace` (the request's namespace, or the
    /// Namespace object itself); `None` for other cluster-scoped objects, which it never skips.
    pub fn namespace_selected(&self, namespace: Option<&Value>) -> Result<bool, String> {
        let selector = self.namespace_selector.as_ref().map_err(Clone::clone)?;
        Ok(namespace.is_none_or(|namespace| selector.matches(namespace)))
    }

    /// The objectSelector against the new or the old object.
    pub fn object_selected(
        &self,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<bool, String> {
        let selector = self.object_selector.as_ref().map_err(Clone::clone)?;
        if *selector == LabelSelector::default() {
            return Ok(true);
        }
        Ok(object.is_some_and(|o| selector.matches(o)) || old.is_some_and(|o| selector.matches(o)))
    }
}

/// The webhooks of every stored configuration of `resource`, in the order kube calls them:
/// by configuration name, then as listed.
pub fn webhooks(store: &Store, resource: &ResourceId) -> Vec<Webhook> {
    // The store lists objects by key, and cluster-scoped keys are the names: already sorted.
    store
        .list(resource, None)
        .flat_map(|(_, configuration)| {
            configuration
                .get("webhooks")
                .and_then(Value::as_array)
                .map(|hooks| hooks.iter().map(Webhook::parse).collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn facts<'a>(operation: &'a str, resource: &'a str, subresource: &'a str) -> RequestFacts<'a> {
        RequestFacts {
            operation,
            group: "",
            version: "v1",
            resource,
            subresource,
            namespaced: true,
        }
    }

    fn webhook(rule: Value) -> Webhook {
        Webhook::parse(
            &json!({"name": "w.example.com", "rules": [rule], "clientConfig": {"url": "https://x"}}),
        )
    }

    #[test]
    fn resources_match_main_resources_subresources_and_wildcards() {
        let pods = webhook(
            json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}),
        );
        assert!(pods.rules_match(&facts("CREATE", "pods", "")));
        assert!(!pods.rules_match(&facts("CREATE", "pods", "status")));
        assert!(!pods.rules_match(&facts("UPDATE", "pods", "")));
        let status = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/status"]}),
        );
        assert!(status.rules_match(&facts("UPDATE", "pods", "status")));
        assert!(!status.rules_match(&facts("UPDATE", "pods", "")));
        let everything = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}),
        );
        assert!(everything.rules_match(&facts("DELETE", "secrets", "")));
        assert!(everything.rules_match(&facts("UPDATE", "pods", "status")));
        let main_only = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
        );
        assert!(!main_only.rules_match(&facts("UPDATE", "pods", "status")));
    }

    #[test]
    fn scope_and_match_policy() {
        let cluster = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v2"], "resources": ["*"], "scope": "Cluster"}),
        );
        assert!(!cluster.rules_match(&facts("CREATE", "pods", "")));
        let exact = Webhook::parse(&json!({"name": "w", "matchPolicy": "Exact",
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v2"], "resources": ["*"]}]}));
        assert!(!exact.rules_match(&facts("CREATE", "pods", "")));
        let equivalent = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v2"], "resources": ["*"]}),
        );
        assert!(equivalent.rules_match(&facts("CREATE", "pods", "")));
    }

    #[test]
    fn defaults_and_limits() {
        let hook = Webhook::parse(
            &json!({"name": "w", "timeoutSeconds": 99, "clientConfig": {"service": {"namespace": "ns", "name": "svc"}}}),
        );
        assert_eq!(hook.timeout, Duration::from_secs(30));
        assert!(!hook.fail_open);
        assert_eq!(
            hook.destination,
            Ok(Destination::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                path: String::new(),
                port: 443
            })
        );
        let broken = Webhook::parse(&json!({"name": "w", "clientConfig": {"caBundle": "%%%"}}));
        assert!(broken.destination.is_err());
        assert!(broken.ca_bundle.is_err());
    }

    #[test]
    fn selectors_use_the_namespace_and_either_object() {
        let hook = Webhook::parse(&json!({"name": "w",
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}));
        let labelled = |labels: Value| json!({"metadata": {"labels": labels}});
        assert_eq!(
            hook.namespace_selected(Some(&labelled(json!({"team": "a"})))),
            Ok(true)
        );
        assert_eq!(
            hook.namespace_selected(Some(&labelled(json!({})))),
            Ok(false)
        );
        assert_eq!(hook.namespace_selected(None), Ok(true));
        let skipped = labelled(json!({"skip": "yes"}));
        assert_eq!(hook.object_selected(Some(&skipped), None), Ok(false));
        assert_eq!(
            hook.object_selected(Some(&skipped), Some(&labelled(json!({})))),
            Ok(true)
        );
    }
}
