//! watch: a stream of JSON lines `{"type": ..., "object": ...}` read from the store's history.
//!
//! A watch keeps a cursor (the last revision it has passed on) and, whenever the store commits,
//! reads the changes after it. An object entering or leaving the selector is reported as
//! ADDED / DELETED, as kube-apiserver's watch cache does. A cursor that has fallen out of the
//! history window ends the watch with an ERROR event carrying a 410 `Expired` Status, which is
//! what makes a kube-rs watcher (or a client-go reflector) relist. An injected CloseWatches fault
//! that matches the watch ends its stream, so the client re-watches.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::{Response, header};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::{Instant, Interval};

use super::presentation;
use super::read::Filter;
use crate::api::{RequestContext, Shared};
use crate::faults::{Fault, FaultTarget};
use crate::present::{self, Presentation};
use crate::registry::ResourceKind;
use crate::status::ApiError;
use crate::store::{Change, ChangeType, ObjectKey, TooOld};

/// kube-apiserver's `--min-request-timeout`: the default length of a watch.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

struct WatchStream {
    shared: Arc<Shared>,
    kind: Arc<ResourceKind>,
    version: String,
    presentation: Presentation,
    filter: Filter,
    cursor: u64,
    pending: VecDeque<Bytes>,
    revisions: tokio::sync::watch::Receiver<u64>,
    bookmarks: Option<Interval>,
    deadline: Instant,
    finished: bool,
    closer: tokio::sync::watch::Receiver<Option<Arc<Fault>>>,
    /// The watch's namespace ("" across namespaces) and user, for CloseWatches faults.
    namespace: String,
    identity: String,
}

enum Wake {
    Stop,
    Changed,
    Bookmark,
    CloseRequested,
}

fn line(event_type: &str, object: impl Serialize) -> Bytes {
    let mut bytes = serde_json::to_vec(&WatchEvent { event_type, object })
        .expect("JSON values always serialize");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn too_old(TooOld { requested, oldest }: TooOld) -> Bytes {
    let error = ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
    line("ERROR", error.to_status())
}

/// One line of a watch: `{"type": ..., "object": ...}`.
#[derive(Serialize)]
struct WatchEvent<'a, O: Serialize> {
    #[serde(rename = "type")]
    event_type: &'a str,
    object: O,
}

impl WatchStream {
    fn event(&self, event_type: &str, object: &Value) -> Bytes {
        line(
            event_type,
            present::object(&self.kind, &self.version, self.presentation, object),
        )
    }

    fn bookmark(&self, annotations: Option<Value>) -> Bytes {
        let mut metadata = json!({"resourceVersion": self.cursor.to_string()});
        if let Some(annotations) = annotations {
            metadata["annotations"] = annotations;
        }
        line(
            "BOOKMARK",
            json!({"kind": self.kind.kind, "apiVersion": self.kind.api_version(&self.version), "metadata": metadata}),
        )
    }

    /// The event a change means to this watch, if any.
    fn translate(&self, change: &Change) -> Option<Bytes> {
        if change.resource != *self.kind.storage_id() {
            return None;
        }
        let matches = |object: &Value| self.filter.matches(&ObjectKey::of(object), object);
        let now = matches(&change.object);
        let before = change.previous.as_deref().is_some_and(matches);
        let event_type = match (change.change_type, before, now) {
            (ChangeType::Added, _, true) => "ADDED",
            (ChangeType::Modified, true, true) => "MODIFIED",
            (ChangeType::Modified, false, true) => "ADDED",
            (ChangeType::Modified, true, false) => "DELETED",
            (ChangeType::Deleted, before, now) if before || now => "DELETED",
            _ => return None,
        };
        Some(self.event(event_type, &change.object))
    }

    /// Whether the latest CloseWatches fault names this watch.
    fn close_requested(&mut self) -> bool {
        let fault = self.closer.borrow_and_update().clone();
        fault.is_some_and(|fault| {
            fault.matches(&FaultTarget {
                verb: "watch",
                group: &self.kind.id.group,
                resource: &self.kind.id.plural,
                namespace: &self.namespace,
                identity: &self.identity,
                subresource: "",
            })
        })
    }

