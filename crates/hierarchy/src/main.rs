//! The `arbor-hierarchy` binary: parses flags and calls [`arbor_hierarchy::run`].

use clap::Parser;

fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::tune_malloc(
        arbor_runtime::allocator::MallocSettings::ANSWERS_REQUESTS,
    );
    let args = arbor_hierarchy::Args::parse();
    tokio::runtime::Runtime::new()?.block_on(arbor_hierarchy::run(args))?;
    Ok(())
}
