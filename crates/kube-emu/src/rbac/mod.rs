//! RBAC, as kube-apiserver's RBAC authorizer decides it (opt-in: `--authorization rbac`, or
//! [`crate::KubeEmuBuilder::rbac`]).
//!
//! ## Model
//!
//! The policy is the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings in the
//! emulator's own store, read at every decision, so a binding created while the server runs
//! takes effect with the next request. A request is allowed when some rule reachable from a
//! binding that names the requester matches it; nothing is ever denied outright (RBAC has no
//! deny rules: an unmatched request gets "no opinion", which kube-apiserver turns into 403).
//!
//! - **Bindings**: every ClusterRoleBinding applies everywhere; a RoleBinding applies only to
//!   requests in its own namespace, whether it refers to a Role (of that namespace) or to a
//!   ClusterRole. Cluster-scoped requests (and non-resource URLs) see only ClusterRoleBindings.
//!   A request for a Namespace object itself (`GET /api/v1/namespaces/team`) is "in" that
//!   namespace, as kube-apiserver's request info has it.
//! - **Subjects**: `User` by name, `Group` by any group the requester holds (service accounts
//!   hold `system:serviceaccounts` and `system:serviceaccounts:<ns>`, everyone authenticated
//!   holds `system:authenticated`), `ServiceAccount` by `system:serviceaccount:<ns>:<name>`,
//!   its namespace defaulting to the RoleBinding's.
//! - **Rules**: verbs, apiGroups and resources each match exactly or by `*`; a subresource
//!   request (`pods/status`) matches `pods/status`, `*/status` or `*`, never plain `pods`;
//!   `resourceNames` restricts to named objects, so it never matches a request without a name
//!   (create, list, watch, deletecollection), except a list or watch whose field selector
//!   pins `metadata.name`, which kube-apiserver treats as naming that object; non-resource
//!   URLs match exactly, by `*`, or by a prefix ending in `*`.
//! - **Aggregation**: ClusterRoles with an `aggregationRule` have their rules filled in by the
//!   emulator, as kube-controller-manager's aggregation controller does: on every ClusterRole
//!   change, the union of the rules of the ClusterRoles its selectors pick (in name order,
//!   without duplicates) is written into its `rules`, so `kubectl get clusterrole admin -o
//!   yaml` shows what the authorizer uses. Chains (view → edit → admin) settle in one write.
//! - **The admin**: members of `system:masters` are allowed everything before RBAC is asked,
//!   as kube-apiserver's privileged-group authorizer does (the emulator's admin is in that
//!   group); the bootstrap `cluster-admin` binding says the same for `kubectl get`.
//! - **Bootstrap policy** ([`bootstrap`]): when RBAC is on the server starts with the roles
//!   clients rely on: `cluster-admin`, the aggregated `admin` / `edit` / `view` with their
//!   `system:aggregate-to-*` parts, `system:discovery`, `system:basic-user` and
//!   `system:public-info-viewer` with their bindings.
//!
//! The reasons are kube-apiserver's: an allowed request says `RBAC: allowed by
//! ClusterRoleBinding "x" of ClusterRole "y" to User "u"`; a refused one carries no reason
//! unless a binding referred to a missing role (`RBAC: clusterrole.rbac.authorization.k8s.io
//! "y" not found`), which then ends the Forbidden message.

pub mod bootstrap;
pub mod escalation;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::Value;

use crate::auth::{Identity, service_account_username};
use crate::authz::{Attributes, Authorizer, Decision, RuleList};
use crate::registry::ResourceId;
use crate::state::State;
use crate::store::{ObjectKey, Store};

/// The group kube-apiserver's privileged-group authorizer allows everything.
pub const MASTERS: &str = "system:masters";

const GROUP: &str = "rbac.authorization.k8s.io";

pub fn roles() -> ResourceId {
    ResourceId::new(GROUP, "roles")
}

pub fn cluster_roles() -> ResourceId {
    ResourceId::new(GROUP, "clusterroles")
}

/// Whether `resource` is ClusterRoles (without allocating: every write asks).
pub fn is_cluster_roles(resource: &ResourceId) -> bool {
    resource.group == GROUP && resource.plural == "clusterroles"
}

