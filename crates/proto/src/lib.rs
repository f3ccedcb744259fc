//! # arbor-proto
//!
//! The gRPC contracts of Arbor's controllers, generated at build time from
//! `proto/arbor/v1/*.proto` (package `arbor.v1`) with tonic and prost:
//!
//! | service | served by | methods |
//! |---|---|---|
//! | `SyncService` | arbor-gitsync | GetStatus, ListManaged, Explain, TriggerSync, ReportDrift, GetDeclared, Preview |
//! | `HierarchyService` | arbor-hierarchy | GetTree, GetNamespace, ExplainPropagation |
//! | `ObserverService` | arbor-observer | ListApplications, GetObservation, WatchDrift (server stream) |
//! | `PolicyService` | arbor-webhook | CheckOwnership, Review |
//!
//! Messages, clients (`v1::sync_service_client::SyncServiceClient`, ...) and server traits
//! (`v1::sync_service_server::SyncService`, ...) live in [`v1`]. Decisions carry a stable
//! `rule` id (like `seeds/000 row 2`) so tools can tell which seed row decided.
//! [`FILE_DESCRIPTOR_SET`] is the encoded descriptor set of all files, for gRPC reflection.

/// Package `arbor.v1`.
pub mod v1 {
    // Generated code: its doc comments are the proto comments, its shape is prost's.
    #![allow(missing_debug_implementations, clippy::all, clippy::pedantic)]
    tonic::include_proto!("arbor.v1");
}

/// The messages' times and conditions, from the Kubernetes and system types the controllers hold.
/// Every service converts through here, so a time before the epoch reads the same from each
/// (prost's normalised form: whole seconds down, nanoseconds in `0..1e9`).
pub mod from_kube {
    use std::time::SystemTime;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    pub fn timestamp(time: SystemTime) -> prost_types::Timestamp {
        prost_types::Timestamp::from(time)
    }

    pub fn time(time: &Time) -> prost_types::Timestamp {
        // jiff counts a time before the epoch with negative nanoseconds; prost's form does not.
        let mut stamp = prost_types::Timestamp {
            seconds: time.0.as_second(),
            nanos: time.0.subsec_nanosecond(),
        };
        stamp.normalize();
        stamp
    }

    pub fn condition(condition: &Condition) -> crate::v1::Condition {
        crate::v1::Condition {
            r#type: condition.type_.clone(),
            status: condition.status.clone(),
            reason: condition.reason.clone(),
            message: condition.message.clone(),
            last_transition_time: Some(time(&condition.last_transition_time)),
            observed_generation: condition.observed_generation.unwrap_or_default(),
        }
    }
}

/// The bounds of a `PreviewFiles` request, which the client checks before sending and the
/// server enforces.
pub mod preview {
    /// The most files a preview request may carry.
    pub const MAX_FILES: usize = 5_000;
    /// The most bytes of file content a preview request may carry (below gRPC's 4 MiB message
    /// limit, with room for paths and framing).
    pub const MAX_BYTES: usize = 3 * 1024 * 1024;
}

/// The encoded `google.protobuf.FileDescriptorSet` of every `arbor.v1` file and its imports.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("arbor_v1_descriptor");

/// The fully qualified names of the services, as gRPC reflection and health checks name them.
pub mod service_names {
    pub use crate::v1::hierarchy_service_server::SERVICE_NAME as HIERARCHY;
    pub use crate::v1::observer_service_server::SERVICE_NAME as OBSERVER;
    pub use crate::v1::policy_service_server::SERVICE_NAME as POLICY;
    pub use crate::v1::sync_service_server::SERVICE_NAME as SYNC;
}
