//! Reaching Arbor's components in a cluster with nothing but a kubeconfig.
//!
//! When arborctl knows a cluster (`--kubeconfig` / `--context`, or a context of the arborctl
//! config file that names a kubeconfig) and no address for a service, it goes through the API
//! server, as `kubectl port-forward svc/...` does, without opening a local port:
//!
//! 1. The component's Service `<fullname>-<component>` in the release namespace
//!    (`--arbor-namespace`, default `arbor-system`) gives the pod selector and the gRPC port
//!    (the port named `grpc`, its `targetPort` resolved against the pod's container ports).
//!    The chart's full name is the release name (`--release`, default `arbor`) when it contains
//!    "arbor", else `<release>-arbor`, as the chart names things.
//! 2. One ready pod of that selector (phase Running, condition Ready, not being deleted) is
//!    port-forwarded through the API server (`pods/portforward`, WebSocket).
//! 3. TLS runs over that stream and verifies the server certificate for the Service's DNS name
//!    `<service>.<namespace>.svc`, a name the chart's certificates carry: no `/etc/hosts` entry
//!    and no local port are involved. The client certificate, its key and the CA come from
//!    the Secret `<fullname>-operator-tls` the chart issues for operators, unless
//!    `--tls-cert`/`--tls-key`/`--tls-ca` name files.
//!
//! What the user needs is what the chart's `<fullname>-operator` ClusterRole grants, bound in
//! the release namespace: get that Secret and the four Services, list pods, and `get` and
//! `create` on `pods/portforward` (a WebSocket port-forward is a GET; kube-apiserver 1.35 also
//! asks for `create`). Each refusal names the permission and the ClusterRole.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use arbor_runtime::grpc::TlsMaterial;
use k8s_openapi::api::core::v1::{Pod, Secret, Service as KubeService};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::ListParams;
use tokio::io::DuplexStream;

use crate::connect::Service;

/// The namespace the chart is installed in unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "arbor-system";
/// The Helm release name unless told otherwise.
pub const DEFAULT_RELEASE: &str = "arbor";

/// How long a failed connection waits for the pod side's error message.
const ERROR_MESSAGE_WAIT: Duration = Duration::from_secs(2);

/// One Arbor installation in one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterTarget {
    /// The kubeconfig file; `KUBECONFIG` or `~/.kube/config` when absent.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context; its current one when absent.
    pub kube_context: Option<String>,
    /// The release namespace.
    pub namespace: String,
    /// The Helm release name.
    pub release: String,
}

impl ClusterTarget {
    /// The chart's `arbor.fullname`: the release name when it contains "arbor", else
    /// `<release>-arbor`.
    pub fn fullname(&self) -> String {
        if self.release.contains("arbor") {
            self.release.clone()
        } else {
            format!("{}-arbor", self.release)
        }
    }

    /// The Service of `service`'s component.
    pub fn service_name(&self, service: Service) -> String {
        format!("{}-{}", self.fullname(), service.component())
    }

    /// The Secret holding the operators' client certificate.
    pub fn operator_secret(&self) -> String {
        format!("{}-operator-tls", self.fullname())
    }

    /// The ClusterRole that grants what arborctl needs here.
    fn operator_role(&self) -> String {
        format!("{}-operator", self.fullname())
    }

    /// Where the kubeconfig comes from, for messages.
    fn describe_kubeconfig(&self) -> String {
        let file = self.kubeconfig.as_ref().map_or_else(
            || "the default kubeconfig".to_owned(),
            |path| format!("kubeconfig {}", path.display()),
        );
        match &self.kube_context {
            Some(context) => format!("{file}, context {context:?}"),
            None => file,
        }
    }
}

