//! Reading the controller (owner) of an object for `propagate-generated`, whatever its kind.
//!
//! An owner of a watched kind is in the index. Any other owner, such as the cert-manager
//! Certificate that generated a Secret, is read through the API, as Accurate reads it: its
//! kind is resolved by discovery once and remembered (a per-kind cache), and the object is
//! read when a generated object needs deciding. An object whose owner carries no
//! `propagate-generated` is remembered as checked (Accurate writes an annotation for that; Arbor
//! keeps it in memory, so a restart checks once more), so a resync never reads it again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use arbor_policy::object::{self, GroupKind, GroupVersionKind};
use arbor_policy::propagation::OwnerReference;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind as KubeGvk};
use kube::{Api, Client};
use serde_json::Value;

/// Why an owner could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error("cannot resolve the kind {kind} of the owner of {object}: {source}")]
    Discovery {
        kind: String,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read {kind} {namespace}/{name}, the owner of {object}: {source}")]
    Read {
        kind: String,
        namespace: String,
        name: String,
        object: String,
        #[source]
        source: kube::Error,
    },
}

impl OwnerError {
    /// A short reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Discovery { .. } => "OwnerKindUnknown",
            Self::Read { .. } => "OwnerReadFailed",
        }
    }
}

/// Reads owners of kinds the controller does not watch.
pub struct OwnerReader {
    client: Client,
    kinds: Mutex<BTreeMap<GroupKind, ApiResource>>,
    /// uids of objects whose owner was read and carries no `propagate-generated`.
    checked: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for OwnerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerReader").finish_non_exhaustive()
    }
}

impl OwnerReader {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            kinds: Mutex::new(BTreeMap::new()),
            checked: Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether `object`'s owner was already read and found without `propagate-generated`.
    pub fn already_checked(&self, object: &Value) -> bool {
        uid(object).is_some_and(|uid| {
            self.checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(uid)
        })
    }

    /// Remembers that `object`'s owner carries no `propagate-generated`.
    pub fn mark_checked(&self, object: &Value) {
        if let Some(uid) = uid(object) {
            self.checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uid.to_owned());
        }
    }

    /// The owner `reference` of `object`, read from the API server; `None` when it is gone.
    pub async fn read(
        &self,
        object: &Value,
        reference: &OwnerReference,
    ) -> Result<Option<Value>, OwnerError> {
        let namespace = object::namespace(object).unwrap_or_default();
        let described = describe(object);
        let gvk = GroupVersionKind::from_api_version(&reference.api_version, &reference.kind);
        let resource = self.resource(&gvk, &described).await?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let owner = api
            .get_opt(&reference.name)
            .await
            .map_err(|source| OwnerError::Read {
                kind: reference.kind.clone(),
                namespace: namespace.to_owned(),
                name: reference.name.clone(),
                object: described.clone(),
                source,
            })?;
        Ok(owner.and_then(|owner| {
            let mut value = serde_json::to_value(owner).ok()?;
            // A DynamicObject read back carries its type; make sure it is the reference's.
            value["apiVersion"] = Value::from(reference.api_version.clone());
            value["kind"] = Value::from(reference.kind.clone());
            Some(value)
        }))
    }

    async fn resource(
        &self,
        gvk: &GroupVersionKind,
        object: &str,
    ) -> Result<ApiResource, OwnerError> {
        let group_kind = gvk.group_kind();
        if let Some(resource) = self
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&group_kind)
        {
            return Ok(resource.clone());
        }
        let (resource, _) = kube::discovery::pinned_kind(
            &self.client,
            &KubeGvk::gvk(&gvk.group, &gvk.version, &gvk.kind),
        )
        .await
        .map_err(|source| OwnerError::Discovery {
            kind: gvk.kind.to_string(),
            object: object.to_owned(),
            source,
        })?;
        self.kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(group_kind, resource.clone());
        Ok(resource)
    }
}

fn uid(object: &Value) -> Option<&str> {
    object::str_at(object, &["metadata", "uid"])
}

fn describe(object: &Value) -> String {
    match object::ObjectKey::of(object) {
        Ok(key) => key.to_string(),
        Err(_) => "an object".into(),
    }
}
