//! Every write the controller makes: server-side apply under the field manager
//! `arbor-hierarchy`, forced because Arbor owns what it applies (copies, propagated metadata,
//! the `propagate` annotation it adds), and deletes guarded by the object's uid so that an
//! object recreated in the meantime is never removed by mistake. Once the controller stops,
//! no write starts: a reconcile between two writes sends no further one (the one in flight is
//! waited for before the Lease is released), and the next leader carries on. The writes
//! another library sends for the controller (kube's `finalizer()` adding or removing the
//! finalizer) are preceded by the same check ([`Writer::refuse_once_stopping`]). A reconcile
//! ended by that check is not a failed one: it is logged with its reason, not counted in the
//! `errors` metric and not retried ([`WriteError::is_stopping`]).

use std::collections::BTreeMap;

use arbor_api::keys::HIERARCHY_FIELD_MANAGER;
use arbor_policy::object::{self, GroupKind};
use arbor_policy::propagation::StaleKeys;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::kinds::WatchedKinds;

/// A write that failed, naming the object.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot {action} {object}: {source}")]
    Api {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot {action} {object}: its kind is not watched")]
    UnwatchedKind {
        action: &'static str,
        object: String,
    },
    #[error("cannot {action}: the object has no {field}")]
    Incomplete {
        action: &'static str,
        field: &'static str,
    },
    #[error("did not {action}: the controller is stopping and starts no write")]
    Stopping { action: &'static str },
}

impl WriteError {
    /// Whether the write was not made because the controller is stopping: the end of a
    /// reconcile at a graceful stop (or a lost Lease, reported as the process' own error), not
    /// a failure of it.
    pub fn is_stopping(&self) -> bool {
        matches!(self, Self::Stopping { .. })
    }

    /// A short reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } if status.is_conflict() => "Conflict",
            Self::Api { .. } => "ApiError",
            Self::UnwatchedKind { .. } => "UnwatchedKind",
            Self::Incomplete { .. } => "IncompleteObject",
            Self::Stopping { .. } => "Stopping",
        }
    }
}

/// Writes through one client.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    kinds: WatchedKinds,
    /// Cancelled when the controller stops: no write starts after it.
    stopping: CancellationToken,
}

fn apply_params() -> PatchParams {
    PatchParams::apply(HIERARCHY_FIELD_MANAGER).force()
}

impl Writer {
    pub fn new(client: Client, kinds: WatchedKinds, stopping: CancellationToken) -> Self {
        Self {
            client,
            kinds,
            stopping,
        }
    }