pub fn role_bindings() -> ResourceId {
    ResourceId::new(GROUP, "rolebindings")
}

pub fn cluster_role_bindings() -> ResourceId {
    ResourceId::new(GROUP, "clusterrolebindings")
}

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

fn contains_or_star(list: &[String], wanted: &str) -> bool {
    list.iter().any(|item| item == "*" || item == wanted)
}

impl PolicyRule {
    /// Whether this rule allows `attributes`, with kube's matching rules (see the module docs).
    pub fn allows(&self, attributes: &Attributes) -> bool {
        if !contains_or_star(&self.verbs, &attributes.verb) {
            return false;
        }
        match &attributes.path {
            Some(path) => self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || url == path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| path.starts_with(prefix))
            }),
            None => {
                contains_or_star(&self.api_groups, &attributes.group)
                    && self.matches_resource(&attributes.resource, &attributes.subresource)
                    && (self.resource_names.is_empty()
                        || self.resource_names.contains(&attributes.name))
            }
        }
    }

    fn matches_resource(&self, resource: &str, subresource: &str) -> bool {
        let combined = if subresource.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}/{subresource}")
        };
        self.resources.iter().any(|entry| {
            entry == "*"
                || *entry == combined
                || (!subresource.is_empty() && entry.strip_prefix("*/") == Some(subresource))
        })
    }
}

/// One subject of a binding.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Subject {
    kind: String,
    name: String,
    namespace: String,
}

