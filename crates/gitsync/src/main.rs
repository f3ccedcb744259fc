//! `arbor-gitsync`: parses its flags and runs the controllers.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    arbor_runtime::allocator::limit_malloc_arenas();
    let args = arbor_gitsync::run::Args::parse();
    arbor_gitsync::run::run(args).await?;
    Ok(())
}
