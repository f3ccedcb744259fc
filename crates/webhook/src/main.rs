//! The `arbor-webhook` binary: parses flags and calls [`arbor_webhook::run`].

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::limit_malloc_arenas();
    arbor_webhook::run(arbor_webhook::Args::parse()).await?;
    Ok(())
}
