//! Fake Arbor controllers for arborctl's tests: one gRPC server on a free loopback port that
//! serves SyncService, HierarchyService and ObserverService with canned answers, and a helper
//! that runs the real `arborctl` binary against it.
//!
//! The fakes check what they are asked (the source of a TriggerSync, the origin namespace of a
//! propagated copy) so that a client sending the wrong request gets an error, not the canned
//! answer.

#![allow(dead_code)] // Each test binary uses a different part of the fakes.

use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Output;
use std::time::Duration;

use arbor_proto::v1::hierarchy_service_server::{HierarchyService, HierarchyServiceServer};
use arbor_proto::v1::observer_service_server::{ObserverService, ObserverServiceServer};
use arbor_proto::v1::sync_service_server::{SyncService, SyncServiceServer};
use arbor_proto::v1::*;
use arbor_runtime::grpc::{self, TlsMaterial};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

/// A generous bound on one arborctl run; none of them should come close.
const RUN_LIMIT: Duration = Duration::from_secs(60);

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
pub const OBSERVED_AT: i64 = 1_700_000_000;

/// The fake controllers, listening on one loopback port.
pub struct FakeServer {
    pub addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Serve with this TLS material (mutual TLS when it has a CA).
    pub tls: Option<TlsMaterial>,
    /// Keep WatchDrift open after the canned events instead of ending the stream.
    pub keep_drift_open: bool,
}

impl FakeServer {
    pub async fn start(options: Options) -> Self {
        let (incoming, addr) = grpc::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let mut server = grpc::server(addr, options.tls.as_ref()).unwrap();
        let router = server
            .add_service(SyncServiceServer::new(FakeSync))
            .add_service(HierarchyServiceServer::new(FakeHierarchy))
            .add_service(ObserverServiceServer::new(FakeObserver {
                keep_open: options.keep_drift_open,
            }));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            shutdown,
            task,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn plain_address(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn tls_address(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        tokio::time::timeout(RUN_LIMIT, self.task)
            .await
            .expect("fake server stops")
            .expect("fake server task")
            .expect("fake server serves");
    }
}

/// Connection flags pointing every service at `address`.
pub fn all_services_at(address: &str) -> Vec<String> {
    [
        "--gitsync-addr",
        "--hierarchy-addr",
        "--observer-addr",
        "--policy-addr",
    ]
    .into_iter()
    .flat_map(|flag| [flag.to_owned(), address.to_owned()])
    .collect()
}

/// Runs the arborctl binary with `args`, ignoring any ARBOR_* settings of the environment.
pub async fn arborctl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_arborctl"));
    command.args(args).kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ARBOR_") {
            command.env_remove(key);
        }
    }
    // Whatever contexts this machine's user has (the demo writes one) stay out of the tests.
    command.env("ARBORCONFIG", "/dev/null");
    tokio::time::timeout(RUN_LIMIT, command.output())
        .await
        .expect("arborctl finishes")
        .expect("arborctl runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

pub fn team_a_apps() -> SourceRef {
    SourceRef {
        kind: SourceKind::GitTrack.into(),
        namespace: "team-a".into(),
        name: "apps".into(),
    }
}

fn platform() -> SourceRef {
    SourceRef {
        kind: SourceKind::ClusterGitTrack.into(),
        namespace: String::new(),
        name: "platform".into(),
    }
}

fn time() -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: OBSERVED_AT,
        nanos: 0,
    }
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        r#type: kind.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Some(time()),
        observed_generation: 3,
    }
}

/// The canned status of a source: team-a/apps is healthy, platform has an error.
pub fn source_status(source: &SourceRef) -> Option<SourceStatus> {
    if *source == team_a_apps() {
        return Some(SourceStatus {
            source: Some(source.clone()),
            repository: "https://git.example/team-a.git".into(),
            reference: "branch:main".into(),
            observed_commit: COMMIT.into(),
            last_sync_time: Some(time()),
            counters: Some(ObjectCounters {
                discovered: 12,
                applied: 10,
                ignored: 2,
                in_sync: 9,
            }),
            ignored_files: [(
                "legacy/job.yaml".to_owned(),
                "kind Job is not synced".to_owned(),
            )]
            .into(),
            errors: vec![],
            conditions: vec![condition("Ready", "True", "Synced", "applied 10 objects")],
            suspended: false,
            shard: None,
            handled_by: String::new(),
        });
    }
    if *source == platform() {
        return Some(SourceStatus {
            source: Some(source.clone()),
            repository: "https://git.example/platform.git".into(),
            reference: "tag:v1".into(),
            observed_commit: "fedcba9876543210".into(),
            last_sync_time: Some(time()),
            counters: Some(ObjectCounters {
                discovered: 3,
                applied: 2,
                ignored: 0,
                in_sync: 2,
            }),
            ignored_files: Default::default(),
            errors: vec![SourceError {
                code: "ARB1001".into(),
                file: "cluster/role.yaml".into(),
                object: "ClusterRole/admin".into(),
                message: "declared twice".into(),
            }],
            conditions: vec![condition("Stalled", "True", "SourceErrors", "1 error")],
            suspended: false,
            shard: None,
            handled_by: String::new(),
        });
    }
    None
}

