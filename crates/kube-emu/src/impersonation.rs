//! Impersonation, as kube-apiserver does it: a request with `Impersonate-User` (and optionally
//! `Impersonate-Group`) headers acts as that user, after the authenticated user was checked for
//! the `impersonate` verb on `serviceaccounts` (for a service account's user name, in its
//! namespace), `users` or `groups`, by the same authorizer as every request (RBAC when it is on),
//! refused with kube-apiserver's Forbidden wording. The impersonated identity is then what
//! authorization (the deny rules included), admission and accounting see.

use http::HeaderMap;

use crate::auth::{Identity, service_account_of};
use crate::authz::{Attributes, Authorizer};
use crate::status::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";

/// The identity the request acts as: `authenticated` itself, or the user it may impersonate.
pub fn identity_of(
    authenticated: Identity,
    headers: &HeaderMap,
    authorizer: &dyn Authorizer,
) -> Result<Identity, ApiError> {
    let groups: Vec<&str> = headers
        .get_all(GROUP)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    let Some(user) = headers.get(USER) else {
        if groups.is_empty() {
            return Ok(authenticated);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups without impersonating a user",
        ));
    };
    let user = user
        .to_str()
        .map_err(|_| ApiError::bad_request("the Impersonate-User header is not text"))?;
    let mut checks = vec![match service_account_of(user) {
        Some((namespace, name)) => ("serviceaccounts", namespace, name),
        None => ("users", "", user),
    }];
    checks.extend(groups.iter().map(|group| ("groups", "", *group)));
    for (resource, namespace, name) in checks {
        let attributes = Attributes {
            verb: "impersonate".into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Attributes::default()
        };
        crate::authz::check(authorizer, &authenticated, &attributes)?;
    }
    Ok(Identity::new(user, "", &groups))
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
        let identity = identity_of(admin.clone(), &HeaderMap::new(), &AllowAll).unwrap();
        assert_eq!(identity, admin);
    }

    #[test]
    fn a_permitted_impersonation_acts_as_the_service_account() {
        let gitsync = Identity::service_account("arbor-system", "arbor-gitsync");
        let identity = identity_of(
            gitsync,
            &headers(&[(USER, "system:serviceaccount:shop:deployer")]),
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
        assert!(identity_of(Identity::admin(), &headers(&[(GROUP, "g")]), &AllowAll).is_err());
    }
}
