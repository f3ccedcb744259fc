//! `arbor-observer`: parses its flags and runs the controller.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::limit_malloc_arenas();
    let args = arbor_observer::ObserverArgs::parse();
    arbor_observer::run(args).await?;
    Ok(())
}