struct FakeSync;

#[tonic::async_trait]
impl SyncService for FakeSync {
    async fn get_status(
        &self,
        request: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        let sources = match request.into_inner().source {
            Some(source) => {
                vec![source_status(&source).ok_or_else(|| Status::not_found("no such source"))?]
            }
            None => [team_a_apps(), platform()]
                .iter()
                .filter_map(source_status)
                .collect(),
        };
        Ok(Response::new(GetStatusResponse { sources }))
    }

    async fn list_managed(
        &self,
        _: Request<ListManagedRequest>,
    ) -> Result<Response<ListManagedResponse>, Status> {
        Err(Status::unimplemented("not used by arborctl"))
    }

    async fn explain(
        &self,
        request: Request<ExplainRequest>,
    ) -> Result<Response<ExplainResponse>, Status> {
        let object = request
            .into_inner()
            .object
            .ok_or_else(|| Status::invalid_argument("object is required"))?;
        if object.kind != "ConfigMap" || object.name != "settings" {
            return Err(Status::not_found("no such object"));
        }
        Ok(Response::new(ExplainResponse {
            object: Some(object),
            declarations: vec![Declaration {
                source: Some(team_a_apps()),
                file: "config/settings.yaml".into(),
                commit: COMMIT.into(),
                inherited_from: String::new(),
            }],
            inputs: Some(ActionInputs {
                sync_declared: true,
                resource_declared: true,
                on_cluster: true,
                has_label: Some(true),
                matches: Some(false),
            }),
            decision: Some(Decision {
                allowed: true,
                action: Action::Update.into(),
                rule: "seeds/000 row 2".into(),
                reason: "labelled and differs from the declaration".into(),
            }),
            state: ManagedState::Drifted.into(),
        }))
    }

    async fn trigger_sync(
        &self,
        request: Request<TriggerSyncRequest>,
    ) -> Result<Response<TriggerSyncResponse>, Status> {
        let request = request.into_inner();
        let source = request
            .source
            .ok_or_else(|| Status::invalid_argument("source is required"))?;
        let status = source_status(&source).ok_or_else(|| Status::not_found("no such source"))?;
        Ok(Response::new(TriggerSyncResponse {
            completed: request.wait,
            status: Some(status),
        }))
    }

    async fn report_drift(
        &self,
        _: Request<ReportDriftRequest>,
    ) -> Result<Response<ReportDriftResponse>, Status> {
        Err(Status::unimplemented("not used by arborctl"))
    }

    async fn preview(
        &self,
        _: Request<arbor_proto::v1::PreviewRequest>,
    ) -> Result<Response<arbor_proto::v1::PreviewResponse>, Status> {
        Err(Status::unimplemented(
            "answered by a running gitsync in the e2e tests",
        ))
    }

    async fn get_declared(
        &self,
        _: Request<GetDeclaredRequest>,
    ) -> Result<Response<GetDeclaredResponse>, Status> {
        Err(Status::unimplemented("not used by arborctl"))
    }
}

fn node(name: &str, role: NamespaceRole, parent: &str) -> TreeNode {
    TreeNode {
        name: name.into(),
        role: role.into(),
        parent: parent.into(),
        from_subnamespace: false,
        template: String::new(),
        conditions: vec![],
    }
}

/// root-a > team-a > {team-a-dev (SubNamespace), team-a-prod}, root-a > team-b (in a cycle);
/// template web > instance shop. Flat, as arbor-hierarchy sends it.
pub fn canned_tree() -> GetTreeResponse {
    let dev = TreeNode {
        from_subnamespace: true,
        ..node("team-a-dev", NamespaceRole::Sub, "team-a")
    };
    let prod = node("team-a-prod", NamespaceRole::Sub, "team-a");
    let team_a = node("team-a", NamespaceRole::Sub, "root-a");
    let team_b = TreeNode {
        from_subnamespace: true,
        conditions: vec![condition(
            "Stalled",
            "True",
            "CycleDetected",
            "team-b -> team-c -> team-b",
        )],
        ..node("team-b", NamespaceRole::Sub, "root-a")
    };
    let shop = TreeNode {
        template: "web".into(),
        ..node("shop", NamespaceRole::Instance, "web")
    };
    GetTreeResponse {
        nodes: vec![
            node("root-a", NamespaceRole::Root, ""),
            team_a,
            dev,
            prod,
            team_b,
            node("web", NamespaceRole::Template, ""),
            shop,
        ],
    }
}

/// `root` and every node below it, `root` made the top node, as the server answers a
/// `GetTreeRequest.root`.
fn subtree(tree: GetTreeResponse, root: &str) -> Option<GetTreeResponse> {
    let mut inside = std::collections::BTreeSet::from([root.to_owned()]);
    let mut nodes = Vec::new();
    for mut node in tree.nodes {
        if node.name == root {
            node.parent.clear();
            nodes.push(node);
        } else if inside.contains(&node.parent) {
            inside.insert(node.name.clone());
            nodes.push(node);
        }
    }
    (!nodes.is_empty()).then_some(GetTreeResponse { nodes })
}

