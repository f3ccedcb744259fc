//! The demo's summary on stdout: `arborctl status`, `arborctl tree`, and how to use kubectl
//! and arborctl against the running system.

use arbor_demo::System;
use arbor_proto::v1::GetStatusRequest;
use arbor_proto::v1::GetTreeRequest;
use arbor_proto::v1::hierarchy_service_client::HierarchyServiceClient;
use arbor_proto::v1::sync_service_client::SyncServiceClient;

use crate::connect::{Resolved, Service};
use crate::context::DEMO_CONTEXT;

/// The line a script can wait for: everything above it is the summary.
pub const SUMMARY_END: &str = "Arbor demo is ready.";

pub async fn print(
    system: &System,
    connection: &Resolved,
    config: &std::path::Path,
) -> anyhow::Result<()> {
    let sync = connection.connect(Service::Sync).await?;
    let status = SyncServiceClient::new(sync.channel())
        .get_status(GetStatusRequest { source: None })
        .await
        .map_err(|status| sync.call_failed("GetStatus", status))?
        .into_inner();
    let hierarchy = connection.connect(Service::Hierarchy).await?;
    let tree = HierarchyServiceClient::new(hierarchy.channel())
        .get_tree(GetTreeRequest::default())
        .await
        .map_err(|status| hierarchy.call_failed("GetTree", status))?
        .into_inner();

    println!();
    println!("$ arborctl status");
    print!("{}", crate::status::render_table(&status.sources));
    println!();
    println!("$ arborctl tree");
    print!("{}", crate::tree::render(&tree));
    println!();
    println!("Use the cluster with kubectl:");
    println!("  export KUBECONFIG={}", system.kubeconfig.display());
    println!("  kubectl get ns");
    println!("  kubectl get clustergittracks,gittracks -A");
    println!();
    println!(
        "arborctl needs no flags: context {DEMO_CONTEXT:?} is current in {} (arborctl status, tree, explain, drift).",
        config.display()
    );
    println!();
    println!("{SUMMARY_END}");
    Ok(())
}
