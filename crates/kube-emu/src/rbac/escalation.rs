//! Escalation prevention, as kube-apiserver's RBAC storage does it: nobody grants, through a
//! Role, a ClusterRole or a binding, a permission they do not hold themselves.
//!
//! - **Roles and ClusterRoles**: a create or update is allowed when the requester holds every
//!   permission the role's rules grant (each rule broken down to one verb, group, resource and
//!   name, each piece covered by one rule the requester holds, in the namespace of the write),
//!   or holds the `escalate` verb on `roles` / `clusterroles`. Setting (or keeping) a
//!   ClusterRole's `aggregationRule` needs `*` on everything, since it can gather any rule.
//! - **Bindings**: allowed when the requester holds `bind` on the referenced role (by name, so
//!   `resourceNames` apply; in the binding's namespace, or cluster-wide for a
//!   ClusterRoleBinding), or holds every permission of the referenced role.
//! - Members of `system:masters` are never checked; an update that changes only what the
//!   garbage collector needs (owner references, finalizers) is not checked either.
//!
//! A refusal is kube-apiserver's 403: `roles.rbac.authorization.k8s.io "x" is forbidden: user
//! "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently
//! held:` followed by the missing rules, one a line, sorted, in kube's compact form
//! (`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`), verbs of the same group
//! and resource merged.

use serde_json::Value;

use super::{GROUP, PolicyRule, is_master, rules_for};
use crate::api::Shared;
use crate::auth::Identity;
use crate::authz::{Attributes, Authorizer};
use crate::registry::ResourceId;
use crate::status::ApiError;
use crate::store::{ObjectKey, Store};

/// The four RBAC kinds whose writes are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl Checked {
    fn of(resource: &ResourceId) -> Option<Checked> {
        if resource.group != GROUP {
            return None;
        }
        Some(match resource.plural.as_str() {
            "roles" => Checked::Role,
            "clusterroles" => Checked::ClusterRole,
            "rolebindings" => Checked::RoleBinding,
            "clusterrolebindings" => Checked::ClusterRoleBinding,
            _ => return None,
        })
    }
}

/// One write of an RBAC object: who writes what, where.
#[derive(Debug)]
pub struct RbacWrite<'a> {
    pub identity: &'a Identity,
    pub resource: &'a ResourceId,
    /// The namespace of the request (empty for the cluster-scoped kinds).
    pub namespace: &'a str,
    /// The name in the URL (empty for a create), as the `escalate` check names it.
    pub url_name: &'a str,
    pub object: &'a Value,
    /// The stored object, for an update.
    pub old: Option<&'a Value>,
}

/// Refuses `write` when it would grant what its requester does not hold, on a server that
/// enforces RBAC. The authorizer is asked first (it locks the state itself), the policy read
/// after.
pub fn confirm(write: &RbacWrite<'_>, shared: &Shared) -> Result<(), ApiError> {
    if !shared.rbac || exempt(write, shared.authorizer.as_ref()) {
        return Ok(());
    }
    confirm_against(write, &shared.state().store)
}

/// The part of the check that reads the policy: the rules `write` grants must all be held.
fn confirm_against(write: &RbacWrite<'_>, store: &Store) -> Result<(), ApiError> {
    let Some(checked) = Checked::of(write.resource) else {
        return Ok(());
    };
    let name = crate::meta::name(write.object);
    let forbidden = |why: &str| ApiError::forbidden(write.resource, name, why);
    let granted = match checked {
        Checked::Role | Checked::ClusterRole => super::rules_of(write.object),
        Checked::RoleBinding | Checked::ClusterRoleBinding => {
            let role_ref = write.object.get("roleRef").cloned().unwrap_or_default();
            let kind = role_ref
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role_name = role_ref
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // kube-apiserver hands the role lookup's own error back unchanged: a missing role
            // is its 404, an unknown kind a plain error the handler turns into a 500.
            let role_id = match kind {
                "Role" => super::roles(),
                "ClusterRole" => super::cluster_roles(),
                other => {
                    return Err(ApiError::internal(&format!(
                        "unsupported role reference kind: \"{other}\""
                    )));
                }
            };
            let role_namespace = if kind == "Role" { write.namespace } else { "" };
            let Some(role) = store.get(&role_id, &ObjectKey::new(role_namespace, role_name)) else {
                return Err(ApiError::not_found(&role_id, role_name));
            };
            super::rules_of(role)
        }
    };
    let held = rules_for(store, write.identity, write.namespace);
    let owned: Vec<PolicyRule> = held
        .rules
        .iter()
        .filter_map(|rule| serde_json::from_value(rule.clone()).ok())
        .collect();
    let missing = uncovered(&owned, &granted);
    if !missing.is_empty() {
        let mut message = format!(
            "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            go_quote(&write.identity.username),
            go_quote_list(&write.identity.groups),
            describe(&missing).join("\n")
        );
        if !held.evaluation_error.is_empty() {
            message.push_str(&format!("; resolution errors: [{}]", held.evaluation_error));
        }
        return Err(forbidden(&message));
    }
    if checked == Checked::ClusterRole
        && (has_aggregation_rule(write.object) || write.old.is_some_and(has_aggregation_rule))
        && !uncovered(&owned, &full_authority()).is_empty()
    {
        return Err(forbidden(
            "must have cluster-admin privileges to use the aggregationRule",
        ));
    }
    Ok(())
}

