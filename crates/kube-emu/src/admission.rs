//! Admission webhooks, called the way kube-apiserver calls them, between authorization and the
//! verb handlers' writes.
//!
//! Stored MutatingWebhookConfigurations and ValidatingWebhookConfigurations are read on each
//! write (a single map probe when there are none). The webhooks whose rules, namespaceSelector
//! and objectSelector match are called with an AdmissionReview v1: mutating ones one after the
//! other (by configuration name, then in listed order), each seeing the previous ones' patches;
//! then validating ones all at once. A denial reaches the client as kube words it
//! (`admission webhook "<name>" denied the request: <message>`, the webhook's status code or 403);
//! a webhook that cannot be called, times out or answers nonsense is a failure, which
//! failurePolicy Ignore skips and Fail (the default) turns into 500 `Internal error occurred:
//! failed calling webhook "<name>": ...`. Warnings go back as `Warning: 299 - "..."` headers.
//!
//! Writes to webhook configurations themselves are never admitted, as in kube, so a broken
//! webhook cannot lock itself in.

mod client;
mod config;
mod review;

use std::collections::HashMap;

use serde_json::Value;

use crate::api::{RequestContext, Shared};
use crate::registry::ResourceKind;
use crate::state::namespaces;
use crate::status::ApiError;
use crate::store::ObjectKey;
use config::{RequestFacts, Webhook};
use review::{ReviewRequest, WebhookAnswer};

pub use client::service_key;

/// The admission operation of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// A write about to happen.
#[derive(Debug)]
pub struct Write<'a> {
    pub context: &'a RequestContext,
    pub kind: &'a ResourceKind,
    pub operation: Operation,
    /// The object's name (empty for a create with generateName).
    pub name: &'a str,
    /// CreateOptions, UpdateOptions, PatchOptions or DeleteOptions.
    pub options: Value,
}

impl Write<'_> {
    fn facts(&self) -> RequestFacts<'_> {
        let target = &self.context.target;
        RequestFacts {
            operation: self.operation.as_str(),
            group: &target.group,
            version: &target.version,
            resource: &target.plural,
            subresource: target.subresource.as_deref().unwrap_or_default(),
            namespaced: self.kind.namespaced,
        }
    }

    fn is_namespace(&self) -> bool {
        self.kind.kind == "Namespace" && self.kind.id.group.is_empty()
    }
}

/// The options object of a write, as admission reviews carry it.
pub fn options(kind: &str, context: &RequestContext) -> Value {
    let mut options = serde_json::json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if let Some(manager) = context.query.get("fieldManager") {
        options["fieldManager"] = Value::from(manager);
    }
    if context.query.dry_run() {
        options["dryRun"] = serde_json::json!(["All"]);
    }
    if context.query.flag("force") {
        options["force"] = Value::from(true);
    }
    options
}

/// The webhooks that apply to a write, read under the state lock.
struct Selected {
    mutating: Vec<Webhook>,
    validating: Vec<Webhook>,
    /// What namespaceSelectors look at: the namespace object (or the Namespace being written).
    namespace_object: Option<Value>,
}

