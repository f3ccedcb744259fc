//! Application: a set of Kubernetes objects applied and watched over by an observer (seeds/004).
//!
//! The controller applies `spec.manifest` and records it as `status.lastAppliedManifest`; the
//! observer projects what the cluster holds through the observer schema into
//! `status.lastObservedManifest`. When the two differ the controller re-applies: the
//! self-healing loop of Krake, with Kubernetes objects as the status store.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{Errors, FieldError, parse_positive_duration};

/// How often the observer checks when `observePeriod` is not set. Watches see drift sooner; the
/// period is the floor that catches a missed event.
pub const DEFAULT_OBSERVE_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

arbor_kind! {
    /// The desired objects and what of them to observe.
    #[derive(Default)]
    #[serde(rename_all = "camelCase")]
    pub struct ApplicationSpec for "Application" {
        scope: namespaced,
        status: "ApplicationStatus",
        shortname: "arbapp",
        doc: "Kubernetes objects that Arbor applies and keeps as declared, observing their drift.",
        columns: [
            (name = "State", type_ = "string", json_path = ".status.state"),
            (name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
            (name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
        ],
    }
    {
        /// The objects to apply, each complete with apiVersion, kind and metadata.name.
        #[serde(default)]
        #[schemars(schema_with = "crate::schema::list_of_any_objects")]
        pub manifest: Vec<serde_json::Value>,
        /// Per object, the fields to observe; every field of the manifest when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schemars(schema_with = "crate::schema::list_of_any_objects")]
        pub observer_schema: Vec<serde_json::Value>,
        /// Period of the observer's full check, as a duration like `30s`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub observe_period: Option<String>,
    }
}

/// The last applied and last observed state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub state: ApplicationState,
    /// The objects as last applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::list_of_any_objects")]
    pub last_applied_manifest: Vec<serde_json::Value>,
    /// The observed fields of the objects as last seen on the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::list_of_any_objects")]
    pub last_observed_manifest: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Where an Application is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ApplicationState {
    /// Accepted, not yet applied.
    #[default]
    Pending,
    /// First apply under way.
    Creating,
    /// Applied and observed as declared.
    Running,
    /// Drift seen or spec changed; re-applying.
    Reconciling,
    /// Applied, but some objects could not be brought to the declared state.
    Degraded,
    /// Deletion under way.
    Deleting,
    /// Cannot be applied without a change to the spec.
    Failed,
}

impl ApplicationSpec {
    /// Checks the manifest objects and the period; errors name `spec.manifest[i]...`.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Errors::default();
        let mut seen = std::collections::BTreeSet::new();
        for (index, object) in self.manifest.iter().enumerate() {
            let path = format!("spec.manifest[{index}]");
            let text = |pointer: &str| object.pointer(pointer).and_then(|v| v.as_str());
            let required = [
                ("/apiVersion", "apiVersion"),
                ("/kind", "kind"),
                ("/metadata/name", "metadata.name"),
            ];
            let mut complete = true;
            for (pointer, field) in required {
                if text(pointer).is_none_or(str::is_empty) {
                    complete = false;
                    errors.push(FieldError::required(
                        format!("{path}.{field}"),
                        "every manifest object needs apiVersion, kind and metadata.name",
                    ));
                }
            }
            let identity = (
                text("/apiVersion"),
                text("/kind"),
                text("/metadata/namespace"),
                text("/metadata/name"),
            );
            if complete && !seen.insert(identity) {
                errors.push(FieldError::invalid(
                    path,
                    "the same object is listed twice in the manifest",
                ));
            }
        }
        if let Some(period) = &self.observe_period {
            errors.check(parse_positive_duration("spec.observePeriod", period).map(drop));
        }
        errors.finish()
    }

    /// The observe period, or the default when unset.
    pub fn observe_period(&self) -> Result<std::time::Duration, FieldError> {
        self.observe_period
            .as_deref()
            .map_or(Ok(DEFAULT_OBSERVE_PERIOD), |value| {
                parse_positive_duration("spec.observePeriod", value)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::refused_fields;
    use serde_json::json;

    fn deployment(name: &str) -> serde_json::Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}})
    }

    #[test]
    fn complete_manifest_is_valid() {
        let spec = ApplicationSpec {
            manifest: vec![deployment("web"), deployment("worker")],
            observe_period: Some("10s".into()),
            ..ApplicationSpec::default()
        };
        assert_eq!(spec.validate(), Ok(()));
        assert_eq!(
            spec.observe_period().unwrap(),
            std::time::Duration::from_secs(10)
        );
    }

    #[test]
    fn incomplete_and_duplicate_objects_are_named_by_index() {
        let spec = ApplicationSpec {
            manifest: vec![
                deployment("web"),
                json!({"kind": "Service"}),
                deployment("web"),
            ],
            observe_period: Some("0s".into()),
            ..ApplicationSpec::default()
        };
        let fields = refused_fields(spec.validate());
        assert_eq!(
            fields,
            [
                "spec.manifest[1].apiVersion",
                "spec.manifest[1].metadata.name",
                "spec.manifest[2]",
                "spec.observePeriod",
            ]
        );
    }

    #[test]
    fn state_defaults_to_pending() {
        let status: ApplicationStatus = serde_json::from_value(json!({})).unwrap();
        assert_eq!(status.state, ApplicationState::Pending);
        assert_eq!(DEFAULT_OBSERVE_PERIOD, spec_default_period());
    }

    fn spec_default_period() -> std::time::Duration {
        ApplicationSpec::default().observe_period().unwrap()
    }
}