/// Whether `write` is not checked: not an RBAC object, a master's, an update of the garbage
/// collector's fields only, or allowed by `escalate` / `bind` (asked of `authorizer`).
fn exempt(write: &RbacWrite<'_>, authorizer: &dyn Authorizer) -> bool {
    let Some(checked) = Checked::of(write.resource) else {
        return true;
    };
    if is_master(write.identity)
        || write
            .old
            .is_some_and(|old| only_gc_fields_differ(old, write.object))
    {
        return true;
    }
    let attributes = match checked {
        Checked::Role | Checked::ClusterRole => Attributes {
            verb: "escalate".into(),
            group: GROUP.into(),
            resource: write.resource.plural.clone(),
            namespace: write.namespace.into(),
            name: write.url_name.into(),
            ..Attributes::default()
        },
        Checked::RoleBinding | Checked::ClusterRoleBinding => {
            let role_ref = write.object.get("roleRef").cloned().unwrap_or_default();
            let text = |field: &str| {
                role_ref
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let resource = match text("kind").as_str() {
                "Role" => "roles",
                "ClusterRole" => "clusterroles",
                _ => return false,
            };
            Attributes {
                verb: "bind".into(),
                group: text("apiGroup"),
                resource: resource.into(),
                namespace: write.namespace.into(),
                name: text("name"),
                ..Attributes::default()
            }
        }
    };
    authorizer.authorize(write.identity, &attributes).allowed
}

/// Whether `old` and `new` differ only in what the garbage collector writes, as
/// kube-apiserver's `IsOnlyMutatingGCFields` judges an update: every other field, the
/// server's own metadata (resourceVersion, uid, ...) included, must be equal.
fn only_gc_fields_differ(old: &Value, new: &Value) -> bool {
    let strip = |object: &Value| {
        let mut object = object.clone();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            // managedFields are not the request's to decide: kube's field manager rewrites them
            // before this comparison (keeping the live ones when a request leaves them out), and
            // the emulator records them only when it stores the object.
            for field in ["ownerReferences", "finalizers", "managedFields"] {
                metadata.remove(field);
            }
        }
        object
    };
    strip(old) == strip(new)
}

fn has_aggregation_rule(object: &Value) -> bool {
    object
        .get("aggregationRule")
        .and_then(|rule| rule.get("clusterRoleSelectors"))
        .and_then(Value::as_array)
        .is_some_and(|selectors| !selectors.is_empty())
}

/// `*` on every resource and every non-resource URL: what an aggregation rule needs.
fn full_authority() -> Vec<PolicyRule> {
    let all = vec!["*".to_owned()];
    vec![
        PolicyRule {
            verbs: all.clone(),
            api_groups: all.clone(),
            resources: all.clone(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: all.clone(),
            non_resource_urls: all,
            ..PolicyRule::default()
        },
    ]
}

/// `rule` broken down to one verb, group, resource and resource name (or one verb and one
/// non-resource URL) per piece, as kube's `BreakdownRule` does.
fn break_down(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |value: &String| vec![value.clone()];
    let mut pieces = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let piece = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    pieces.push(piece);
                } else {
                    pieces.extend(rule.resource_names.iter().map(|name| PolicyRule {
                        resource_names: one(name),
                        ..piece.clone()
                    }));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            pieces.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    pieces
}

fn holds_all(owned: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|item| owned.contains(item))
}

fn has_star(list: &[String]) -> bool {
    list.iter().any(|item| item == "*")
}

/// Whether `owner` covers every resource of `wanted`: `*`, the same entry, or `*/sub` for a
/// subresource.
fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    has_star(owner)
        || wanted.iter().all(|resource| {
            owner.contains(resource)
                || resource
                    .split_once('/')
                    .is_some_and(|(_, sub)| owner.contains(&format!("*/{sub}")))
        })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|path| {
        owner.iter().any(|held| {
            held == path
                || held
                    .strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
        })
    })
}

/// Whether `owner` covers `piece` (one verb, group, resource, name), as kube's `ruleCovers`.
fn rule_covers(owner: &PolicyRule, piece: &PolicyRule) -> bool {
    let names = if piece.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || holds_all(&owner.resource_names, &piece.resource_names)
    };
    (has_star(&owner.verbs) || holds_all(&owner.verbs, &piece.verbs))
        && (has_star(&owner.api_groups) || holds_all(&owner.api_groups, &piece.api_groups))
        && resources_cover(&owner.resources, &piece.resources)
        && urls_cover(&owner.non_resource_urls, &piece.non_resource_urls)
        && names
}

