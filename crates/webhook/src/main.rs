//! The `arbor-webhook` binary: parses flags and calls [`arbor_webhook::run`].

use clap::Parser;

fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::tune_malloc(
        arbor_runtime::allocator::MallocSettings::ANSWERS_REQUESTS,
    );
    let args = arbor_webhook::Args::parse();
    tokio::runtime::Runtime::new()?.block_on(arbor_webhook::run(args))?;
    Ok(())
}
