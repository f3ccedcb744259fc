//! An admission webhook served by the test over HTTPS with its own rcgen CA, answering by path:
//! `/allow`, `/deny` (no code: the server's default), `/deny-422`, `/mutate` (adds the label
//! `mutated=yes`), `/warn` (allows with a warning). Every review it receives is kept.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The DNS name the certificate carries for service references (`hook` in `webhooks`).
pub const SERVICE_HOST: &str = "hook.webhooks.svc";

pub struct TestWebhook {
    pub addr: SocketAddr,
    /// The CA that signed the serving certificate, PEM.
    pub ca_pem: String,
    reviews: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestWebhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A fresh CA and a certificate for 127.0.0.1 and [`SERVICE_HOST`] signed by it.
pub fn certificate() -> (String, rustls::ServerConfig) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("key");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = Issuer::new(ca_params, &ca_key);
    let mut params = CertificateParams::new(vec![SERVICE_HOST.to_owned()]).expect("params");
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, &issuer).expect("signed");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .expect("config");
    (ca.pem(), config)
}

type Reviews = Arc<Mutex<Vec<(String, Value)>>>;

fn answer(path: &str, request: &Value) -> Value {
    let uid = request["uid"].clone();
    let mut response = json!({"uid": uid, "allowed": true});
    match path {
        "deny" => {
            response["allowed"] = json!(false);
            response["status"] = json!({"message": "this object is not welcome"});
        }
        "deny-422" => {
            response["allowed"] = json!(false);
            response["status"] = json!({"message": "invalid by policy", "code": 422});
        }
        "mutate" => {
            let has_labels = request["object"]["metadata"]["labels"].is_object();
            let patch = if has_labels {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            };
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        }
        "warn" => response["warnings"] = json!(["think \"twice\""]),
        _ => {}
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

async fn review(
    State(reviews): State<Reviews>,
    axum::extract::Path(path): axum::extract::Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let request = body["request"].clone();
    let reply = answer(&path, &request);
    reviews.lock().expect("lock").push((path, request));
    Json(reply)
}

impl TestWebhook {
    pub async fn start() -> TestWebhook {
        let (ca_pem, config) = certificate();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let reviews: Reviews = Arc::default();
        let app = axum::Router::new()
            .route("/{path}", post(review))
            .with_state(reviews.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let app = app.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                        .await;
                });
            }
        });
        TestWebhook {
            addr,
            ca_pem,
            reviews,
            task,
        }
    }

    /// `https://127.0.0.1:PORT/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}/{path}", self.addr)
    }

    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// The reviews received on `path`, oldest first.
    pub fn reviews(&self, path: &str) -> Vec<Value> {
        self.reviews
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, review)| review.clone())
            .collect()
    }
}
