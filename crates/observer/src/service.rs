//! `arbor.v1.ObserverService`: the Applications, their observations and live drift.

use std::pin::Pin;

use arbor_api::Application;
use arbor_policy::observe::{Difference, ObserverSchema, ResourceDelta, with_namespace};
use arbor_proto::from_kube;
use arbor_proto::v1::observer_service_server::ObserverService;
use arbor_proto::v1::{
    ApplicationSummary, DriftEvent, FieldDifference, GetObservationRequest, GetObservationResponse,
    ListApplicationsRequest, ListApplicationsResponse, WatchDriftRequest,
};
use arbor_runtime::compact_object::CompactObject;
use arbor_runtime::decode::decode_compact;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::convert::{self, resource_ref};
use crate::registry::{AppKey, ObserverRegistry};

/// The service, reading the controller's cache of Applications and its observers.
#[derive(Debug, Clone)]
pub struct ObserverGrpc {
    applications: Store<CompactObject>,
    registry: ObserverRegistry,
    drift: broadcast::Sender<DriftEvent>,
    /// Ends WatchDrift streams, so that they do not hold up the server's shutdown.
    shutdown: CancellationToken,
}

impl ObserverGrpc {
    /// `applications` is the controller's cache, of compact objects: one that does not decode
    /// is left out of the answers (the controller reports it).
    pub fn new(
        applications: Store<CompactObject>,
        registry: ObserverRegistry,
        drift: broadcast::Sender<DriftEvent>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            applications,
            registry,
            drift,
            shutdown,
        }
    }

    /// The cached Applications in `namespace` (every namespace when empty) that decode, each
    /// decoded only once it is chosen by its metadata and dropped before the next is decoded.
    fn summaries(&self, namespace: &str) -> Vec<ApplicationSummary> {
        self.applications
            .state()
            .iter()
            .filter(|object| {
                namespace.is_empty() || object.metadata.namespace.as_deref() == Some(namespace)
            })
            .filter_map(|object| decode_compact::<Application>(object).ok())
            .map(|application| self.summary(&application))
            .collect()
    }

    /// The cached Application `namespace/name`, if it is cached and decodes.
    fn application(&self, namespace: &str, name: &str) -> Option<Application> {
        self.applications
            .state()
            .iter()
            .find(|object| {
                object.metadata.namespace.as_deref() == Some(namespace)
                    && object.metadata.name.as_deref() == Some(name)
            })
            .and_then(|object| decode_compact::<Application>(object).ok())
    }

    fn summary(&self, application: &Application) -> ApplicationSummary {
        let key = AppKey::new(
            application.namespace().unwrap_or_default(),
            application.name_any(),
        );
        let stats = self.registry.stats(&key);
        let status = application.status.clone().unwrap_or_default();
        ApplicationSummary {
            namespace: key.namespace,
            name: key.name,
            state: format!("{:?}", status.state),
            observer_running: stats.running,
            last_observed_time: stats.last_observed.map(from_kube::timestamp),
            objects: u32::try_from(application.spec.manifest.len()).unwrap_or(u32::MAX),
            drift_count: stats.drift_count,
            conditions: status.conditions.iter().map(from_kube::condition).collect(),
        }
    }
}

