//! `PolicyService` over gRPC: the webhook's decisions for tools (CI pipelines, `arborctl`) that
//! want to know before they commit.
//!
//! `Review` turns the request into the same [`ReviewInput`] an AdmissionReview becomes and
//! calls the same [`Policy::review`]; `CheckOwnership` asks the same matrix cell function as
//! admission, for this installation's modes or the modes the caller gives.

use std::collections::BTreeMap;
use std::time::Instant;

use arbor_policy::ownership::{
    ClusterGitTrackMode, GitTrackMode, NamespaceRestriction, Owner, TrackingObject, WatchScope,
};
use arbor_proto::v1 as proto;
use arbor_proto::v1::policy_service_server::PolicyService;
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::GroupVersionKind;
use kube::core::admission::Operation;
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::metrics::WebhookMetrics;
use crate::review::ReviewInput;
use crate::review_outcome::Check;
use crate::reviewer::Policy;
use crate::rules::ownership;

/// The PolicyService implementation.
#[derive(Debug, Clone)]
pub struct PolicyGrpc {
    policy: Policy,
    metrics: WebhookMetrics,
}

impl PolicyGrpc {
    pub fn new(policy: Policy, metrics: WebhookMetrics) -> Self {
        Self { policy, metrics }
    }

    /// The tonic service, ready for `Server::add_service`.
    pub fn into_service(self) -> proto::policy_service_server::PolicyServiceServer<Self> {
        proto::policy_service_server::PolicyServiceServer::new(self)
    }

    fn scope(&self, modes: Option<proto::InstallationModes>) -> Result<WatchScope, Status> {
        let Some(modes) = modes else {
            return Ok(self.policy.settings().scope.clone());
        };
        let gittrack = match modes.git_track_mode() {
            proto::GitTrackMode::Unspecified => GitTrackMode::default(),
            proto::GitTrackMode::Disabled => GitTrackMode::Disabled,
            proto::GitTrackMode::Enabled => GitTrackMode::Enabled,
        };
        let cluster = match modes.cluster_git_track_mode() {
            proto::ClusterGitTrackMode::Unspecified => ClusterGitTrackMode::default(),
            proto::ClusterGitTrackMode::Disabled => ClusterGitTrackMode::Disabled,
            proto::ClusterGitTrackMode::IncludeNamespaced => ClusterGitTrackMode::IncludeNamespaced,
            proto::ClusterGitTrackMode::ExcludeNamespaced => ClusterGitTrackMode::ExcludeNamespaced,
        };
        let namespace: NamespaceRestriction = modes
            .namespace
            .parse()
            .map_err(|error| invalid("modes.namespace", error))?;
        WatchScope::from_flags(gittrack, cluster, namespace)
            .map_err(|error| invalid("modes", error))
    }
}

fn invalid(field: &str, error: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {error}"))
}

fn decision(check: Check) -> proto::Decision {
    proto::Decision {
        allowed: check.allowed,
        action: proto::Action::Unspecified as i32,
        rule: check.rule,
        reason: check.reason,
    }
}

/// Reads a `ReviewRequest` as the [`ReviewInput`] admission would build.
pub fn review_input(request: proto::ReviewRequest) -> Result<ReviewInput, Status> {
    let operation = match request.operation() {
        proto::Operation::Create => Operation::Create,
        proto::Operation::Update => Operation::Update,
        proto::Operation::Delete => Operation::Delete,
        proto::Operation::Connect => Operation::Connect,
        proto::Operation::Unspecified => {
            return Err(invalid(
                "operation",
                "must be CREATE, UPDATE, DELETE or CONNECT",
            ));
        }
    };
    let object = request
        .object
        .ok_or_else(|| invalid("object", "the object's identity is required"))?;
    if object.kind.is_empty() || object.version.is_empty() {
        return Err(invalid("object", "kind and version are required"));
    }
    let parse = |field: &str, text: &str| -> Result<Option<Value>, Status> {
        if text.is_empty() {
            return Ok(None);
        }
        match serde_json::from_str(text) {
            Ok(object @ Value::Object(_)) => Ok(Some(object)),
            Ok(_) => Err(invalid(field, "is not a JSON object")),
            Err(error) => Err(invalid(field, error)),
        }
    };
    let user = request.user.unwrap_or_default();
    let extra: BTreeMap<String, Vec<String>> = user
        .extra
        .into_iter()
        .map(|(key, values)| (key, values.values))
        .collect();
    Ok(ReviewInput {
        operation,
        kind: GroupVersionKind::gvk(&object.group, &object.version, &object.kind),
        name: object.name,
        namespace: Some(object.namespace).filter(|ns| !ns.is_empty()),
        sub_resource: Some(request.sub_resource).filter(|s| !s.is_empty()),
        user: UserInfo {
            username: Some(user.username).filter(|u| !u.is_empty()),
            uid: Some(user.uid).filter(|u| !u.is_empty()),
            groups: Some(user.groups).filter(|g| !g.is_empty()),
            extra: Some(extra).filter(|e| !e.is_empty()),
        },
        object: parse("object_json", &request.object_json)?,
        old_object: parse("old_object_json", &request.old_object_json)?,
    })
}

#[tonic::async_trait]
impl PolicyService for PolicyGrpc {
    async fn check_ownership(
        &self,
        request: Request<proto::CheckOwnershipRequest>,
    ) -> Result<Response<proto::CheckOwnershipResponse>, Status> {
        let request = request.into_inner();
        let object_kind = request.object_kind();
        let source = request
            .owner
            .ok_or_else(|| invalid("owner", "the owning source is required"))?;
        let owner = match source.kind() {
            proto::SourceKind::GitTrack if source.namespace.is_empty() => {
                return Err(invalid("owner.namespace", "a GitTrack has a namespace"));
            }
            proto::SourceKind::GitTrack => Owner::gittrack(source.namespace),
            proto::SourceKind::ClusterGitTrack => Owner::ClusterGitTrack,
            proto::SourceKind::Unspecified => {
                return Err(invalid(
                    "owner.kind",
                    "must be GIT_TRACK or CLUSTER_GIT_TRACK",
                ));
            }
        };
        let tracking = match object_kind {
            proto::TrackedObjectKind::GitTrackObject if request.object_namespace.is_empty() => {
                return Err(invalid(
                    "object_namespace",
                    "a GitTrackObject has a namespace",
                ));
            }
            proto::TrackedObjectKind::GitTrackObject => {
                TrackingObject::gittrack_object(request.object_namespace)
            }
            proto::TrackedObjectKind::ClusterGitTrackObject => {
                TrackingObject::ClusterGitTrackObject
            }
            proto::TrackedObjectKind::Unspecified => {
                return Err(invalid(
                    "object_kind",
                    "must be GIT_TRACK_OBJECT or CLUSTER_GIT_TRACK_OBJECT",
                ));
            }
        };
        let scope = self.scope(request.modes)?;
        let check = ownership::judge(&scope, &owner, &tracking);
        Ok(Response::new(proto::CheckOwnershipResponse {
            decision: Some(decision(check)),
        }))
    }

    async fn review(
        &self,
        request: Request<proto::ReviewRequest>,
    ) -> Result<Response<proto::ReviewResponse>, Status> {
        let started = Instant::now();
        let input = review_input(request.into_inner())?;
        let verdict = self.policy.review(&input).await;
        self.metrics.record("review", &verdict, started.elapsed());
        Ok(Response::new(proto::ReviewResponse {
            decision: Some(decision(verdict.decision())),
            warnings: verdict.warnings,
            checks: verdict.checks.into_iter().map(decision).collect(),
        }))
    }
}
