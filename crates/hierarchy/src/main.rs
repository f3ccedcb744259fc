//! The `arbor-hierarchy` binary: parses flags and calls [`arbor_hierarchy::run`].

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::limit_malloc_arenas();
    arbor_hierarchy::run(arbor_hierarchy::Args::parse()).await?;
    Ok(())
}