type DriftStream = Pin<Box<dyn Stream<Item = Result<DriftEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ObserverService for ObserverGrpc {
    async fn list_applications(
        &self,
        request: Request<ListApplicationsRequest>,
    ) -> Result<Response<ListApplicationsResponse>, Status> {
        let namespace = request.into_inner().namespace;
        let mut applications = self.summaries(&namespace);
        applications.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(Response::new(ListApplicationsResponse { applications }))
    }

    async fn get_observation(
        &self,
        request: Request<GetObservationRequest>,
    ) -> Result<Response<GetObservationResponse>, Status> {
        let request = request.into_inner();
        let application = self
            .application(&request.namespace, &request.name)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "no Application {}/{}",
                    request.namespace, request.name
                ))
            })?;
        let status = application.status.clone().unwrap_or_default();
        let manifest: Vec<Value> = application
            .spec
            .manifest
            .iter()
            .map(|object| with_namespace(object, &request.namespace))
            .collect();
        // A refused schema has no observation to show; the conditions say why.
        let schema = ObserverSchema::for_application(&manifest, &application.spec.observer_schema)
            .unwrap_or_default();
        let delta = ResourceDelta::between(
            &schema,
            &status.last_applied_manifest,
            &status.last_observed_manifest,
        );
        let json = |value: &[Value]| Value::Array(value.to_vec()).to_string();
        Ok(Response::new(GetObservationResponse {
            application: Some(self.summary(&application)),
            last_applied_manifest_json: json(&status.last_applied_manifest),
            last_observed_manifest_json: json(&status.last_observed_manifest),
            observer_schema_json: json(&schema.to_value()),
            differences: differences(&delta),
        }))
    }

    type WatchDriftStream = DriftStream;

    async fn watch_drift(
        &self,
        request: Request<WatchDriftRequest>,
    ) -> Result<Response<Self::WatchDriftStream>, Status> {
        let filter = request.into_inner();
        let stream = BroadcastStream::new(self.drift.subscribe()).filter_map(move |event| {
            let wanted = match event {
                Ok(event) => wanted(&filter, &event).then_some(Ok(event)),
                Err(lagged) => {
                    tracing::warn!(%lagged, "a WatchDrift client fell behind; events were skipped");
                    None
                }
            };
            std::future::ready(wanted)
        });
        let stream = stream.take_until(self.shutdown.clone().cancelled_owned());
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Whether a WatchDrift client asked for `event`.
fn wanted(filter: &WatchDriftRequest, event: &DriftEvent) -> bool {
    match &event.application {
        Some(application) => {
            (filter.namespace.is_empty() || filter.namespace == application.namespace)
                && (filter.application.is_empty() || filter.application == application.name)
        }
        None => {
            filter.include_managed
                && filter.application.is_empty()
                && (filter.namespace.is_empty()
                    || event
                        .object
                        .as_ref()
                        .is_some_and(|object| object.namespace == filter.namespace))
        }
    }
}

fn differences(delta: &ResourceDelta) -> Vec<FieldDifference> {
    let mut differences = Vec::new();
    for modified in &delta.modified {
        for difference in &modified.differences {
            let (applied, observed) = match &difference.difference {
                Difference::ValueChanged { applied, observed } => {
                    (applied.to_string(), observed.to_string())
                }
                Difference::MissingInObserved => ("(set)".to_owned(), String::new()),
                Difference::MissingInApplied => (String::new(), "(set)".to_owned()),
                Difference::ListOutsideBounds { length, bounds } => (
                    bounds.control_entry().to_string(),
                    serde_json::json!({ "length": length }).to_string(),
                ),
            };
            differences.push(FieldDifference {
                object: Some(resource_ref(&modified.id)),
                path: convert::field_name(&difference.path),
                applied_json: applied,
                observed_json: observed,
            });
        }
    }
    differences
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{application_ref, drift_event, object_ref};
    use arbor_proto::v1::DriftKind;

    fn managed(namespace: &str) -> DriftEvent {
        drift_event(
            object_ref("v1", "ConfigMap", Some(namespace), "c"),
            DriftKind::Modified,
            vec![],
            String::new(),
        )
    }

    #[test]
    fn managed_drift_is_streamed_only_on_request() {
        let all = WatchDriftRequest::default();
        assert!(!wanted(&all, &managed("a")));
        let with_managed = WatchDriftRequest {
            include_managed: true,
            ..Default::default()
        };
        assert!(wanted(&with_managed, &managed("a")));
        let other_namespace = WatchDriftRequest {
            namespace: "b".into(),
            ..with_managed
        };
        assert!(!wanted(&other_namespace, &managed("a")));
    }

    #[test]
    fn application_drift_is_filtered_by_application() {
        let mut event = managed("a");
        event.application = Some(application_ref(&AppKey::new("a", "web")));
        assert!(wanted(&WatchDriftRequest::default(), &event));
        let other = WatchDriftRequest {
            application: "db".into(),
            ..Default::default()
        };
        assert!(!wanted(&other, &event));
    }
}
