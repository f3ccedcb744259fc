//! # arbor-webhook
//!
//! Admission-time policy for Arbor: the API server asks before it stores, tooling asks over
//! gRPC before it commits, and both get the answer of the same function,
//! [`Policy::review`], whose every decision comes from `arbor-policy` (and `arbor-api` for
//! source specs), so the webhook and the controllers cannot disagree.
//!
//! ## Model
//!
//! - [`review`]: an AdmissionReview v1 (or a gRPC `ReviewRequest`) becomes a [`ReviewInput`]:
//!   operation, kind, name, user and the objects as raw JSON.
//! - [`reviewer`]: which rules concern the input, by kind (the table is in its docs), and the
//!   [`ReviewOutcome`] listing every check ([`review_outcome`]); the first refusal decides.
//! - [`rules`]: the ownership matrix (seeds/002), source specs, the namespace tree (seeds/001)
//!   against a [`tree`] kept by reflectors, with the naming policies of the hierarchy
//!   configuration arbor-hierarchy reads ([`arbor_api::hierarchy_config`]), and drift prevention
//!   against the state that arbor-gitsync declares ([`declared`], [`gitsync_client`]). An object a
//!   rule cannot read is refused with the field that is wrong.
//! - [`server`]: HTTPS (rustls with ring) on `--webhook-addr`, `POST /validate`, with a
//!   certificate re-read when its files change ([`tls`]); [`grpc`]: `PolicyService`
//!   (CheckOwnership, Review) on the component's gRPC server.
//! - [`metrics`]: `arbor_webhook_decisions_total{via,rule,result}` and
//!   `arbor_webhook_decision_duration_seconds{via}`.
//!
//! Every replica answers (no leader election): admission must not wait for a Lease. The
//! readiness gate `namespace-tree` opens once the Namespace and SubNamespace reflectors have
//! listed, so the API server is never answered from an empty tree.

pub mod args;
pub mod declared;
pub mod gitsync_client;
pub mod gittrack_owners;
pub mod grpc;
pub mod metrics;
pub mod review;
pub mod review_outcome;
pub mod reviewer;
pub mod rules;
pub mod server;
pub mod settings;
pub mod tls;
pub mod tree;

use std::sync::Arc;

use arbor_runtime::component::{Component, StartError};

pub use args::Args;
pub use review::ReviewInput;
pub use review_outcome::{Check, ReviewOutcome};
pub use reviewer::Policy;

use crate::declared::DeclaredState;
use crate::gitsync_client::GitsyncDeclared;
use crate::gittrack_owners::WatchedGitTracks;
use crate::metrics::WebhookMetrics;
use crate::server::AppState;
use crate::tree::ClusterTree;

/// The webhook could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Args(#[from] args::ArgsError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("serving certificate: {0}")]
    Certificate(#[from] tls::CertError),
    #[error("cannot listen on --webhook-addr {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("--gitsync-addr: {0}")]
    Gitsync(arbor_runtime::grpc::GrpcError),
    #[error(transparent)]
    Grpc(#[from] arbor_runtime::grpc::GrpcError),
}

/// Runs the webhook until SIGTERM / SIGINT.
pub async fn run(args: Args) -> Result<(), RunError> {
    let settings = args.settings()?;
    let mut component = Component::start("webhook", args.common.clone()).await?;
    let metrics = WebhookMetrics::register(component.metrics()?);
    let token = component.shutdown().token();

    let gate = component.readiness().gate("namespace-tree");
    let (tree, synced) =
        ClusterTree::start(component.client(), settings.keys.clone(), token.clone());
    component.shutdown().spawn(async move {
        match synced.await {
            Ok(()) => gate.open(),
            Err(error) => tracing::error!(%error, "the namespace tree never synced"),
        }
    });

    let declared: Option<Arc<dyn DeclaredState>> = match (&settings.drift, &args.gitsync_addr) {
        (Some(_), Some(address)) => {
            let channel = arbor_runtime::grpc::connect_lazy(address, component.tls())
                .map_err(RunError::Gitsync)?;
            Some(Arc::new(GitsyncDeclared::new(
                channel,
                args.gitsync_timeout,
                args.drift_cache_ttl,
            )))
        }
        _ => None,
    };
    let gittracks = WatchedGitTracks::start(component.client(), token.clone());
    let policy =
        Policy::new(settings, Arc::new(tree), declared).with_gittracks(Arc::new(gittracks));

    let resolver = Arc::new(tls::ReloadingCert::load(
        &args.webhook_cert,
        &args.webhook_key,
    )?);
    let tls_config = Arc::new(resolver.server_config()?);
    let listener = server::bind(args.webhook_addr, tls_config, component.limits().clone())
        .await
        .map_err(|source| RunError::Listen {
            address: args.webhook_addr,
            source,
        })?;
    let https_address = listener.local_addr();
    let router = server::router(AppState {
        policy: policy.clone(),
        metrics: metrics.clone(),
    });
    component
        .shutdown()
        .spawn(listener.serve(router, token.clone()));
    tracing::info!(%https_address, path = server::VALIDATE_PATH, "admission endpoint listening");

    let grpc_address = component
        .serve_grpc(tonic::service::Routes::new(
            grpc::PolicyGrpc::new(policy, metrics).into_service(),
        ))
        .await?;
    tracing::info!(%grpc_address, "PolicyService listening");

    let admin_address = component.serve_admin().await?;
    tracing::info!(%admin_address, "admin endpoints listening");

    token.cancelled().await;
    component.shutdown().drain().await;
    Ok(())
}
