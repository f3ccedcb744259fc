//! `arbor-gitsync`: parses its flags and runs the controllers.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::tune_malloc(
        arbor_runtime::allocator::MallocSettings::HOLDS_EVERY_OBJECT,
    );
    let args = arbor_gitsync::run::Args::parse();
    tokio::runtime::Runtime::new()?.block_on(arbor_gitsync::run::run(args))?;
    Ok(())
}
