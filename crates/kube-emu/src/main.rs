//! `arbor-kube-emu`: see [`arbor_kube_emu::cli`].

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    arbor_kube_emu::cli::run(arbor_kube_emu::cli::Args::parse()).await?;
    Ok(())
}