/// Why a component could not be reached through the API server.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot use {kubeconfig}: {source}")]
    Kubeconfig {
        kubeconfig: String,
        source: arbor_runtime::client::ClientError,
    },
    #[error("{kubeconfig}: {source}")]
    Client {
        kubeconfig: String,
        source: arbor_runtime::client::ClientError,
    },
    #[error(
        "no Service {namespace}/{name}: is Arbor installed in namespace {namespace:?} as release {release:?}? (set --arbor-namespace and --release)"
    )]
    NoService {
        namespace: String,
        name: String,
        release: String,
    },
    #[error("no ready pod for {component} in namespace {namespace} (selector {selector}): {found}")]
    NoReadyPod {
        component: String,
        namespace: String,
        selector: String,
        /// What was found instead, like "2 pods, none ready: a (Pending), b (Running, not ready)".
        found: String,
    },
    #[error("Service {namespace}/{name} has no gRPC port: {why}")]
    NoPort {
        namespace: String,
        name: String,
        why: String,
    },
    #[error(
        "RBAC forbids {permission} in namespace {namespace} ({message}); the Helm chart's ClusterRole {role} grants what arborctl needs: bind it to your user or group in namespace {namespace} (chart value operatorAccess.groups)"
    )]
    Forbidden {
        permission: String,
        namespace: String,
        role: String,
        message: String,
    },
    #[error(
        "the Secret {namespace}/{name} with the operators' client certificate does not exist (the chart creates it with grpcAuthorization.issueOperatorCertificate=true); or pass --tls-cert, --tls-key and --tls-ca"
    )]
    SecretMissing { namespace: String, name: String },
    #[error("the Secret {namespace}/{name} has no {key}")]
    SecretIncomplete {
        namespace: String,
        name: String,
        key: &'static str,
    },
    #[error("asking the API server to {action}: {source}")]
    Api { action: String, source: kube::Error },
    #[error("port-forward to pod {namespace}/{pod} port {port}: {message}")]
    PortForward {
        namespace: String,
        pod: String,
        port: u16,
        message: String,
    },
}

/// A component's pod found and its first port-forward open: what a gRPC channel needs.
pub struct Forward {
    target: ClusterTarget,
    service_name: String,
    service_port: i32,
    connector: Connector,
    /// The client certificate, key and CA from the operators' Secret (when needed).
    pub secret_material: Option<TlsMaterial>,
}

impl Forward {
    /// Finds a ready pod of `service`'s component and opens a port-forward to it, so that
    /// permission and pod problems surface here, each with its own error. The operators'
    /// Secret is read unless `need_secret` is false.
    pub async fn open(
        target: &ClusterTarget,
        service: Service,
        need_secret: bool,
    ) -> Result<Forward, ClusterError> {
        let client = client(target).await?;
        let namespace = target.namespace.as_str();
        let service_name = target.service_name(service);
        let services: Api<KubeService> = Api::namespaced(client.clone(), namespace);
        let found = services.get(&service_name).await.map_err(|error| {
            let missing = ClusterError::NoService {
                namespace: namespace.to_owned(),
                name: service_name.clone(),
                release: target.release.clone(),
            };
            refusal(
                target,
                error,
                format!("get services {service_name:?}"),
                Some(missing),
            )
        })?;
        let spec = found.spec.unwrap_or_default();
        let no_port = |why: &str| ClusterError::NoPort {
            namespace: namespace.to_owned(),
            name: service_name.clone(),
            why: why.to_owned(),
        };
        let ports = spec.ports.unwrap_or_default();
        let port = ports
            .iter()
            .find(|port| port.name.as_deref() == Some("grpc"))
            .or(ports.first())
            .ok_or_else(|| no_port("it lists no ports"))?;
        let selector = spec
            .selector
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(",");
        if selector.is_empty() {
            return Err(no_port("it has no pod selector"));
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let listed = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|error| refusal(target, error, "list pods".to_owned(), None))?;
        let pod = pick_ready(&listed.items).ok_or_else(|| ClusterError::NoReadyPod {
            component: format!("{service} (Service {service_name})"),
            namespace: namespace.to_owned(),
            selector: selector.clone(),
            found: describe_pods(&listed.items),
        })?;
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let container_port = match &port.target_port {
            None => port.port,
            Some(IntOrString::Int(number)) => *number,
            Some(IntOrString::String(name)) => named_port(pod, name).ok_or_else(|| {
                no_port(&format!(
                    "its targetPort {name:?} names no container port of pod {pod_name}"
                ))
            })?,
        };
        let container_port = u16::try_from(container_port)
            .map_err(|_| no_port(&format!("port {container_port} is out of range")))?;
        let secret_material = if need_secret {
            Some(operator_material(target, &client).await?)
        } else {
            None
        };
        let connector = Connector {
            pods,
            target: target.clone(),
            pod: pod_name,
            port: container_port,
            first: Arc::new(Mutex::new(None)),
            pending_error: Arc::new(Mutex::new(None)),
        };
        let stream = connector.open().await?;
        *lock(&connector.first) = Some(stream);
        Ok(Forward {
            target: target.clone(),
            service_name,
            service_port: port.port,
            connector,
            secret_material,
        })
    }

