//! The one decision function: admission over HTTPS and `PolicyService.Review` over gRPC both
//! call [`Policy::review`].
//!
//! Which rules apply is decided by the request's kind:
//!
//! | kind | operations | rule |
//! |---|---|---|
//! | `arbor.dev` GitTrackObject, ClusterGitTrackObject | CREATE, UPDATE | ownership matrix ([`crate::rules::ownership`]) |
//! | `arbor.dev` GitTrack, ClusterGitTrack | CREATE, UPDATE | spec validation ([`crate::rules::sources`]) |
//! | core Namespace, `arbor.dev` SubNamespace | CREATE, UPDATE, DELETE | namespace tree ([`crate::rules::namespaces`]) |
//! | any kind, with `--prevent-drift` | CREATE, UPDATE, DELETE | drift prevention ([`crate::rules::drift`]) |
//!
//! Subresources other than the main resource (`status`, `scale`) are not judged by the kind
//! rules: they do not change owners, specs or tree labels. Drift prevention does judge `scale`,
//! since scaling a declared Deployment by hand is drift.

use std::sync::Arc;

use kube::Resource;
use kube::core::GroupVersionKind;
use kube::core::admission::Operation;
use serde_json::Value;

use crate::declared::DeclaredState;
use crate::gittrack_owners::GitTrackLocator;
use crate::review::{ObjectView, ReviewInput};
use crate::review_outcome::ReviewOutcome;
use crate::rules::namespaces::TreeKind;
use crate::rules::ownership::TrackingKind;
use crate::rules::shape::ShapeError;
use crate::rules::sources::SourceKind;
use crate::rules::{drift, namespaces, ownership, sources};
use crate::settings::PolicySettings;
use crate::tree::TreeSource;

/// The kinds Arbor has rules for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Tracking(TrackingKind),
    Source(SourceKind),
    Tree(TreeKind),
    Other,
}

impl Subject {
    /// `sub_namespace_group`: where SubNamespaces are served under the key domain (the
    /// SubNamespace kind follows the domain; Arbor's other kinds stay in `arbor.dev`).
    fn of(kind: &GroupVersionKind, sub_namespace_group: &str) -> Self {
        let arbor_group = arbor_api::GitTrack::group(&());
        match (kind.group.as_str(), kind.kind.as_str()) {
            ("", "Namespace") => Self::Tree(TreeKind::Namespace),
            (group, "SubNamespace") if group == sub_namespace_group => {
                Self::Tree(TreeKind::SubNamespace)
            }
            (group, _) if group != arbor_group => Self::Other,
            (_, "GitTrackObject") => Self::Tracking(TrackingKind::GitTrackObject),
            (_, "ClusterGitTrackObject") => Self::Tracking(TrackingKind::ClusterGitTrackObject),
            (_, "GitTrack") => Self::Source(SourceKind::GitTrack),
            (_, "ClusterGitTrack") => Self::Source(SourceKind::ClusterGitTrack),
            _ => Self::Other,
        }
    }
}

/// The webhook's decision maker: settings, the namespace tree and the declared state. Drift
/// prevention runs when the settings enable it and a declared-state source is given.
#[derive(Clone)]
pub struct Policy {
    settings: Arc<PolicySettings>,
    /// The API group SubNamespaces are served in under the settings' key domain, worked out
    /// once rather than on every review.
    sub_namespace_group: Arc<str>,
    tree: Arc<dyn TreeSource>,
    /// Where drift prevention asks what git declares; `None` turns drift prevention off.
    declared: Option<Arc<dyn DeclaredState>>,
    /// Where the GitTrack an ownerReference's uid names lives; `None` reads every GitTrack
    /// owner in its tracking object's namespace, as the API server does.
    gittracks: Option<Arc<dyn GitTrackLocator>>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Policy {
    pub fn new(
        settings: PolicySettings,
        tree: Arc<dyn TreeSource>,
        declared: Option<Arc<dyn DeclaredState>>,
    ) -> Self {
        let sub_namespace_group =
            arbor_api::SubNamespaceApi::for_domain(settings.keys.domain()).group;
        Self {
            sub_namespace_group: sub_namespace_group.into(),
            settings: Arc::new(settings),
            tree,
            declared,
            gittracks: None,
        }
    }

    /// Judges GitTrack owners where `gittracks` says they live (see [`crate::gittrack_owners`]).
    #[must_use]
    pub fn with_gittracks(mut self, gittracks: Arc<dyn GitTrackLocator>) -> Self {
        self.gittracks = Some(gittracks);
        self
    }

    pub fn settings(&self) -> &PolicySettings {
        &self.settings
    }

    /// How much of an object of `kind` the rules read: the ownership matrix and the tree rules
    /// for Namespaces read metadata only; a source's spec is validated, a SubNamespace's spec
    /// carries what it propagates, and drift prevention compares whole objects.
    pub fn object_view(&self, kind: &GroupVersionKind) -> ObjectView {
        if self.settings.drift.is_some() && self.declared.is_some() {
            return ObjectView::Whole;
        }
        match Subject::of(kind, &self.sub_namespace_group) {
            Subject::Tracking(_) | Subject::Tree(TreeKind::Namespace) | Subject::Other => {
                ObjectView::Metadata
            }
            Subject::Source(_) | Subject::Tree(TreeKind::SubNamespace) => ObjectView::Whole,
        }
    }

    /// Every rule that concerns `input`, evaluated in order.
    pub async fn review(&self, input: &ReviewInput) -> ReviewOutcome {
        let mut verdict = ReviewOutcome::default();
        // Only an unreadable object is named this way; most reviews never need the name.
        let what = || format!("{} {}", input.kind.kind, input.object_name());
        if let Err(error) = self.review_kind(input, &mut verdict) {
            verdict.push(error.into_check(&what()));
        }
        if let (Some(drift), Some(declared)) = (&self.settings.drift, &self.declared) {
            match drift::review(drift, input, declared.as_ref()).await {
                Ok(Some(check)) => verdict.push(check),
                Ok(None) => {}
                Err(error) => verdict.push(error.into_check(&what())),
            }
        }
        verdict
    }

    fn review_kind(
        &self,
        input: &ReviewInput,
        verdict: &mut ReviewOutcome,
    ) -> Result<(), ShapeError> {
        if input.sub_resource.is_some() {
            return Ok(());
        }
        let stored = || stored_object(input);
        match Subject::of(&input.kind, &self.sub_namespace_group) {
            Subject::Other => {}
            Subject::Tracking(kind) => {
                if let Some(object) = stored()? {
                    ownership::review(
                        &self.settings,
                        self.gittracks.as_deref(),
                        kind,
                        input,
                        object,
                        verdict,
                    )?;
                }
            }
            Subject::Source(kind) => {
                if let Some(object) = stored()? {
                    verdict.push(sources::review(kind, input, object));
                }
            }
            Subject::Tree(kind) => {
                let tree = self.tree.tree();
                if let Some(check) = namespaces::review(&self.settings, kind, input, &tree)? {
                    verdict.push(check);
                }
            }
        }
        Ok(())
    }
}

/// The object a CREATE or UPDATE stores; `None` for DELETE and CONNECT.
fn stored_object(input: &ReviewInput) -> Result<Option<&Value>, ShapeError> {
    match input.operation {
        Operation::Create | Operation::Update => match &input.object {
            Some(object @ Value::Object(_)) => Ok(Some(object)),
            Some(_) => Err(ShapeError::wrong_type("object", "a JSON object")),
            None => Err(ShapeError::missing("object")),
        },
        Operation::Delete | Operation::Connect => Ok(None),
    }
}