fn select(
    shared: &Shared,
    write: &Write<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Option<Selected> {
    let state = shared.state();
    let mutating_id = config::mutating_configurations();
    let validating_id = config::validating_configurations();
    if write.kind.id == mutating_id || write.kind.id == validating_id {
        return None;
    }
    let none_stored = |id| state.store.list(id, None).next().is_none();
    if none_stored(&mutating_id) && none_stored(&validating_id) {
        return None;
    }
    let facts = write.facts();
    let by_rules = |id| {
        config::webhooks(&state.store, id)
            .into_iter()
            .filter(|hook| hook.rules_match(&facts))
            .collect::<Vec<_>>()
    };
    let (mutating, validating) = (by_rules(&mutating_id), by_rules(&validating_id));
    if mutating.is_empty() && validating.is_empty() {
        return None;
    }
    let namespace_object = if write.is_namespace() {
        object.or(old).cloned()
    } else if write.kind.namespaced {
        let namespace = write
            .context
            .target
            .namespace
            .as_deref()
            .unwrap_or_default();
        Some(
            state
                .store
                .get(&namespaces(), &ObjectKey::new("", namespace))
                .map(|ns| (**ns).clone())
                .unwrap_or(Value::Null),
        )
    } else {
        None
    };
    Some(Selected {
        mutating,
        validating,
        namespace_object,
    })
}

/// Admits a create or update: returns the object as the mutating webhooks left it, or the error
/// the client gets. Warnings are added to the request's context.
pub async fn admit(
    shared: &Shared,
    write: &Write<'_>,
    mut object: Value,
    old: Option<&Value>,
) -> Result<Value, ApiError> {
    run(shared, write, Some(&mut object), old).await?;
    Ok(object)
}

/// Admits the delete of `old`.
pub async fn admit_delete(shared: &Shared, write: &Write<'_>, old: &Value) -> Result<(), ApiError> {
    run(shared, write, None, Some(old)).await
}

async fn run(
    shared: &Shared,
    write: &Write<'_>,
    mut object: Option<&mut Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(selected) = select(shared, write, object.as_deref(), old) else {
        return Ok(());
    };
    let caller = Caller {
        services: &shared.service_addresses,
        write,
        namespace_object: selected.namespace_object.as_ref(),
    };
    for hook in &selected.mutating {
        if let Some(WebhookAnswer::Allowed {
            patch: Some(patch), ..
        }) = caller.call(hook, object.as_deref(), old).await?
        {
            let target = object.as_deref_mut().ok_or_else(|| {
                ApiError::internal(&format!(
                    "admission webhook \"{}\" returned a patch for a delete",
                    hook.name
                ))
            })?;
            apply_patch(target, patch, &hook.name)?;
        }
    }
    let object = object.as_deref();
    let validations = selected
        .validating
        .iter()
        .map(|hook| caller.call(hook, object, old));
    for outcome in futures::future::join_all(validations).await {
        outcome?;
    }
    Ok(())
}

fn apply_patch(object: &mut Value, patch: Value, webhook: &str) -> Result<(), ApiError> {
    let invalid = |error: String| {
        ApiError::internal(&format!(
            "admission webhook \"{webhook}\" returned an unusable patch: {error}"
        ))
    };
    let operations: json_patch::Patch =
        serde_json::from_value(patch).map_err(|error| invalid(error.to_string()))?;
    json_patch::patch(object, &operations).map_err(|error| invalid(error.to_string()))
}

/// Calls webhooks for one write.
struct Caller<'a> {
    services: &'a HashMap<String, String>,
    write: &'a Write<'a>,
    namespace_object: Option<&'a Value>,
}

impl Caller<'_> {
    /// Calls `hook` if its selectors match. `Ok(None)`: skipped or failed open; a denial or a
    /// failure under failurePolicy Fail is the client's error.
    async fn call(
        &self,
        hook: &Webhook,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Option<WebhookAnswer>, ApiError> {
        let selected = hook
            .namespace_selected(self.namespace_object)
            .and_then(|yes| Ok(yes && hook.object_selected(object, old)?));
        let outcome = match selected {
            Ok(false) => return Ok(None),
            Ok(true) => self.exchange(hook, object, old).await,
            Err(problem) => Err(format!("the webhook configuration is invalid: {problem}")),
        };
        match outcome {
            Ok(WebhookAnswer::Denied {
                code,
                message,
                warnings,
            }) => {
                self.warn(&warnings);
                Err(ApiError::with_code(code, message))
            }
            Ok(verdict) => {
                if let WebhookAnswer::Allowed { warnings, .. } = &verdict {
                    self.warn(warnings);
                }
                Ok(Some(verdict))
            }
            Err(reason) if hook.fail_open => {
                tracing::warn!(webhook = %hook.name, %reason, "webhook failed; failurePolicy Ignore");
                Ok(None)
            }
            Err(reason) => Err(ApiError::internal(&format!(
                "failed calling webhook \"{}\": {reason}",
                hook.name
            ))),
        }
    }

    fn warn(&self, warnings: &[String]) {
        self.write.context.add_warnings(warnings);
    }

    async fn exchange(
        &self,
        hook: &Webhook,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<WebhookAnswer, String> {
        let destination = hook.destination.as_ref().map_err(Clone::clone)?;
        let ca_bundle = hook.ca_bundle.as_ref().map_err(Clone::clone)?;
        let endpoint = client::resolve(destination, self.services, hook.timeout)?;
        let uid = uuid::Uuid::new_v4().to_string();
        let write = self.write;
        let target = &write.context.target;
        let request = ReviewRequest {
            operation: write.operation.as_str(),
            group: &target.group,
            version: &target.version,
            kind: &write.kind.kind,
            resource: &target.plural,
            subresource: target.subresource.as_deref().unwrap_or_default(),
            namespace: target.namespace.as_deref().unwrap_or_default(),
            name: write.name,
            identity: &write.context.identity,
            dry_run: write.context.query.dry_run() || write.options.get("dryRun").is_some(),
            options: &write.options,
        };
        let body = serde_json::to_vec(&review::review(&uid, &request, object, old))
            .expect("JSON values always serialize");
        let answer = client::post(&endpoint, ca_bundle.as_deref(), body, hook.timeout)
            .await
            .map_err(|error| {
                format!("failed to call webhook: Post \"{}\": {error}", endpoint.url)
            })?;
        review::verdict(&answer, &uid, &hook.name)
    }
}