    /// The URL the channel is built for: the Service's DNS name, which TLS verifies. Nothing
    /// resolves it; the connector carries every byte through the port-forward.
    pub fn url(&self) -> String {
        format!(
            "https://{}.{}.svc:{}",
            self.service_name, self.target.namespace, self.service_port
        )
    }

    /// How the service is reached, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{}.{}.svc (port-forward to pod {}/{} port {} with {})",
            self.service_name,
            self.target.namespace,
            self.target.namespace,
            self.connector.pod,
            self.connector.port,
            self.target.describe_kubeconfig()
        )
    }

    /// The connector a tonic endpoint dials through.
    pub fn connector(&self) -> Connector {
        self.connector.clone()
    }

    /// The error the pod side reported for the last port-forward, waiting briefly for it: a
    /// connection that broke off is explained by it when there is one.
    pub async fn pod_side_error(&self) -> Option<ClusterError> {
        let pending = lock(&self.connector.pending_error).take()?;
        let message = tokio::time::timeout(ERROR_MESSAGE_WAIT, pending)
            .await
            .ok()
            .flatten()?;
        Some(ClusterError::PortForward {
            namespace: self.target.namespace.clone(),
            pod: self.connector.pod.clone(),
            port: self.connector.port,
            message,
        })
    }
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("url", &self.url())
            .field("connector", &self.connector)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn client(target: &ClusterTarget) -> Result<kube::Client, ClusterError> {
    let config = arbor_runtime::client::config_for(
        target.kubeconfig.as_deref(),
        target.kube_context.as_deref(),
    )
    .await
    .map_err(|source| ClusterError::Kubeconfig {
        kubeconfig: target.describe_kubeconfig(),
        source,
    })?;
    // Arbor's retry policy for throttled requests, as the controllers have it.
    arbor_runtime::client::with_retries(config).map_err(|source| ClusterError::Client {
        kubeconfig: target.describe_kubeconfig(),
        source,
    })
}

/// An API error as what the user can act on: 403 names the permission and the ClusterRole,
/// 404 is `not_found` when the request names an object, anything else is the API server's own
/// answer.
fn refusal(
    target: &ClusterTarget,
    error: kube::Error,
    permission: String,
    not_found: Option<ClusterError>,
) -> ClusterError {
    match (&error, not_found) {
        (kube::Error::Api(status), _) if status.code == 403 => ClusterError::Forbidden {
            permission,
            namespace: target.namespace.clone(),
            role: target.operator_role(),
            message: status.message.clone(),
        },
        (kube::Error::Api(status), Some(not_found)) if status.code == 404 => not_found,
        _ => ClusterError::Api {
            action: permission,
            source: error,
        },
    }
}

/// Whether `pod` can take traffic: Running, Ready, not being deleted.
fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    pod.metadata.deletion_timestamp.is_none()
        && status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
}

/// The first ready pod by name, so that repeated commands reach the same pod.
fn pick_ready(pods: &[Pod]) -> Option<&Pod> {
    pods.iter()
        .filter(|pod| is_ready(pod))
        .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name))
}

/// "no pods match", or each pod with why it is not ready.
fn describe_pods(pods: &[Pod]) -> String {
    if pods.is_empty() {
        return "no pods match".to_owned();
    }
    let states: Vec<String> = pods
        .iter()
        .map(|pod| {
            let name = pod.metadata.name.as_deref().unwrap_or("?");
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Unknown");
            let state = if pod.metadata.deletion_timestamp.is_some() {
                "Terminating".to_owned()
            } else if phase == "Running" {
                "Running, not ready".to_owned()
            } else {
                phase.to_owned()
            };
            format!("{name} ({state})")
        })
        .collect();
    format!("{} pod(s), none ready: {}", pods.len(), states.join(", "))
}

/// The container port of `pod` named `name`.
fn named_port(pod: &Pod, name: &str) -> Option<i32> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|container| container.ports.iter().flatten())
        .find(|port| port.name.as_deref() == Some(name))
        .map(|port| port.container_port)
}

