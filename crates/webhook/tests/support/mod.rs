//! Shared by the webhook's integration tests: AdmissionReview fixtures, policies over fixed
//! trees, a scripted declared state, and an HTTPS server on loopback.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_policy::keys::{Keys, ManagementLabel};
use arbor_policy::ownership::{
    ClusterGitTrackMode, GitTrackMode, NamespaceRestriction, WatchScope,
};
use arbor_policy::propagation::NamespaceState;
use arbor_policy::sync::CompareFields;
use arbor_runtime::listener::Limits;
use arbor_testkit::pki::Authority;
use arbor_webhook::declared::{Declared, DeclaredState, LookupError, ObjectIdentity};
use arbor_webhook::metrics::WebhookMetrics;
use arbor_webhook::review::{ObjectView, ReviewInput, decode_admission_review};
use arbor_webhook::rules::drift::{DriftSettings, UnreachableAnswer};
use arbor_webhook::server::{self, AppState};
use arbor_webhook::settings::PolicySettings;
use arbor_webhook::tls::ReloadingCert;
use arbor_webhook::tree::FixedTree;
use arbor_webhook::{Policy, ReviewOutcome};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const ARBOR: &str = "arbor.dev/v1alpha1";
pub const GITSYNC_SA: &str = "system:serviceaccount:arbor-system:arbor-gitsync";

/// An AdmissionReview v1 body around `request` fields.
pub fn review_body(request: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// The request fields of an AdmissionReview for `operation` on an object of `group/version
/// kind`, by `user`.
pub fn request(
    operation: &str,
    (group, version, kind): (&str, &str, &str),
    namespace: Option<&str>,
    name: &str,
    user: &str,
    object: Option<Value>,
    old_object: Option<Value>,
) -> Value {
    json!({
        "uid": "5f1c7a0e-0001-4d1e-9a55-000000000001",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": object,
        "oldObject": old_object,
    })
}

/// Decodes a fixture with its objects whole.
pub fn input(request: Value) -> ReviewInput {
    let body = serde_json::to_vec(&review_body(request)).unwrap();
    decode_admission_review(&body, |_| ObjectView::Whole)
        .unwrap()
        .input
}

/// Decodes a fixture the way the HTTPS endpoint does for `policy`: each object read only as far
/// as the policy's view of its kind.
pub fn input_for(policy: &Policy, request: Value) -> ReviewInput {
    let body = serde_json::to_vec(&review_body(request)).unwrap();
    decode_admission_review(&body, |kind| policy.object_view(kind))
        .unwrap()
        .input
}

pub fn scope(cluster: ClusterGitTrackMode) -> WatchScope {
    WatchScope::from_flags(
        GitTrackMode::Enabled,
        cluster,
        NamespaceRestriction::AllNamespaces,
    )
    .unwrap()
}

pub fn settings(cluster: ClusterGitTrackMode) -> PolicySettings {
    PolicySettings::new(scope(cluster), Keys::default())
}

pub fn drift_settings(unreachable: UnreachableAnswer) -> DriftSettings {
    DriftSettings {
        label: ManagementLabel::arbor(),
        service_accounts: BTreeSet::from([GITSYNC_SA.to_owned()]),
        unreachable,
    }
}

/// A declared state scripted per object name; names not listed are unreachable.
#[derive(Debug, Default)]
pub struct ScriptedDeclared {
    pub answers: HashMap<String, Declared>,
}

impl ScriptedDeclared {
    pub fn declaring(name: &str, object: Value) -> Self {
        Self {
            answers: HashMap::from([(
                name.to_owned(),
                Declared::Object {
                    object,
                    fields: CompareFields::AllDeclared,
                    source: "GitTrack/team-a/apps".into(),
                    file: "apps/web.yaml".into(),
                },
            )]),
        }
    }
}

impl DeclaredState for ScriptedDeclared {
    fn declared<'a>(
        &'a self,
        object: &'a ObjectIdentity,
    ) -> BoxFuture<'a, Result<Declared, LookupError>> {
        let answer = self
            .answers
            .get(&object.name)
            .cloned()
            .ok_or_else(|| LookupError::Unreachable("connection refused".into()));
        Box::pin(async move { answer })
    }
}

