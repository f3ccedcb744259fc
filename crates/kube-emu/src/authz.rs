//! Authorization: may this identity do this verb on this resource. The emulator allows
//! everything today; the decision goes through [`Authorizer`] so a denying policy (and the
//! SelfSubjectAccessReview answer, which asks the same question) can be added in one place.

use crate::auth::Identity;

/// The question an authorizer answers, as in a SubjectAccessReview's resourceAttributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

pub trait Authorizer: Send + Sync + std::fmt::Debug {
    fn authorize(&self, identity: &Identity, attributes: &Attributes) -> Decision;
}

/// Allows every request: the emulator's policy until RBAC evaluation is needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize(&self, _identity: &Identity, _attributes: &Attributes) -> Decision {
        Decision {
            allowed: true,
            reason: "arbor-kube-emu allows every request".into(),
        }
    }
}