/// The client certificate, key and CA of the operators' Secret.
async fn operator_material(
    target: &ClusterTarget,
    client: &kube::Client,
) -> Result<TlsMaterial, ClusterError> {
    let name = target.operator_secret();
    let namespace = target.namespace.clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = secrets.get(&name).await.map_err(|error| {
        let missing = ClusterError::SecretMissing {
            namespace: namespace.clone(),
            name: name.clone(),
        };
        refusal(
            target,
            error,
            format!("get secrets {name:?}"),
            Some(missing),
        )
    })?;
    let data = secret.data.unwrap_or_default();
    let field = |key: &'static str| {
        data.get(key)
            .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
            .filter(|text| !text.trim().is_empty())
            .ok_or_else(|| ClusterError::SecretIncomplete {
                namespace: namespace.clone(),
                name: name.clone(),
                key,
            })
    };
    Ok(TlsMaterial {
        cert_pem: Some(field("tls.crt")?),
        key_pem: Some(field("tls.key")?),
        ca_pem: Some(field("ca.crt")?),
    })
}

type ErrorMessage = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// Opens a port-forward to one pod's port for each connection a gRPC channel makes; the first
/// one was opened ahead, by [`Forward::open`].
#[derive(Clone)]
pub struct Connector {
    pods: Api<Pod>,
    target: ClusterTarget,
    pod: String,
    port: u16,
    first: Arc<Mutex<Option<DuplexStream>>>,
    /// The error channel of the latest port-forward: the pod side's reason when it fails.
    pending_error: Arc<Mutex<Option<ErrorMessage>>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("namespace", &self.target.namespace)
            .field("pod", &self.pod)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Connector {
    async fn open(&self) -> Result<DuplexStream, ClusterError> {
        let mut forwarder = self
            .pods
            .portforward(&self.pod, &[self.port])
            .await
            .map_err(|error| {
                let gone = ClusterError::PortForward {
                    namespace: self.target.namespace.clone(),
                    pod: self.pod.clone(),
                    port: self.port,
                    message: "the pod is gone".to_owned(),
                };
                refusal(
                    &self.target,
                    error,
                    "get and create pods/portforward".to_owned(),
                    Some(gone),
                )
            })?;
        let missing = |what: &str| ClusterError::PortForward {
            namespace: self.target.namespace.clone(),
            pod: self.pod.clone(),
            port: self.port,
            message: format!("the port-forward has no {what}"),
        };
        let stream = forwarder
            .take_stream(self.port)
            .ok_or_else(|| missing("data stream"))?;
        let errors = forwarder
            .take_error(self.port)
            .ok_or_else(|| missing("error stream"))?;
        *lock(&self.pending_error) = Some(Box::pin(errors));
        Ok(stream)
    }
}

impl tower::Service<http::Uri> for Connector {
    type Response = hyper_util::rt::TokioIo<DuplexStream>;
    type Error = ClusterError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ClusterError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ClusterError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move {
            let opened = lock(&connector.first).take();
            let stream = match opened {
                Some(stream) => stream,
                None => connector.open().await?,
            };
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(release: &str) -> ClusterTarget {
        ClusterTarget {
            kubeconfig: None,
            kube_context: None,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            release: release.to_owned(),
        }
    }

    #[test]
    fn names_follow_the_charts_full_name() {
        assert_eq!(target("arbor").service_name(Service::Sync), "arbor-gitsync");
        assert_eq!(
            target("prod").service_name(Service::Policy),
            "prod-arbor-webhook"
        );
        assert_eq!(
            target("arbor-prod").operator_secret(),
            "arbor-prod-operator-tls"
        );
    }

    fn pod(name: &str, phase: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]},
        }))
        .unwrap()
    }

    #[test]
    fn the_first_ready_pod_is_picked_and_the_others_explained() {
        let pods = vec![
            pod("c", "Running", true),
            pod("a", "Pending", false),
            pod("b", "Running", true),
        ];
        assert_eq!(
            pick_ready(&pods).and_then(|p| p.metadata.name.as_deref()),
            Some("b")
        );
        let none = vec![pod("a", "Pending", false), pod("b", "Running", false)];
        assert!(pick_ready(&none).is_none());
        assert_eq!(
            describe_pods(&none),
            "2 pod(s), none ready: a (Pending), b (Running, not ready)"
        );
        assert_eq!(describe_pods(&[]), "no pods match");
    }
}