    /// Reads the changes committed since the cursor.
    fn catch_up(&mut self) {
        let state = self.shared.state();
        if state.registry.get(&self.kind.id).is_none() {
            // The CRD is gone: its watches end, as in kube-apiserver.
            self.finished = true;
            return;
        }
        match state.store.changes_after(self.cursor) {
            Ok(changes) => {
                drop(state);
                for change in changes {
                    self.cursor = change.revision;
                    if let Some(event) = self.translate(&change) {
                        self.pending.push_back(event);
                    }
                }
            }
            Err(too) => {
                self.pending.push_back(too_old(too));
                self.finished = true;
            }
        }
    }

    async fn wake(&mut self) -> Wake {
        let shutdown = self.shared.shutdown.clone();
        let bookmarks = &mut self.bookmarks;
        tokio::select! {
            _ = shutdown.cancelled() => Wake::Stop,
            _ = tokio::time::sleep_until(self.deadline) => Wake::Stop,
            changed = self.revisions.changed() => if changed.is_ok() { Wake::Changed } else { Wake::Stop },
            changed = self.closer.changed() => if changed.is_ok() { Wake::CloseRequested } else { Wake::Stop },
            _ = async {
                match bookmarks {
                    Some(interval) => { interval.tick().await; }
                    None => std::future::pending::<()>().await,
                }
            } => Wake::Bookmark,
        }
    }

    async fn next_chunk(mut self) -> Option<(Result<Bytes, Infallible>, WatchStream)> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some((Ok(chunk), self));
            }
            if self.finished {
                return None;
            }
            match self.wake().await {
                Wake::Stop => return None,
                Wake::Changed => self.catch_up(),
                Wake::CloseRequested if self.close_requested() => return None,
                Wake::CloseRequested => {}
                Wake::Bookmark => {
                    self.catch_up();
                    if !self.finished {
                        let bookmark = self.bookmark(None);
                        self.pending.push_back(bookmark);
                    }
                }
            }
        }
    }
}

pub fn watch(
    shared: &Arc<Shared>,
    context: &RequestContext,
    kind: &Arc<ResourceKind>,
) -> Result<Response<Body>, ApiError> {
    let filter = Filter::from_request(context, kind)?;
    let timeout =
        match context.query.get("timeoutSeconds") {
            Some(seconds) => Duration::from_secs(seconds.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid timeoutSeconds: {seconds:?}"))
            })?),
            None => DEFAULT_WATCH_TIMEOUT,
        };
    let requested = context.query.get("resourceVersion").filter(|rv| *rv != "0");
    let send_initial = context.query.flag("sendInitialEvents");
    let allow_bookmarks = context.query.flag("allowWatchBookmarks");
    let bookmarks = allow_bookmarks.then(|| {
        let interval = shared.config.bookmark_interval;
        tokio::time::interval_at(Instant::now() + interval, interval)
    });
    let state = shared.state();
    let mut stream = WatchStream {
        shared: shared.clone(),
        kind: kind.clone(),
        version: context.target.version.clone(),
        presentation: presentation(context),
        filter,
        cursor: state.store.revision(),
        pending: VecDeque::new(),
        revisions: state.store.subscribe(),
        bookmarks,
        deadline: Instant::now() + timeout,
        finished: false,
        closer: shared.faults.watch_closer(),
        namespace: context.target.namespace.clone().unwrap_or_default(),
        identity: context.identity.username.clone(),
    };
    match requested {
        Some(revision) if !send_initial => {
            stream.cursor = revision.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {revision:?}"))
            })?;
            drop(state);
            stream.catch_up();
        }
        _ => {
            // No revision (or "0"): the current state as ADDED events, then the changes.
            let initial: Vec<Arc<Value>> = state
                .store
                .list(&kind.id, stream.filter.namespace.as_deref())
                .filter(|(key, object)| stream.filter.matches(key, object))
                .map(|(_, object)| object.clone())
                .collect();
            drop(state);
            for object in initial {
                let event = stream.event("ADDED", &object);
                stream.pending.push_back(event);
            }
            if send_initial && allow_bookmarks {
                let end = stream.bookmark(Some(json!({"k8s.io/initial-events-end": "true"})));
                stream.pending.push_back(end);
            }
        }
    }
    let body = Body::from_stream(futures::stream::unfold(stream, WatchStream::next_chunk));
    Ok(Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("static response parts are valid"))
}
