//! Carrying out the table's decision for one object.

use arbor_api::keys::GITSYNC_FIELD_MANAGER;
use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::GroupVersionKind;
use arbor_policy::sync::{Action, CompareFields, Decision, Situation, decide};
use kube::Api;
use kube::api::{DeleteParams, PatchParams, Preconditions};
use kube::core::DynamicObject;
use serde_json::Value;

use super::discovery::{Discovery, ServedKind};
use super::error::ApplyError;

/// One object to bring in line with git.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub gvk: &'a GroupVersionKind,
    /// The object's namespace; `None` for cluster-scoped kinds.
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// "Sync Declared": the source declares the kind.
    pub sync_declared: bool,
    /// "Resource Declared": the applied form, when git declares the object.
    pub desired: Option<&'a Value>,
    pub compare: &'a CompareFields,
}

/// What the applier did, with the table's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub decision: Decision,
    /// Whether a write request was made.
    pub wrote: bool,
}

/// Applies and deletes objects under the management label's rule.
#[derive(Clone)]
pub struct Applier {
    discovery: Discovery,
    label: ManagementLabel,
    /// The client that writes objects, when not discovery's own (gitsync's identity): an
    /// impersonating one for a GitTrack with a service account.
    writer: Option<kube::Client>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier")
            .field("discovery", &self.discovery)
            .field("label", &self.label)
            .field("impersonating", &self.writer.is_some())
            .finish()
    }
}

impl Applier {
    pub fn new(discovery: Discovery, label: ManagementLabel) -> Self {
        Self {
            discovery,
            label,
            writer: None,
        }
    }

    /// The same applier, writing (creating, updating, deleting) through `client`.
    pub fn writing_as(&self, client: kube::Client) -> Self {
        Self {
            writer: Some(client),
            ..self.clone()
        }
    }

    /// The API that writes objects of `served`.
    fn write_api(&self, served: &ServedKind, namespace: Option<&str>) -> Api<DynamicObject> {
        match &self.writer {
            None => self.discovery.api(served, namespace),
            Some(client) => match namespace.filter(|_| served.namespaced) {
                Some(namespace) => {
                    Api::namespaced_with(client.clone(), namespace, &served.resource)
                }
                None => Api::all_with(client.clone(), &served.resource),
            },
        }
    }

    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    pub fn label(&self) -> &ManagementLabel {
        &self.label
    }

    /// The table's decision for `target` given the live object, without acting.
    pub fn decide(&self, target: &Target<'_>, live: Option<&Value>) -> (Situation, Decision) {
        let situation = Situation::assess(
            target.sync_declared,
            target.desired,
            live,
            &self.label,
            target.compare,
        );
        let decision = decide(&situation);
        (situation, decision)
    }

    /// Reads the live object of `target`.
    pub async fn live(&self, target: &Target<'_>) -> Result<Option<Value>, ApplyError> {
        let served = self.discovery.served(target.gvk).await?;
        let api = self.discovery.api(&served, target.namespace);
        let found = api
            .get_opt(target.name)
            .await
            .map_err(|source| write_error("read", target, source))?;
        found.map(|object| to_value(target, &object)).transpose()
    }

    /// Decides with the table and acts; `live` is the object as last read.
    pub async fn sync_object(
        &self,
        target: &Target<'_>,
        live: Option<&Value>,
    ) -> Result<Outcome, ApplyError> {
        let (_, decision) = self.decide(target, live);
        self.carry_out(target, live, decision).await
    }

    /// Acts on `decision`, the table's for `target` and `live` ([`Self::decide`]).
    pub async fn carry_out(
        &self,
        target: &Target<'_>,
        live: Option<&Value>,
        decision: Decision,
    ) -> Result<Outcome, ApplyError> {
        let unchanged = || Outcome {
            decision,
            wrote: false,
        };
        let served = match decision.action {
            Action::NoAction => return Ok(unchanged()),
            _ => self.discovery.served(target.gvk).await?,
        };
        match (decision.action, target.desired, live) {
            (Action::Create, Some(desired), _) => {
                self.apply(&served, target, desired, false).await?;
                Ok(Outcome {
                    decision,
                    wrote: true,
                })
            }
            (Action::Update, Some(desired), _) => {
                self.apply(&served, target, desired, true).await?;
                Ok(Outcome {
                    decision,
                    wrote: true,
                })
            }
            (Action::Delete, _, Some(live)) => {
                self.delete(&served, target, live).await?;
                // Every deletion is in the log, whoever asked for it (prune, finalizer).
                tracing::info!(
                    object = %describe(target),
                    row = decision.row.number(),
                    "deleted: {}",
                    decision.row.reason()
                );
                Ok(Outcome {
                    decision,
                    wrote: true,
                })
            }
            // The table only creates or updates what is declared and deletes what is live.
            _ => Ok(unchanged()),
        }
    }

    async fn apply(
        &self,
        served: &ServedKind,
        target: &Target<'_>,
        desired: &Value,
        force: bool,
    ) -> Result<(), ApplyError> {
        let api = self.write_api(served, target.namespace);
        let mut params = PatchParams::apply(GITSYNC_FIELD_MANAGER);
        params.force = force;
        let verb = if force { "update" } else { "create" };
        // The reply (the whole object, managedFields too) is skimmed: no caller reads it.
        super::skimmed_reply::apply(&api, target.name, &params, desired)
            .await
            .map_err(|source| write_error(verb, target, source))
    }

    async fn delete(
        &self,
        served: &ServedKind,
        target: &Target<'_>,
        live: &Value,
    ) -> Result<(), ApplyError> {
        let api = self.write_api(served, target.namespace);
        let metadata_field = |field: &str| live["metadata"][field].as_str().map(str::to_owned);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: metadata_field("uid"),
                resource_version: metadata_field("resourceVersion"),
            }),
            ..DeleteParams::background()
        };
        match api.delete(target.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(write_error("delete", target, source)),
        }
    }
}

fn describe(target: &Target<'_>) -> String {
    match target.namespace {
        Some(namespace) => format!("{} {namespace}/{}", target.gvk.kind, target.name),
        None => format!("{} {}", target.gvk.kind, target.name),
    }
}

fn write_error(verb: &'static str, target: &Target<'_>, source: kube::Error) -> ApplyError {
    ApplyError::Write {
        verb,
        object: describe(target),
        source: Box::new(source),
    }
}

fn to_value(target: &Target<'_>, object: &DynamicObject) -> Result<Value, ApplyError> {
    super::object::live_value(target.gvk, object).map_err(|error| ApplyError::Write {
        verb: "read",
        object: describe(target),
        source: Box::new(kube::Error::SerdeError(error)),
    })
}