struct FakeHierarchy;

#[tonic::async_trait]
impl HierarchyService for FakeHierarchy {
    async fn get_tree(
        &self,
        request: Request<GetTreeRequest>,
    ) -> Result<Response<GetTreeResponse>, Status> {
        let root = request.into_inner().root;
        let tree = canned_tree();
        if root.is_empty() {
            return Ok(Response::new(tree));
        }
        subtree(tree, &root)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("namespace {root} is not in a tree")))
    }

    async fn get_namespace(
        &self,
        request: Request<GetNamespaceRequest>,
    ) -> Result<Response<GetNamespaceResponse>, Status> {
        let name = request.into_inner().name;
        if name != "team-a-dev" {
            return Err(Status::not_found(format!(
                "namespace {name} is not tracked"
            )));
        }
        Ok(Response::new(GetNamespaceResponse {
            namespace: Some(NamespaceInfo {
                name,
                role: NamespaceRole::Sub.into(),
                parent: "team-a".into(),
                objects: vec![PropagatedObject {
                    object: Some(ObjectRef {
                        group: String::new(),
                        version: "v1".into(),
                        kind: "ConfigMap".into(),
                        namespace: "team-a-dev".into(),
                        name: "settings".into(),
                    }),
                    mode: PropagateMode::Update.into(),
                    from: "team-a".into(),
                    in_sync: true,
                }],
                ..NamespaceInfo::default()
            }),
        }))
    }

    async fn explain_propagation(
        &self,
        request: Request<ExplainPropagationRequest>,
    ) -> Result<Response<ExplainPropagationResponse>, Status> {
        let request = request.into_inner();
        let object = request
            .object
            .ok_or_else(|| Status::invalid_argument("object is required"))?;
        // Only the origin of the copy propagates; asking about the copy itself is a mistake.
        if object.namespace != "team-a" || request.target_namespace != "team-a-dev" {
            return Err(Status::failed_precondition(format!(
                "expected the origin team-a and target team-a-dev, got {} and {:?}",
                object.namespace, request.target_namespace
            )));
        }
        Ok(Response::new(ExplainPropagationResponse {
            object: Some(object),
            mode: PropagateMode::Update.into(),
            generated_from: None,
            targets: vec![PropagationTarget {
                namespace: "team-a-dev".into(),
                decision: Some(Decision {
                    allowed: true,
                    action: Action::None.into(),
                    rule: "seeds/001 sub-namespace 3".into(),
                    reason: "the copy equals its origin".into(),
                }),
            }],
        }))
    }
}

pub fn drift_events() -> Vec<DriftEvent> {
    vec![
        DriftEvent {
            object: Some(ObjectRef {
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "web".into(),
            }),
            kind: DriftKind::Modified.into(),
            observed_at: Some(time()),
            changed_fields: vec!["spec.replicas".into(), "metadata.labels.team".into()],
            observed_json: "{}".into(),
            reporter: "arbor-observer".into(),
            source: None,
            application: Some(ObjectRef {
                group: "arbor.dev".into(),
                version: "v1alpha1".into(),
                kind: "Application".into(),
                namespace: "shop".into(),
                name: "storefront".into(),
            }),
        },
        DriftEvent {
            object: Some(ObjectRef {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "team-a".into(),
                name: "settings".into(),
            }),
            kind: DriftKind::Deleted.into(),
            observed_at: Some(time()),
            changed_fields: vec![],
            observed_json: String::new(),
            reporter: "arbor-observer".into(),
            source: Some(team_a_apps()),
            application: None,
        },
    ]
}

type DriftStream = Pin<Box<dyn Stream<Item = Result<DriftEvent, Status>> + Send>>;

struct FakeObserver {
    keep_open: bool,
}

#[tonic::async_trait]
impl ObserverService for FakeObserver {
    type WatchDriftStream = DriftStream;

    async fn list_applications(
        &self,
        _: Request<ListApplicationsRequest>,
    ) -> Result<Response<ListApplicationsResponse>, Status> {
        Err(Status::unimplemented("not used by arborctl"))
    }

    async fn get_observation(
        &self,
        _: Request<GetObservationRequest>,
    ) -> Result<Response<GetObservationResponse>, Status> {
        Err(Status::unimplemented("not used by arborctl"))
    }

    async fn watch_drift(
        &self,
        request: Request<WatchDriftRequest>,
    ) -> Result<Response<Self::WatchDriftStream>, Status> {
        let request = request.into_inner();
        let events: Vec<_> = drift_events()
            .into_iter()
            .filter(|event| request.include_managed || event.source.is_none())
            .map(Ok)
            .collect();
        let events = tokio_stream::iter(events);
        let stream: DriftStream = if self.keep_open {
            Box::pin(events.chain(tokio_stream::pending()))
        } else {
            Box::pin(events)
        };
        Ok(Response::new(stream))
    }
}
