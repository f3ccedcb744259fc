//! Retrying requests the API server throttled or could not serve, in every client Arbor makes.
//!
//! kube-apiserver answers 429 (API Priority and Fairness, max-in-flight) and 503 (unavailable)
//! without doing anything, and says when to come back in `Retry-After`. kube-rs hands both to
//! the caller as errors, so without this a controller fails the object and waits for its next
//! round: under heavy throttling a sync crawls. [`RetryThrottledLayer`] retries such a request
//! where it failed: after `Retry-After` when the server sent one, else after an exponential
//! backoff, each with jitter so that throttled clients do not come back in step; at most
//! `attempts` times, then the last answer goes to the caller. Only requests whose body can be
//! replayed (all of kube-rs's, which are buffered) are retried.
//!
//! A component's client stops resending once the component begins to stop or loses its Lease
//! ([`RetryThrottledLayer::stop`]): the last answer goes to the caller at once. A refused
//! request was not carried out, so each resend is a new write; one made after the replica's
//! step-down could land after its successor's, which the renew deadline's margin (a third of
//! the lease duration) does not cover when the resends go on for up to ten times ten seconds.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{Request, Response, StatusCode, header};
use kube::client::Body;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service, ServiceExt};

/// How throttled requests are retried.
#[derive(Debug, Clone)]
pub struct RetryThrottledLayer {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The first backoff when the server gave no `Retry-After`; doubled on each attempt.
    pub base: Duration,
    /// The longest wait, `Retry-After` included.
    pub max: Duration,
    /// Once cancelled, nothing is resent (see the module docs); `None` resends regardless.
    pub stop: Option<CancellationToken>,
}

impl Default for RetryThrottledLayer {
    fn default() -> Self {
        Self {
            attempts: 10,
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
            stop: None,
        }
    }
}

impl<S> Layer<S> for RetryThrottledLayer {
    type Service = RetryThrottled<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryThrottled {
            inner: Arc::new(Mutex::new(inner)),
            policy: self.clone(),
        }
    }
}

/// The service [`RetryThrottledLayer`] makes.
///
/// The inner service (kube-rs's stack, not `Clone`) is shared behind a lock held only while a
/// request is handed to it, not while its answer is awaited.
#[derive(Debug)]
pub struct RetryThrottled<S> {
    inner: Arc<Mutex<S>>,
    policy: RetryThrottledLayer,
}

impl<S> Clone for RetryThrottled<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            policy: self.policy.clone(),
        }
    }
}

/// Hands `request` to the shared service once it is ready; the answer is awaited unlocked.
async fn send<S, B>(inner: &Mutex<S>, request: Request<Body>) -> Result<Response<B>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
{
    let answer = {
        let mut service = inner.lock().await;
        service.ready().await?.call(request)
    };
    answer.await
}

impl RetryThrottledLayer {
    /// The wait before attempt `attempt + 1`, given the server's `Retry-After` in seconds.
    pub fn delay(&self, attempt: u32, retry_after: Option<u64>) -> Duration {
        let wait = match retry_after {
            Some(seconds) => Duration::from_secs(seconds),
            None => self.base.saturating_mul(1 << attempt.min(16)),
        };
        // Up to a quarter more, so throttled clients spread out.
        let spread = wait / 4 + Duration::from_millis(20);
        (wait + jitter(spread)).min(self.max)
    }
}

fn jitter(up_to: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    // A cheap mix of the clock: uniform enough for spreading retries, no shared state.
    let mixed = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    let span = u64::try_from(up_to.as_micros()).unwrap_or(u64::MAX).max(1);
    Duration::from_micros(mixed % span)
}

fn retry_after<B>(response: &Response<B>) -> Option<u64> {
    response
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl<S, B> Service<Request<Body>> for RetryThrottled<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, S::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the shared service is awaited in `send`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let policy = self.policy.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let Some(template) = body.try_clone() else {
                return send(&inner, Request::from_parts(parts, body)).await;
            };
            let mut response = send(&inner, Request::from_parts(parts.clone(), body)).await?;
            for attempt in 1..policy.attempts {
                let status = response.status();
                if status != StatusCode::TOO_MANY_REQUESTS
                    && status != StatusCode::SERVICE_UNAVAILABLE
                {
                    break;
                }
                let Some(body) = template.try_clone() else {
                    break;
                };
                let delay = policy.delay(attempt - 1, retry_after(&response));
                tracing::debug!(
                    method = %parts.method,
                    uri = %parts.uri,
                    status = status.as_u16(),
                    attempt,
                    ?delay,
                    "the API server throttled the request; retrying"
                );
                let stop = policy.stop.clone().unwrap_or_default();
                if stop.is_cancelled() {
                    break;
                }
                // Waiting out the backoff ends early, with the last answer, once stopping.
                if stop
                    .run_until_cancelled(tokio::time::sleep(delay))
                    .await
                    .is_none()
                {
                    tracing::debug!(method = %parts.method, uri = %parts.uri, "stopping: a throttled request is not sent again");
                    break;
                }
                drop(response);
                response = send(&inner, Request::from_parts(parts.clone(), body)).await?;
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_honoured_with_a_little_jitter_and_backoff_doubles_without_it() {
        let policy = RetryThrottledLayer::default();
        let honoured = policy.delay(0, Some(2));
        assert!(honoured >= Duration::from_secs(2), "{honoured:?}");
        assert!(honoured <= Duration::from_millis(2520), "{honoured:?}");
        let first = policy.delay(0, None);
        let third = policy.delay(2, None);
        assert!(first >= Duration::from_millis(100) && first < Duration::from_millis(400));
        assert!(third >= Duration::from_millis(400), "{third:?}");
        assert_eq!(policy.delay(30, Some(600)), policy.max);
    }
}
