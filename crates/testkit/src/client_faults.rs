//! Faults on the client's side of the emulator, for what the emulator cannot do from its end:
//! a request that panics in the task that sends it ([`PanicOnce`]), to show that a controller
//! confines a panic to the piece of work it happened in.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// Makes the first request with `method` on `path` panic when its sender awaits the answer (in
/// the sender's task, as a bug in the code that sent it would); every other request, and that
/// one again afterwards, goes to the API server.
#[derive(Debug, Clone)]
pub struct PanicOnce {
    method: String,
    path: String,
    armed: Arc<AtomicBool>,
}

impl PanicOnce {
    /// On `method` (`GET`, `PATCH`, …) requests of `path` (`/api/v1/namespaces/foo/configmaps/a`).
    pub fn new(method: &str, path: &str) -> Self {
        Self {
            method: method.to_owned(),
            path: path.to_owned(),
            armed: Arc::new(AtomicBool::new(true)),
        }
    }

    /// `client` with this fault in front of it (for [`arbor_runtime::Component::with_client_around`]).
    pub fn around(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        kube::Client::new(tower::Layer::layer(self, Through(client)), namespace)
    }

    /// Whether the panic happened.
    pub fn fired(&self) -> bool {
        !self.armed.load(Ordering::SeqCst)
    }

    fn fires_on<B>(&self, request: &http::Request<B>) -> bool {
        request.method().as_str() == self.method
            && request.uri().path() == self.path
            && self.armed.swap(false, Ordering::SeqCst)
    }
}

impl<S> tower::Layer<S> for PanicOnce {
    type Service = PanicOnceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PanicOnceService {
            inner,
            fault: self.clone(),
        }
    }
}

/// The client stack with a [`PanicOnce`] on top.
#[derive(Debug, Clone)]
pub struct PanicOnceService<S> {
    inner: S,
    fault: PanicOnce,
}

type Answer<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for PanicOnceService<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Answer<S::Response, S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let fire = self.fault.fires_on(&request);
        let target = format!("{} {}", request.method(), request.uri().path());
        // Called in any case, as the stack expects after `poll_ready`; never sent when firing.
        let answer = self.inner.call(request);
        Box::pin(async move {
            if fire {
                panic!("arbor-testkit: {target} panics, as asked (PanicOnce)");
            }
            answer.await
        })
    }
}

/// A built client as the service under a fault: each request is sent through it.
#[derive(Clone)]
struct Through(kube::Client);

impl tower::Service<http::Request<kube::client::Body>> for Through {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = Answer<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move { client.send(request).await })
    }
}
