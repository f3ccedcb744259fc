//! Impersonation, as kube-apiserver does it: a request with `Impersonate-User` (and optionally
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`) headers acts as that
//! user, after the authenticated user was checked for the `impersonate` verb on each thing it
//! asks for, in kube-apiserver's order: `serviceaccounts` (for a service account's user name,
//! in its namespace) or `users`, each of `groups`, each value of `userextras/<key>` and `uids`
//! (the last two in API group `authentication.k8s.io`), by the same authorizer as every
//! request (RBAC when it is on), refused with kube-apiserver's Forbidden wording. An extra's key
//! is the header's suffix, lower-cased and percent-decoded as kube does (`Impersonate-Extra-
//! Example.com%2fteam` is `example.com/team`). The impersonated identity is then what
//! authorization (the deny rules included), admission and accounting see. An empty
//! `Impersonate-User` names no one; groups, extras or a uid asked without a user are refused
//! before any API handler, so in kube's plain-text 500 rather than a `Status`.

use std::collections::BTreeMap;

use http::HeaderMap;

use crate::auth::{Identity, service_account_of};
use crate::authz::{Attributes, Authorizer};
use crate::status::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

fn header_text<'a>(name: &str, value: &'a http::HeaderValue) -> Result<&'a str, ApiError> {
    value
        .to_str()
        .map_err(|_| ApiError::bad_request(format!("the {name} header is not text")))
}

/// `%xx` sequences decoded; the key as sent when it is not valid percent-encoding (as kube's
/// `url.PathUnescape` fallback).
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = bytes
                .get(index + 1..index + 3)
                .and_then(|pair| std::str::from_utf8(pair).ok())
                .and_then(|pair| u8::from_str_radix(pair, 16).ok());
            let Some(byte) = hex else {
                return key.to_owned();
            };
            decoded.push(byte);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).unwrap_or_else(|_| key.to_owned())
}

/// What kube's refusal lists for impersonation asked without a user: each thing asked, as Go
/// prints the `ObjectReference` kube builds for it (kind, namespace, name, uid, apiVersion,
/// resourceVersion, fieldPath, space-separated), in kube's order: groups, extras, the uid.
fn requested_without_user(
    groups: &[&str],
    extra: &BTreeMap<String, Vec<String>>,
    uid: Option<&str>,
) -> Vec<String> {
    let authentication = format!("{AUTHENTICATION_GROUP}/v1");
    let reference = |kind: &str, name: &str, api_version: &str, field_path: &str| {
        format!("{{{kind}  {name}  {api_version}  {field_path}}}")
    };
    let mut requested: Vec<String> = groups
        .iter()
        .map(|group| reference("Group", group, "", ""))
        .collect();
    for (key, values) in extra {
        requested.extend(
            values
                .iter()
                .map(|value| reference("UserExtra", value, &authentication, key)),
        );
    }
    requested.extend(uid.map(|uid| reference("UID", uid, &authentication, "")));
    requested
}

