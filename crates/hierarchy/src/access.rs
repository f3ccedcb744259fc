//! The start-up check that this controller's RBAC covers what it does.
//!
//! For namespaces, SubNamespaces and every watched kind the controller gets, lists, watches,
//! creates, patches and deletes. Each pair is asked of the API server with a
//! SelfSubjectAccessReview; the controller refuses to start while any is denied, naming all of
//! them, rather than failing later on the first write it cannot make.

use std::fmt;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

/// The verbs the controller uses on every kind it touches.
pub const VERBS: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// One resource the controller works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub group: String,
    /// The plural resource name, as RBAC rules spell it.
    pub resource: String,
}

impl Resource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A permission asked for and the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub resource: Resource,
    pub verb: String,
    pub allowed: bool,
}

/// The permissions the controller lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RBAC does not allow arbor-hierarchy to {}", .missing.join(", "))]
pub struct MissingPermissions {
    /// Like `delete secrets` or `watch subnamespaces.arbor.dev`.
    pub missing: Vec<String>,
}

/// Why the check could not be made or failed.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Missing(#[from] MissingPermissions),
    #[error("SelfSubjectAccessReview for {verb} {resource} failed: {source}")]
    Review {
        verb: String,
        resource: Resource,
        #[source]
        source: kube::Error,
    },
}

/// The decision: every answer must allow.
pub fn decide(answers: &[Answer]) -> Result<(), MissingPermissions> {
    let missing: Vec<String> = answers
        .iter()
        .filter(|a| !a.allowed)
        .map(|a| format!("{} {}", a.verb, a.resource))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MissingPermissions { missing })
    }
}

/// Asks the API server about every verb on every resource (cluster-wide) and decides.
pub async fn check(client: &Client, resources: &[Resource]) -> Result<(), AccessError> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut answers = Vec::new();
    for resource in resources {
        for verb in VERBS {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(resource.group.clone()),
                        resource: Some(resource.resource.clone()),
                        verb: Some((*verb).to_owned()),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let answered = reviews
                .create(&PostParams::default(), &review)
                .await
                .map_err(|source| AccessError::Review {
                    verb: (*verb).to_owned(),
                    resource: resource.clone(),
                    source,
                })?;
            answers.push(Answer {
                resource: resource.clone(),
                verb: (*verb).to_owned(),
                allowed: answered.status.is_some_and(|s| s.allowed),
            });
        }
    }
    decide(&answers)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(group: &str, resource: &str, verb: &str, allowed: bool) -> Answer {
        Answer {
            resource: Resource::new(group, resource),
            verb: verb.into(),
            allowed,
        }
    }

    #[test]
    fn all_allowed_passes() {
        let answers = [
            answer("", "secrets", "get", true),
            answer("arbor.dev", "subnamespaces", "delete", true),
        ];
        assert_eq!(decide(&answers), Ok(()));
    }

    #[test]
    fn each_denied_verb_and_resource_is_named() {
        let answers = [
            answer("", "secrets", "get", true),
            answer("", "secrets", "delete", false),
            answer("arbor.dev", "subnamespaces", "watch", false),
        ];
        let error = decide(&answers).unwrap_err();
        assert_eq!(
            error.missing,
            ["delete secrets", "watch subnamespaces.arbor.dev"]
        );
        assert!(
            error
                .to_string()
                .contains("delete secrets, watch subnamespaces.arbor.dev")
        );
    }
}
