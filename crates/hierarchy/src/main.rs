//! The `arbor-hierarchy` binary: parses flags and calls [`arbor_hierarchy::run`].

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = arbor_hierarchy::Args::parse();
    arbor_runtime::telemetry::init(&args.common.log_level, args.common.log_format)?;
    arbor_hierarchy::run(args).await?;
    Ok(())
}