/// The identity the request acts as: `authenticated` itself, or the user it may impersonate.
pub fn identity_of(
    authenticated: Identity,
    headers: &HeaderMap,
    request_uri: &str,
    authorizer: &dyn Authorizer,
) -> Result<Identity, ApiError> {
    let groups = headers
        .get_all(GROUP)
        .iter()
        .map(|value| header_text("Impersonate-Group", value))
        .collect::<Result<Vec<&str>, ApiError>>()?;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            let value = header_text(name.as_str(), value)?;
            extra
                .entry(unescape_extra_key(key))
                .or_default()
                .push(value.to_owned());
        }
    }
    let uid = headers
        .get(UID)
        .map(|value| header_text("Impersonate-Uid", value))
        .transpose()?
        .filter(|uid| !uid.is_empty());
    // An empty Impersonate-User is no user at all, as kube reads the header.
    let user = headers
        .get(USER)
        .map(|user| header_text("Impersonate-User", user))
        .transpose()?
        .filter(|user| !user.is_empty());
    let Some(user) = user else {
        if groups.is_empty() && extra.is_empty() && uid.is_none() {
            return Ok(authenticated);
        }
        return Err(ApiError::filter_internal(
            request_uri,
            &format!(
                "requested [{}] without impersonating a user",
                requested_without_user(&groups, &extra, uid).join(" ")
            ),
        ));
    };
    let asked =
        |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| Attributes {
            verb: "impersonate".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            path: None,
        };
    let mut checks = vec![match service_account_of(user) {
        Some((namespace, name)) => asked("", "serviceaccounts", "", namespace, name),
        None => asked("", "users", "", "", user),
    }];
    checks.extend(
        groups
            .iter()
            .map(|group| asked("", "groups", "", "", group)),
    );
    for (key, values) in &extra {
        checks.extend(
            values
                .iter()
                .map(|value| asked(AUTHENTICATION_GROUP, "userextras", key, "", value)),
        );
    }
    checks.extend(uid.map(|uid| asked(AUTHENTICATION_GROUP, "uids", "", "", uid)));
    for attributes in checks {
        crate::authz::check(authorizer, &authenticated, &attributes)?;
    }
    let mut identity = Identity::new(user, uid.unwrap_or_default(), &groups);
    identity.extra = extra;
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::authz::{AllowAll, DenyRule, DenyRules};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn without_headers_the_authenticated_user_acts() {
        let admin = Identity::admin();
        let identity =
            identity_of(admin.clone(), &HeaderMap::new(), "/api/v1/pods", &AllowAll).unwrap();
        assert_eq!(identity, admin);
    }

    #[test]
    fn a_permitted_impersonation_acts_as_the_service_account() {
        let gitsync = Identity::service_account("arbor-system", "arbor-gitsync");
        let identity = identity_of(
            gitsync,
            &headers(&[(USER, "system:serviceaccount:shop:deployer")]),
            "/api/v1/pods",
            &AllowAll,
        )
        .unwrap();
        assert_eq!(identity.username, "system:serviceaccount:shop:deployer");
        assert!(
            identity
                .groups
                .contains(&"system:serviceaccounts:shop".to_owned())
        );
    }

    #[test]
    fn the_impersonator_needs_the_impersonate_verb() {
        let rule = DenyRule::parse(
            "deny user=system:serviceaccount:arbor-system:arbor-gitsync verb=impersonate resource=serviceaccounts namespace=shop",
        )
        .unwrap();
        let authorizer = DenyRules::new(vec![rule], Arc::new(AllowAll));
        let gitsync = Identity::service_account("arbor-system", "arbor-gitsync");
        let error = identity_of(
            gitsync,
            &headers(&[(USER, "system:serviceaccount:shop:deployer")]),
            "/api/v1/pods",
            &authorizer,
        )
        .unwrap_err();
        assert_eq!(error.code, 403);
        assert!(
            error
                .message
                .contains("cannot impersonate resource \"serviceaccounts\""),
            "{}",
            error.message
        );
        assert!(
            identity_of(
                Identity::admin(),
                &headers(&[(GROUP, "g")]),
                "/api/v1/pods",
                &AllowAll
            )
            .is_err()
        );
    }

    #[test]
    fn extra_keys_are_percent_decoded_and_kept_as_sent_when_malformed() {
        assert_eq!(unescape_extra_key("example.com%2fteam"), "example.com/team");
        assert_eq!(unescape_extra_key("scopes"), "scopes");
        assert_eq!(unescape_extra_key("bad%zz"), "bad%zz");
        assert_eq!(unescape_extra_key("cut%2"), "cut%2");
        let identity = identity_of(
            Identity::admin(),
            &headers(&[
                (USER, "alice"),
                (UID, "7"),
                ("impersonate-extra-example.com%2fteam", "a"),
                ("impersonate-extra-example.com%2fteam", "b"),
            ]),
            "/api/v1/pods",
            &AllowAll,
        )
        .unwrap();
        assert_eq!(identity.uid, "7");
        assert_eq!(identity.extra["example.com/team"], ["a", "b"]);
        assert!(
            identity_of(
                Identity::admin(),
                &headers(&[(UID, "7")]),
                "/api/v1/pods",
                &AllowAll
            )
            .is_err()
        );
    }

    #[test]
    fn groups_extras_or_a_uid_without_a_user_are_kubes_plain_internal_error() {
        let error = identity_of(
            Identity::admin(),
            &headers(&[
                (GROUP, "devs"),
                (UID, "7"),
                ("impersonate-extra-scopes", "view"),
                (USER, ""),
            ]),
            "/api/v1/namespaces/shop/pods?limit=1&x=<y>",
            &AllowAll,
        )
        .unwrap_err();
        assert_eq!((error.code, error.plain_text), (500, true));
        assert_eq!(
            error.message,
            "Internal Server Error: \"/api/v1/namespaces/shop/pods?limit=1&amp;x=&lt;y&gt;\": requested [{Group  devs    } {UserExtra  view  authentication.k8s.io/v1  scopes} {UID  7  authentication.k8s.io/v1  }] without impersonating a user"
        );
    }

    #[test]
    fn an_empty_impersonate_user_header_impersonates_no_one() {
        let admin = Identity::admin();
        let identity = identity_of(
            admin.clone(),
            &headers(&[(USER, "")]),
            "/api/v1/pods",
            &AllowAll,
        )
        .unwrap();
        assert_eq!(identity, admin);
    }
}
