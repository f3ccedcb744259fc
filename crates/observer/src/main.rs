//! `arbor-observer`: parses its flags and runs the controller.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = arbor_observer::ObserverArgs::parse();
    arbor_observer::run(args).await?;
    Ok(())
}