/// The pieces of `granted` no rule of `owned` covers.
fn uncovered(owned: &[PolicyRule], granted: &[PolicyRule]) -> Vec<PolicyRule> {
    granted
        .iter()
        .flat_map(break_down)
        .filter(|piece| !owned.iter().any(|owner| rule_covers(owner, piece)))
        .collect()
}

/// The missing pieces as kube lists them (its `CompactRules`): pieces of one group, one
/// resource and at most one name merged into one rule of several verbs, each in kube's compact
/// form, sorted, once each.
fn describe(missing: &[PolicyRule]) -> Vec<String> {
    let mut compacted: Vec<PolicyRule> = Vec::new();
    for piece in missing {
        let merged = is_simple(piece)
            && compacted.iter_mut().any(|rule| {
                let same = is_simple(rule)
                    && rule.api_groups == piece.api_groups
                    && rule.resources == piece.resources
                    && rule.resource_names == piece.resource_names;
                if same {
                    rule.verbs.extend(piece.verbs.iter().cloned());
                }
                same
            });
        if !merged {
            compacted.push(piece.clone());
        }
    }
    let mut descriptions: Vec<String> = compacted.iter().map(compact_string).collect();
    descriptions.sort();
    descriptions.dedup();
    descriptions
}

/// A rule kube's `CompactRules` may merge with others: one group, one resource, at most one
/// name, no URLs.
fn is_simple(rule: &PolicyRule) -> bool {
    rule.api_groups.len() == 1
        && rule.resources.len() == 1
        && rule.resource_names.len() <= 1
        && rule.non_resource_urls.is_empty()
}

/// kube's `PolicyRule.CompactString`.
fn compact_string(rule: &PolicyRule) -> String {
    let parts: Vec<String> = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ]
    .into_iter()
    .filter(|(_, values)| !values.is_empty())
    .map(|(label, values)| format!("{label}:{}", go_quote_list(values)))
    .collect();
    format!("{{{}}}", parts.join(", "))
}

/// A string as Go's `%q` prints it.
fn go_quote(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn go_quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| go_quote(item)).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(value: Value) -> Vec<PolicyRule> {
        serde_json::from_value(value).expect("rules")
    }

    #[test]
    fn held_rules_cover_by_star_subresource_star_url_prefix_and_names() {
        let held = rules(json!([
            {"verbs": ["get", "list"], "apiGroups": ["apps"], "resources": ["*/scale", "deployments"]},
            {"verbs": ["get"], "nonResourceURLs": ["/metrics*"]},
            {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"]},
        ]));
        let covered = rules(json!([
            {"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments", "statefulsets/scale"]},
            {"verbs": ["get"], "nonResourceURLs": ["/metrics/cadvisor"]},
            {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["b"]},
        ]));
        assert_eq!(uncovered(&held, &covered), Vec::new());
        let beyond = rules(json!([
            {"verbs": ["get", "watch"], "apiGroups": ["apps"], "resources": ["deployments/status"]},
            {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ]));
        assert_eq!(
            describe(&uncovered(&held, &beyond)),
            [
                "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"update\"]}",
                "{APIGroups:[\"apps\"], Resources:[\"deployments/status\"], Verbs:[\"get\" \"watch\"]}",
                "{NonResourceURLs:[\"/healthz\"], Verbs:[\"get\"]}",
            ]
        );
    }

    #[test]
    fn missing_rules_merge_verbs_per_group_resource_and_single_name_as_kube_compacts() {
        let missing = uncovered(
            &[],
            &rules(json!([
                {"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["x"]},
                {"verbs": ["patch"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["y"]},
                {"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"]},
                {"verbs": ["update"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["x"]},
            ])),
        );
        assert_eq!(
            describe(&missing),
            [
                "{APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"x\"], Verbs:[\"get\" \"delete\" \"update\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], ResourceNames:[\"y\"], Verbs:[\"patch\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\"]}",
            ]
        );
        assert_eq!(go_quote("a\"b\\"), "\"a\\\"b\\\\\"");
    }

    #[test]
    fn only_owner_references_and_finalizers_make_a_gc_update() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "7", "uid": "u1",
                         "finalizers": ["a"]}, "rules": []});
        let gc = json!({"metadata": {"name": "r", "resourceVersion": "7", "uid": "u1",
                        "ownerReferences": [{"name": "o"}]}, "rules": []});
        assert!(only_gc_fields_differ(&old, &gc));
        for (field, value) in [
            ("resourceVersion", json!("6")),
            ("uid", json!("u2")),
            ("generation", json!(3)),
            ("creationTimestamp", json!("2026-01-01T00:00:00Z")),
        ] {
            let mut changed = gc.clone();
            changed["metadata"][field] = value;
            assert!(!only_gc_fields_differ(&old, &changed), "{field}");
        }
    }
}
