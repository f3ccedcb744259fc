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
