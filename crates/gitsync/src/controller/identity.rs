//! Whose permissions a source's objects are applied with.
//!
//! As Flux (`serviceAccountName`) and Config Sync (RepoSync) do, a GitTrack applies with the
//! permissions of a ServiceAccount of its own namespace: `spec.serviceAccountName`, or the
//! installation's `--default-service-account`. gitsync sends the writes with Kubernetes
//! impersonation headers (`Impersonate-User: system:serviceaccount:<ns>:<name>`), so the API
//! server's authorization (RBAC, and its escalation checks on RoleBindings) judges them as that
//! account: a GitTrack can never do what its account cannot. With
//! `--require-service-account`, a GitTrack that names none (and no default) is not synced.
//! Without a service account, and for every ClusterGitTrack (a cluster administrator's
//! object), gitsync applies as itself. Reads, tracking objects, statuses and Events always use
//! gitsync's own identity.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use arbor_api::keys::SourceRef;
use http::HeaderValue;
use kube::client::Body;

use super::Context;
use super::source_handle::SourceHandle;
use crate::apply::Applier;

/// The header kube-apiserver reads the impersonated user from.
const IMPERSONATE_USER: &str = "impersonate-user";

/// Impersonating clients, one per user, made from gitsync's own client.
pub struct Impersonation {
    base: kube::Client,
    clients: Mutex<HashMap<String, kube::Client>>,
}

impl std::fmt::Debug for Impersonation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Impersonation").finish_non_exhaustive()
    }
}

impl Impersonation {
    pub fn new(base: kube::Client) -> Self {
        Self {
            base,
            clients: Mutex::default(),
        }
    }

    /// A client whose every request acts as `username`.
    fn client_for(&self, username: &str, header: HeaderValue) -> kube::Client {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients
            .entry(username.to_owned())
            .or_insert_with(|| {
                let base = self.base.clone();
                let service = tower::service_fn(move |mut request: http::Request<Body>| {
                    let base = base.clone();
                    request
                        .headers_mut()
                        .insert(IMPERSONATE_USER, header.clone());
                    async move { base.send(request).await }
                });
                kube::Client::new(service, self.base.default_namespace())
            })
            .clone()
    }
}

/// The service account a source applies as, or why it cannot be synced.
pub fn service_account(ctx: &Context, handle: &SourceHandle) -> Result<Option<String>, String> {
    let SourceRef::GitTrack { namespace, .. } = &handle.reference else {
        return Ok(None);
    };
    let name = handle
        .service_account
        .clone()
        .or_else(|| ctx.settings.default_service_account.clone());
    match name {
        Some(name) => Ok(Some(format!("system:serviceaccount:{namespace}:{name}"))),
        None if ctx.settings.require_service_account => Err(format!(
            "spec.serviceAccountName is required: this installation applies a GitTrack only with \
             the permissions of a ServiceAccount of its namespace (--require-service-account), \
             and sets no default; name one in {namespace}"
        )),
        None => Ok(None),
    }
}

/// The applier for one round of `handle`: impersonating its service account when it has one.
/// The account is recorded for the source, so that a re-apply outside the round (ReportDrift)
/// writes as the same account.
pub fn applier_for(ctx: &Context, handle: &SourceHandle) -> Result<Applier, String> {
    let username = service_account(ctx, handle)?;
    ctx.registry.update(&handle.reference, |record| {
        record.apply_as.clone_from(&username)
    });
    applier_as(ctx, username.as_deref())
}

/// The applier writing as `username`, or as gitsync itself for `None`.
pub fn applier_as(ctx: &Context, username: Option<&str>) -> Result<Applier, String> {
    let Some(username) = username else {
        return Ok(ctx.applier.clone());
    };
    let header = HeaderValue::from_str(username)
        .map_err(|_| format!("spec.serviceAccountName: {username:?} is not a valid user name"))?;
    Ok(ctx
        .applier
        .writing_as(ctx.impersonation.client_for(username, header)))
}
