//! `arborctl sync SOURCE`: make arbor-gitsync fetch and sync a source now.
//!
//! By default the command waits for the round to finish and prints the commit it synced;
//! `--no-wait` returns once the round is queued. Errors of the round are printed with their
//! codes and make the command fail, so scripts can tell a clean sync from a broken one.

use arbor_api::SourceRef;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{TriggerSyncRequest, TriggerSyncResponse};
use clap::Args;
use serde_json::json;

use crate::connect::{ConnectionArgs, Service};
use crate::output::{Format, OutputArgs, print_structured};
use crate::status::{error_line, proto_source, source_status_json};

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The source: GitTrack/<namespace>/<name> or ClusterGitTrack/<name>.
    pub source: SourceRef,

    /// Return once the round is queued instead of when it finished.
    #[arg(long)]
    pub no_wait: bool,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

pub async fn run(args: &SyncArgs) -> anyhow::Result<()> {
    let remote = args.connection.connect(Service::Sync).await?;
    let request = TriggerSyncRequest {
        source: Some(proto_source(&args.source)),
        wait: !args.no_wait,
    };
    let response = SyncServiceClient::new(remote.channel())
        .trigger_sync(request)
        .await
        .map_err(|status| remote.call_failed("TriggerSync", status))?
        .into_inner();
    match args.output.format {
        Format::Table => print!("{}", render(&args.source, &response)),
        format => print_structured(
            format,
            &json!({
                "completed": response.completed,
                "status": response.status.as_ref().map(source_status_json),
            }),
        )?,
    }
    let errors = response
        .status
        .as_ref()
        .map_or(0, |status| status.errors.len());
    if response.completed && errors > 0 {
        anyhow::bail!("{} synced with {errors} error(s)", args.source);
    }
    Ok(())
}

/// `GitTrack/a/b synced commit X: counters`, or that the round was queued.
pub fn render(source: &SourceRef, response: &TriggerSyncResponse) -> String {
    let status = response.status.clone().unwrap_or_default();
    let commit = if status.observed_commit.is_empty() {
        "none yet"
    } else {
        status.observed_commit.as_str()
    };
    let counters = status.counters.unwrap_or_default();
    let mut out = if response.completed {
        format!(
            "{source} synced commit {commit}: {} discovered, {} applied, {} ignored, {} in sync\n",
            counters.discovered, counters.applied, counters.ignored, counters.in_sync
        )
    } else {
        format!("{source} sync queued; current commit {commit}\n")
    };
    for error in &status.errors {
        out.push_str(&format!("  {}\n", error_line(error)));
    }
    out
}