impl Subject {
    /// Whether the subject names `identity`; `binding_namespace` is empty for a
    /// ClusterRoleBinding.
    fn names(&self, identity: &Identity, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => identity.username == self.name,
            "Group" => identity.groups.contains(&self.name),
            "ServiceAccount" => {
                let namespace = if self.namespace.is_empty() {
                    binding_namespace
                } else {
                    &self.namespace
                };
                !namespace.is_empty()
                    && identity.username == service_account_username(namespace, &self.name)
            }
            _ => false,
        }
    }

    /// As kube-apiserver describes the subject in an allow reason.
    fn describe(&self, binding_namespace: &str) -> String {
        match self.kind.as_str() {
            "ServiceAccount" => {
                let namespace = if self.namespace.is_empty() {
                    binding_namespace
                } else {
                    &self.namespace
                };
                format!("{} \"{}/{namespace}\"", self.kind, self.name)
            }
            _ => format!("{} \"{}\"", self.kind, self.name),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RoleRef {
    kind: String,
    name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Binding {
    subjects: Vec<Subject>,
    role_ref: RoleRef,
}

/// The rules of `object` (a Role or ClusterRole); rules that do not decode match nothing.
pub fn rules_of(object: &Value) -> Vec<PolicyRule> {
    object
        .get("rules")
        .and_then(Value::as_array)
        .map(|rules| {
            rules
                .iter()
                .filter_map(|rule| serde_json::from_value(rule.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The roles that apply to `identity` in `namespace` (empty: cluster scope only), with the
/// description of the binding that grants each, in kube's order: ClusterRoleBindings, then
/// the namespace's RoleBindings. `visit` returns `false` to stop. The errors are the bindings
/// whose role is missing, worded as kube-apiserver's.
fn visit_roles(
    store: &Store,
    identity: &Identity,
    namespace: &str,
    visit: &mut dyn FnMut(&str, &Value) -> bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    let cluster = store
        .list(&cluster_role_bindings(), None)
        .map(|(_, binding)| ("ClusterRoleBinding", "", binding));
    let namespaced = store
        .list(&role_bindings(), Some(namespace))
        .filter(|_| !namespace.is_empty())
        .map(|(_, binding)| ("RoleBinding", namespace, binding));
    for (binding_kind, binding_namespace, object) in cluster.chain(namespaced) {
        let Ok(binding) = serde_json::from_value::<Binding>((**object).clone()) else {
            continue;
        };
        let Some(subject) = binding
            .subjects
            .iter()
            .find(|subject| subject.names(identity, binding_namespace))
        else {
            continue;
        };
        let role_name = &binding.role_ref.name;
        let role = match binding.role_ref.kind.as_str() {
            "ClusterRole" => store.get(&cluster_roles(), &ObjectKey::new("", role_name)),
            "Role" if !binding_namespace.is_empty() => {
                store.get(&roles(), &ObjectKey::new(binding_namespace, role_name))
            }
            _ => continue,
        };
        let Some(role) = role else {
            errors.push(format!(
                "{}.{GROUP} \"{role_name}\" not found",
                binding.role_ref.kind.to_lowercase(),
            ));
            continue;
        };
        let name = crate::meta::name(object);
        let binding_name = if binding_namespace.is_empty() {
            name.to_owned()
        } else {
            format!("{name}/{binding_namespace}")
        };
        let source = format!(
            "{binding_kind} \"{binding_name}\" of {} \"{role_name}\" to {}",
            binding.role_ref.kind,
            subject.describe(binding_namespace)
        );
        if !visit(&source, role) {
            break;
        }
    }
    errors
}

/// kube's aggregate of errors: one as itself, several as `[a, b]`, duplicates once.
fn aggregate_errors(all: &[String]) -> String {
    let mut errors: Vec<&String> = Vec::new();
    for error in all {
        if !errors.contains(&error) {
            errors.push(error);
        }
    }
    match errors.as_slice() {
        [] => String::new(),
        [one] => (*one).clone(),
        many => {
            let mut text = String::from("[");
            for (index, error) in many.iter().enumerate() {
                let _ = write!(text, "{}{error}", if index == 0 { "" } else { ", " });
            }
            text.push(']');
            text
        }
    }
}

/// RBAC's decision on `attributes` for `identity`, from the policy in `store`.
pub fn decide(store: &Store, identity: &Identity, attributes: &Attributes) -> Decision {
    let mut allowed_by = None;
    // Non-resource URLs are cluster-wide: only ClusterRoleBindings reach them.
    let namespace = match attributes.path {
        Some(_) => "",
        None => attributes.namespace.as_str(),
    };
    let errors = visit_roles(store, identity, namespace, &mut |source, role| {
        if rules_of(role).iter().any(|rule| rule.allows(attributes)) {
            allowed_by = Some(source.to_owned());
            return false;
        }
        true
    });
    match allowed_by {
        Some(source) => Decision {
            allowed: true,
            reason: format!("RBAC: allowed by {source}"),
        },
        None if errors.is_empty() => Decision {
            allowed: false,
            reason: String::new(),
        },
        None => Decision {
            allowed: false,
            reason: format!("RBAC: {}", aggregate_errors(&errors)),
        },
    }
}

/// Every rule that applies to `identity` in `namespace`, as a SelfSubjectRulesReview lists them.
pub fn rules_for(store: &Store, identity: &Identity, namespace: &str) -> RuleList {
    let mut rules = Vec::new();
    let errors = visit_roles(store, identity, namespace, &mut |_, role| {
        rules.extend(
            role.get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .cloned(),
        );
        true
    });
    RuleList {
        rules,
        incomplete: !errors.is_empty(),
        evaluation_error: aggregate_errors(&errors),
    }
}

/// The RBAC authorizer over the server's live state.
#[derive(Debug)]
pub struct RbacAuthorizer {
    state: Arc<Mutex<State>>,
}

impl RbacAuthorizer {
    pub fn new(state: Arc<Mutex<State>>) -> RbacAuthorizer {
        RbacAuthorizer { state }
    }
}

impl RbacAuthorizer {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn is_master(identity: &Identity) -> bool {
    identity.groups.iter().any(|group| group == MASTERS)
}

impl Authorizer for RbacAuthorizer {
    fn denies_explicitly(&self, _identity: &Identity, _attributes: &Attributes) -> bool {
        false
    }

    fn rules_for(&self, identity: &Identity, namespace: &str) -> RuleList {
        if is_master(identity) {
            return RuleList::everything();
        }
        rules_for(&self.lock().store, identity, namespace)
    }

    fn authorize(&self, identity: &Identity, attributes: &Attributes) -> Decision {
        if is_master(identity) {
            // kube-apiserver's privileged-group authorizer answers before RBAC, without reason.
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        decide(&self.lock().store, identity, attributes)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(value: Value) -> PolicyRule {
        serde_json::from_value(value).expect("a rule")
    }

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: "team".into(),
            name: name.into(),
            path: None,
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: Some(path.into()),
            ..Attributes::default()
        }
    }

    #[test]
    fn subresources_match_their_own_entry_star_slash_or_star_only() {
        let status = request("update", "apps", "deployments", "status", "web");
        let plain =
            rule(json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]}));
        assert!(!plain.allows(&status));
        for entry in ["deployments/status", "*/status", "*"] {
            let r = rule(json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": [entry]}));
            assert!(r.allows(&status), "{entry}");
        }
        let other = rule(json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*/scale"]}));
        assert!(!other.allows(&status));
        // `deployments/*` is no pattern in Kubernetes: it names a subresource called "*".
        let slash_star =
            rule(json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments/*"]}));
        assert!(!slash_star.allows(&status));
        let sub_only = rule(
            json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments/status"]}),
        );
        assert!(!sub_only.allows(&request("update", "apps", "deployments", "", "web")));
    }

    #[test]
    fn api_groups_and_verbs_match_exactly_or_by_star() {
        let r = rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}));
        assert!(r.allows(&request("get", "", "configmaps", "", "a")));
        assert!(!r.allows(&request("list", "", "configmaps", "", "")));
        assert!(!r.allows(&request("get", "apps", "configmaps", "", "a")));
        let any = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["configmaps"]}));
        assert!(any.allows(&request("delete", "example.com", "configmaps", "", "a")));
    }

    #[test]
    fn resource_names_never_match_a_request_without_a_name() {
        let r = rule(
            json!({"verbs": ["get", "list", "create"], "apiGroups": [""],
                            "resources": ["configmaps"], "resourceNames": ["settings"]}),
        );
        assert!(r.allows(&request("get", "", "configmaps", "", "settings")));
        assert!(!r.allows(&request("get", "", "configmaps", "", "other")));
        assert!(!r.allows(&request("list", "", "configmaps", "", "")));
        assert!(!r.allows(&request("create", "", "configmaps", "", "")));
    }

    #[test]
    fn non_resource_urls_match_exactly_by_star_or_by_a_star_prefix() {
        let r = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        assert!(r.allows(&path("get", "/healthz")));
        assert!(!r.allows(&path("get", "/healthz/ping")));
        assert!(r.allows(&path("get", "/apis/apps/v1")));
        assert!(!r.allows(&path("get", "/api")));
        assert!(!r.allows(&path("post", "/healthz")));
        assert!(rule(json!({"verbs": ["*"], "nonResourceURLs": ["*"]})).allows(&path("get", "/x")));
        // A resource rule never matches a path, nor a path rule a resource.
        let resources = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(!resources.allows(&path("get", "/api")));
        assert!(!r.allows(&request("get", "", "configmaps", "", "a")));
    }

    #[test]
    fn subjects_name_users_groups_and_service_accounts() {
        let robot = Identity::service_account("team", "robot");
        let subject = |value: Value| serde_json::from_value::<Subject>(value).expect("subject");
        assert!(subject(json!({"kind": "ServiceAccount", "name": "robot"})).names(&robot, "team"));
        assert!(!subject(json!({"kind": "ServiceAccount", "name": "robot"})).names(&robot, ""));
        assert!(
            !subject(json!({"kind": "ServiceAccount", "name": "robot", "namespace": "other"}))
                .names(&robot, "team")
        );
        for group in [
            "system:serviceaccounts",
            "system:serviceaccounts:team",
            "system:authenticated",
        ] {
            assert!(subject(json!({"kind": "Group", "name": group})).names(&robot, ""));
        }
        assert!(
            !subject(json!({"kind": "Group", "name": "system:serviceaccounts:other"}))
                .names(&robot, "")
        );
        assert!(
            subject(json!({"kind": "User", "name": "system:serviceaccount:team:robot"}))
                .names(&robot, "")
        );
        assert_eq!(
            subject(json!({"kind": "ServiceAccount", "name": "robot"})).describe("team"),
            "ServiceAccount \"robot/team\""
        );
    }
}
