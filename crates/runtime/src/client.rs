//! The Kubernetes client every component uses.

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

use crate::throttle::RetryThrottledLayer;

use crate::flags::CommonArgs;

/// The client could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read kubeconfig {path}: {source}")]
    ReadKubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes configuration found (no --kubeconfig, no in-cluster account, no ~/.kube/config): {0}"
    )]
    Infer(#[from] kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {0}")]
    Build(#[from] kube::Error),
}

/// The client configuration that the flags select: an explicit kubeconfig (and context),
/// else the standard inference (in-cluster, then `$KUBECONFIG` or `~/.kube/config`).
pub async fn config(args: &CommonArgs) -> Result<Config, ClientError> {
    config_for(args.kubeconfig.as_deref(), args.context.as_deref()).await
}

/// The client configuration of `kubeconfig` (and `context`), else the standard inference.
pub async fn config_for(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<Config, ClientError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    match kubeconfig {
        Some(path) => {
            let shown = path.display().to_string();
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| ClientError::ReadKubeconfig {
                    path: shown.clone(),
                    source,
                })?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: shown,
                    source,
                })
        }
        None if context.is_some() => {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: "$KUBECONFIG or ~/.kube/config".into(),
                    source,
                })
        }
        None => Ok(Config::infer().await?),
    }
}

/// A client for the configuration that the flags select.
pub async fn client(args: &CommonArgs) -> Result<Client, ClientError> {
    with_retries(config(args).await?)
}

/// A client for `config` whose requests are retried when the API server throttles them
/// ([`crate::throttle`]).
///
/// kube-rs's own retry layer is turned off: it sits under ours, backs off up to 1,000 s and
/// prefers its backoff over a shorter `Retry-After`, so with both a request refused a few
/// times in a row was resent up to 16 times per attempt of ours and one object could hold a
/// round for minutes after the server had recovered.
pub fn with_retries(config: Config) -> Result<Client, ClientError> {
    with_retry_policy(config, RetryThrottledLayer::default())
}

/// [`with_retries`], but nothing is resent once `stop` is cancelled (a component's shutdown,
/// which a lost Lease also starts; see [`crate::throttle`]).
pub fn with_retries_until(config: Config, stop: CancellationToken) -> Result<Client, ClientError> {
    with_retry_policy(
        config,
        RetryThrottledLayer {
            stop: Some(stop),
            ..RetryThrottledLayer::default()
        },
    )
}

fn with_retry_policy(
    mut config: Config,
    policy: RetryThrottledLayer,
) -> Result<Client, ClientError> {
    config.default_retry = false;
    Ok(ClientBuilder::try_from(config)?.with_layer(&policy).build())
}

/// A client for a kubeconfig held in memory, such as the one an emulated API server hands
/// out in tests and in the demo, or one read from a Secret.
pub async fn from_kubeconfig_yaml(yaml: &str) -> Result<Client, ClientError> {
    with_retries(config_from_kubeconfig_yaml(yaml).await?)
}

/// The client configuration of a kubeconfig held in memory.
pub async fn config_from_kubeconfig_yaml(yaml: &str) -> Result<Config, ClientError> {
    let shown = || "(in-memory kubeconfig)".to_owned();
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(|source| ClientError::ReadKubeconfig {
        path: shown(),
        source,
    })?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| ClientError::Kubeconfig {
            path: shown(),
            source,
        })
}
