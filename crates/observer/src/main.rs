//! `arbor-observer`: parses its flags and runs the controller.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::tune_malloc(
        arbor_runtime::allocator::MallocSettings::ANSWERS_REQUESTS,
    );
    let args = arbor_observer::ObserverArgs::parse();
    tokio::runtime::Runtime::new()?.block_on(arbor_observer::run(args))?;
    Ok(())
}