pub fn policy(
    settings: PolicySettings,
    namespaces: Vec<NamespaceState>,
    declared: Option<ScriptedDeclared>,
) -> Policy {
    let tree = FixedTree::new(&settings.keys, namespaces);
    Policy::new(
        settings,
        Arc::new(tree),
        declared.map(|d| Arc::new(d) as Arc<dyn DeclaredState>),
    )
}

/// The policy's outcome for a fixture decoded as the HTTPS endpoint decodes it, checked to be
/// the outcome for the whole objects: the view the policy chose left out nothing its rules read.
pub async fn decide(policy: &Policy, request: Value) -> ReviewOutcome {
    let outcome = policy.review(&input_for(policy, request.clone())).await;
    let whole = policy.review(&input(request)).await;
    assert_eq!(
        outcome, whole,
        "the object view changed the outcome; the rules read a field the view left out"
    );
    outcome
}

/// Namespace fixtures under the default domain.
pub fn root(name: &str) -> NamespaceState {
    NamespaceState::new(name).with_label("arbor.dev/type", "root")
}

pub fn sub(name: &str, parent: &str) -> NamespaceState {
    NamespaceState::new(name).with_label("arbor.dev/parent", parent)
}

pub fn namespace_object(state: &NamespaceState) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": state.name, "labels": state.labels},
    })
}

/// A tree `r` (root) > `a` > `b`, and the request that makes `a` a sub-namespace of `b`.
pub fn cycle_tree() -> Vec<NamespaceState> {
    vec![root("r"), sub("a", "r"), sub("b", "a")]
}

pub fn cycle_request() -> Value {
    request(
        "UPDATE",
        ("", "v1", "Namespace"),
        None,
        "a",
        "alice",
        Some(namespace_object(&sub("a", "b"))),
        Some(namespace_object(&sub("a", "r"))),
    )
}

/// A certificate pair for 127.0.0.1 written to `dir` the way the kubelet updates a Secret
/// volume (new files renamed over the old); returns the certificate's DER.
pub fn write_certificate(ca: &Authority, dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let issued = ca
        .issue("arbor-webhook", &["127.0.0.1", "localhost"])
        .unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(dir.join(".tls.crt.tmp"), &issued.cert_pem).unwrap();
    std::fs::write(dir.join(".tls.key.tmp"), &issued.key_pem).unwrap();
    std::fs::rename(dir.join(".tls.key.tmp"), &key).unwrap();
    std::fs::rename(dir.join(".tls.crt.tmp"), &cert).unwrap();
    let der = rustls_pemfile::certs(&mut issued.cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .to_vec();
    (cert, key, der)
}

/// The HTTPS admission server on a free loopback port; stops when dropped.
pub struct HttpsServer {
    pub address: SocketAddr,
    pub ca: Authority,
    pub dir: tempfile::TempDir,
    pub first_der: Vec<u8>,
    pub metrics: WebhookMetrics,
    stop: CancellationToken,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HttpsServer {
    pub async fn start(policy: Policy) -> Self {
        Self::start_with(policy, Limits::default()).await
    }

    /// As [`HttpsServer::start`], with the given listener bounds.
    pub async fn start_with(policy: Policy, limits: Limits) -> Self {
        let ca = Authority::generate("webhook test CA").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, first_der) = write_certificate(&ca, dir.path());
        let resolver = Arc::new(ReloadingCert::load(cert, key).unwrap());
        let tls = Arc::new(resolver.server_config().unwrap());
        let listener = server::bind("127.0.0.1:0".parse().unwrap(), tls, limits)
            .await
            .unwrap();
        let address = listener.local_addr();
        let metrics = WebhookMetrics::default();
        let router = server::router(AppState {
            policy,
            metrics: metrics.clone(),
        });
        let stop = CancellationToken::new();
        tokio::spawn(listener.serve(router, stop.clone()));
        Self {
            address,
            ca,
            dir,
            first_der,
            metrics,
            stop,
        }
    }

    /// A TLS client trusting the test CA.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut self.ca.cert_pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// POSTs `body` to `path` on a new connection; returns the status, the body and the DER of
    /// the certificate the server presented.
    pub async fn post(&self, path: &str, body: Vec<u8>) -> (u16, Vec<u8>, Vec<u8>) {
        use http_body_util::{BodyExt, Full};
        let tcp = tokio::net::TcpStream::connect(self.address).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = self.connector().connect(name, tcp).await.unwrap();
        let served = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::post(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(hyper::body::Bytes::from(body)))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        (status, bytes, served)
    }
}
