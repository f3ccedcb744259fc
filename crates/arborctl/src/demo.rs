//! `arborctl demo`: the whole of Arbor on this machine, without a cluster.
//!
//! It starts `arbor-kube-emu` (TLS; kubeconfig in `<workdir>/kubeconfig`), installs the CRDs,
//! issues mutual-TLS certificates into `<workdir>/tls/`, and starts the four controllers as
//! processes wired to each other over gRPC (see [`arbor_demo::system`]). The example
//! repositories of `deploy/examples/` become bare repositories served over smart HTTP on
//! loopback; a ClusterGitTrack follows `foo-corp` (hierarchical), a GitTrack in `shop` follows
//! `flat-app`, and the namespace tree and the Application are applied. Once everything has
//! converged the demo prints what `arborctl status` and `arborctl tree` print, and how to point
//! kubectl and arborctl at it; then it runs until Ctrl-C and stops every process.

mod examples;
mod progress;
mod summary;

use std::path::PathBuf;
use std::time::Duration;

use arbor_demo::{System, SystemConfig};
use clap::Args;

use crate::connect::Resolved;
use crate::context::{self, Context, DEMO_CONTEXT};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the kubeconfig, certificates, repositories and logs go (created; reused files are
    /// replaced).
    #[arg(long, default_value = ".demo")]
    pub workdir: PathBuf,

    /// The example repositories and objects.
    #[arg(long, default_value = "deploy/examples")]
    pub examples: PathBuf,

    /// Print the summary without waiting for the sources and the tree to converge.
    #[arg(long)]
    pub no_wait: bool,

    /// Stop everything right after the summary instead of running until Ctrl-C.
    #[arg(long)]
    pub exit_after_summary: bool,

    /// The limit for each wait (start-up, first sync, tree, application).
    #[arg(long, value_parser = arbor_runtime::flags::parse_duration, default_value = "120s")]
    pub timeout: Duration,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(demo(args))
}

async fn demo(args: &DemoArgs) -> anyhow::Result<()> {
    let workdir = std::path::absolute(&args.workdir)?;
    let examples = std::path::absolute(&args.examples)?;
    std::fs::create_dir_all(&workdir)?;

    progress::step("starting arbor-kube-emu and the four controllers");
    let mut config = SystemConfig::new(&workdir)?;
    config.hierarchy_config = Some(examples.join("hierarchy-config.yaml"));
    config.startup_timeout = args.timeout;
    let mut system = System::start(config).await?;
    progress::done(&format!(
        "API server and controllers up (logs in {})",
        workdir.join("logs").display()
    ));

    let served = examples::Served::publish(&examples, &workdir)?;
    progress::done(&format!(
        "example repositories served at {}",
        served.server.url("")
    ));
    let expected = examples::apply_examples(&system, &served, &examples).await?;
    let connection = connection(&system);
    if !args.no_wait {
        examples::wait_until_converged(&system, &connection, &expected, args.timeout).await?;
    }
    let config = save_demo_context(&system, &connection)?;
    summary::print(&system, &connection, &config).await?;
    if !args.exit_after_summary {
        progress::step("running; press Ctrl-C to stop");
        wait_for_signal().await?;
    }
    progress::step("stopping");
    system.stop(Duration::from_secs(10));
    drop(served);
    progress::done("stopped");
    Ok(())
}

/// Where this system's services are, for the summary's own gRPC calls and the demo's context.
fn connection(system: &System) -> Resolved {
    let url = |controller: &Option<arbor_demo::system::Controller>| {
        Some(
            controller
                .as_ref()
                .map(arbor_demo::system::Controller::grpc_url)
                .unwrap_or_default(),
        )
    };
    Resolved {
        gitsync_addr: url(&system.gitsync),
        hierarchy_addr: url(&system.hierarchy),
        observer_addr: url(&system.observer),
        policy_addr: url(&system.webhook),
        tls_cert: Some(system.client_identity.cert.clone()),
        tls_key: Some(system.client_identity.key.clone()),
        tls_ca: Some(system.tls.ca()),
        context: Some(DEMO_CONTEXT.to_owned()),
        cluster: None,
    }
}

/// Writes the `arbor-demo` context (this system's addresses, arborctl's certificate and the
/// emulator's kubeconfig) into the arborctl config file and makes it current, so that plain
/// `arborctl status` talks to this demo.
fn save_demo_context(system: &System, connection: &Resolved) -> anyhow::Result<std::path::PathBuf> {
    Ok(context::save_as_current(Context {
        name: DEMO_CONTEXT.to_owned(),
        gitsync_addr: connection.gitsync_addr.clone(),
        hierarchy_addr: connection.hierarchy_addr.clone(),
        observer_addr: connection.observer_addr.clone(),
        policy_addr: connection.policy_addr.clone(),
        tls_cert: connection.tls_cert.clone(),
        tls_key: connection.tls_key.clone(),
        tls_ca: connection.tls_ca.clone(),
        kubeconfig: Some(system.kubeconfig.clone()),
        kube_context: None,
        arbor_namespace: None,
        release: None,
    })?)
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted?,
        _ = terminate.recv() => {}
    }
    Ok(())
}
