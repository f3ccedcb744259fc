//! The observer's errors. Each names the Application or object it is about.

use arbor_policy::observe::ResourceId;

/// Why one step of the controller, an observer or the drift reporter failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot resolve {api_version} {kind}: {source}")]
    Discovery {
        api_version: String,
        kind: String,
        #[source]
        source: Box<arbor_runtime::discovery::DiscoveryError>,
    },
    #[error("cannot apply {object}: {source}")]
    Apply {
        object: ResourceId,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cannot delete {object}: {source}")]
    Delete {
        object: ResourceId,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cannot read {object}: {source}")]
    Read {
        object: ResourceId,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cannot write the status of Application {application}: {source}")]
    Status {
        application: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cannot read Application {application}: {source}")]
    Application {
        application: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("a manifest object lacks {field}")]
    IncompleteObject { field: &'static str },
    #[error("Application {application} has no namespace")]
    NotNamespaced { application: String },
    #[error("finalizer of Application {application}: {source}")]
    Finalizer {
        application: String,
        #[source]
        source: Box<kube::runtime::finalizer::Error<Error>>,
    },
    #[error("cannot encode {what}: {source}")]
    Encode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// The Application's shard is no longer worked on here (this replica stops, or gave the
    /// shard up): the reconcile sends no further write, and the shard's next holder goes on.
    #[error(
        "stopped before the next write: this replica no longer works on the Application's shard (it is stopping or gave the shard up)"
    )]
    ShardLeft,
    #[error(transparent)]
    Start(#[from] arbor_runtime::component::StartError),
    #[error(transparent)]
    Grpc(#[from] arbor_runtime::grpc::GrpcError),
    #[error(transparent)]
    LostLease(#[from] arbor_runtime::LostLease),
    #[error("the gRPC server stopped: {0}")]
    Serve(#[source] tonic::transport::Error),
}

impl Error {
    /// Whether a reconcile ended because this replica no longer works on the Application's
    /// shard ([`Error::ShardLeft`]), also when kube's finalizer helper carries it: a graceful
    /// end, not a failure.
    pub fn is_shard_left(&self) -> bool {
        use kube::runtime::finalizer::Error as Finalizer;
        match self {
            Self::ShardLeft => true,
            Self::Finalizer { source, .. } => matches!(
                source.as_ref(),
                Finalizer::ApplyFailed(Self::ShardLeft) | Finalizer::CleanupFailed(Self::ShardLeft)
            ),
            _ => false,
        }
    }
}