    /// Refuses `action` once the controller stops (see the module docs): the one check every
    /// write goes through, called right before it.
    pub fn refuse_once_stopping(&self, action: &'static str) -> Result<(), WriteError> {
        if self.stopping.is_cancelled() {
            return Err(WriteError::Stopping { action });
        }
        Ok(())
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn dynamic_api(
        &self,
        action: &'static str,
        group_kind: &GroupKind,
        namespace: &str,
        name: &str,
    ) -> Result<Api<DynamicObject>, WriteError> {
        let resource = self
            .kinds
            .get(group_kind)
            .ok_or_else(|| WriteError::UnwatchedKind {
                action,
                object: describe(group_kind, namespace, name),
            })?;
        Ok(Api::namespaced_with(
            self.client.clone(),
            namespace,
            resource,
        ))
    }

    /// Applies `object` (a copy, or a partial object carrying only what Arbor sets); returns
    /// the object as the API server stored it.
    pub async fn apply_object(
        &self,
        action: &'static str,
        object: &Value,
    ) -> Result<Value, WriteError> {
        self.refuse_once_stopping(action)?;
        let gvk = object::gvk(object).map_err(|missing| WriteError::Incomplete {
            action,
            field: missing.0,
        })?;
        let namespace = object::namespace(object).ok_or(WriteError::Incomplete {
            action,
            field: "metadata.namespace",
        })?;
        let name = object::name(object).ok_or(WriteError::Incomplete {
            action,
            field: "metadata.name",
        })?;
        let group_kind = gvk.group_kind();
        let api_error = |source| WriteError::Api {
            action,
            object: describe(&group_kind, namespace, name),
            source,
        };
        let stored = self
            .dynamic_api(action, &group_kind, namespace, name)?
            .patch(name, &apply_params(), &Patch::Apply(object))
            .await
            .map_err(api_error)?;
        serde_json::to_value(&stored).map_err(|e| api_error(kube::Error::SerdeError(e)))
    }

    /// Deletes the object `live`, only if it is still the same object (same uid).
    pub async fn delete_object(&self, live: &Value) -> Result<(), WriteError> {
        const ACTION: &str = "delete";
        self.refuse_once_stopping(ACTION)?;
        let key = object::ObjectKey::of(live).map_err(|missing| WriteError::Incomplete {
            action: ACTION,
            field: missing.0,
        })?;
        let namespace = key.namespace.as_deref().ok_or(WriteError::Incomplete {
            action: ACTION,
            field: "metadata.namespace",
        })?;
        let params = DeleteParams {
            preconditions: object::str_at(live, &["metadata", "uid"]).map(|uid| Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let deleted = self
            .dynamic_api(ACTION, &key.group_kind, namespace, &key.name)?
            .delete(&key.name, &params)
            .await;
        match deleted {
            Ok(_) => Ok(()),
            // Already gone: the desired state holds.
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(source) => Err(WriteError::Api {
                action: ACTION,
                object: describe(&key.group_kind, namespace, &key.name),
                source,
            }),
        }
    }

    /// Applies the labels and annotations Arbor sets on namespace `name`; returns the namespace
    /// as stored.
    pub async fn apply_namespace(
        &self,
        action: &'static str,
        name: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Namespace, WriteError> {
        self.refuse_once_stopping(action)?;
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
        });
        Api::<Namespace>::all(self.client.clone())
            .patch(name, &apply_params(), &Patch::Apply(&namespace))
            .await
            .map_err(|source| WriteError::Api {
                action,
                object: format!("namespace {name}"),
                source,
            })
    }

    /// Takes `keys` off namespace `name`, whoever holds them: they are keys a propagating
    /// controller alone put there (a predecessor's apply cannot be undone by Arbor's).
    pub async fn remove_namespace_keys(
        &self,
        name: &str,
        keys: &StaleKeys,
    ) -> Result<(), WriteError> {
        self.refuse_once_stopping("remove keys no longer propagated from a namespace")?;
        let nulls = |keys: &std::collections::BTreeSet<String>| {
            keys.iter()
                .map(|k| (k.clone(), Value::Null))
                .collect::<serde_json::Map<_, _>>()
        };
        let mut metadata = serde_json::Map::new();
        if !keys.labels.is_empty() {
            metadata.insert("labels".into(), Value::Object(nulls(&keys.labels)));
        }
        if !keys.annotations.is_empty() {
            metadata.insert(
                "annotations".into(),
                Value::Object(nulls(&keys.annotations)),
            );
        }
        let params = PatchParams {
            field_manager: Some(HIERARCHY_FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        Api::<Namespace>::all(self.client.clone())
            .patch(
                name,
                &params,
                &Patch::Merge(json!({"metadata": Value::Object(metadata)})),
            )
            .await
            .map_err(|source| WriteError::Api {
                action: "remove keys no longer propagated from",
                object: format!("namespace {name}"),
                source,
            })?;
        Ok(())
    }

    /// Applies `object`'s status (server-side, on the status subresource) to the object of
    /// kind `resource` in `namespace`.
    pub async fn apply_status(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
        object: &Value,
    ) -> Result<(), WriteError> {
        const ACTION: &str = "write the status of";
        self.refuse_once_stopping(ACTION)?;
        Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, resource)
            .patch_status(name, &apply_params(), &Patch::Apply(object))
            .await
            .map_err(|source| WriteError::Api {
                action: ACTION,
                object: describe(
                    &GroupKind {
                        group: resource.group.as_str().into(),
                        kind: resource.kind.as_str().into(),
                    },
                    namespace,
                    name,
                ),
                source,
            })?;
        Ok(())
    }

    /// Deletes namespace `name`.
    pub async fn delete_namespace(&self, name: &str, uid: Option<&str>) -> Result<(), WriteError> {
        self.refuse_once_stopping("delete a namespace")?;
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match Api::<Namespace>::all(self.client.clone())
            .delete(name, &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(source) => Err(WriteError::Api {
                action: "delete",
                object: format!("namespace {name}"),
                source,
            }),
        }
    }
}

/// `Secret team-a/token` or `Role rbac.authorization.k8s.io team-a/reader`.
pub fn describe(group_kind: &GroupKind, namespace: &str, name: &str) -> String {
    if group_kind.group.is_empty() {
        format!("{} {namespace}/{name}", group_kind.kind)
    } else {
        format!(
            "{}.{} {namespace}/{name}",
            group_kind.kind, group_kind.group
        )
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}
