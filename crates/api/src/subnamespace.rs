//! SubNamespace: a request, made inside a root or sub namespace, for a child namespace
//! (seeds/001, seeds/003).
//!
//! The child is named like the SubNamespace and gets the parent label; the labels and
//! annotations listed here are set on it (subject to the configured subNamespace key lists).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

arbor_kind! {
    /// Labels and annotations for the sub-namespace.
    #[derive(Default)]
    pub struct SubNamespaceSpec for "SubNamespace" {
        scope: namespaced,
        status: "SubNamespaceStatus",
        shortname: "subns",
        doc: "A child namespace of this namespace, created and kept by Arbor's hierarchy controller.",
        columns: [
            (name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
            (name = "Conflict", type_ = "string", json_path = ".status.conditions[?(@.type==\"Conflict\")].status"),
            (name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
        ],
    }
    {
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub labels: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub annotations: BTreeMap<String, String>,
    }
}

/// Whether the sub-namespace exists as requested.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubNamespaceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Stalled`, and `Conflict` when the namespace belongs to someone else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
