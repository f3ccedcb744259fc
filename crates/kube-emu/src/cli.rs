//! The `arbor-kube-emu` command: flags, start, print the address, wait for SIGINT / SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::auth::read_token_file;
use crate::error::Error;
use crate::server::KubeEmu;

/// An in-memory Kubernetes API server for tests and demos. Never for production.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "arbor-kube-emu", version)]
pub struct Args {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated CA (written into the kubeconfig).
    #[arg(long)]
    pub tls: bool,
    /// Write a kubeconfig for the server here.
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Static token file (`token,user,uid,"group1,group2"`): requests need one of its tokens.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Changes remembered for watches and paging; older resourceVersions get 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    pub history_window: usize,
}

/// Runs the server until SIGINT or SIGTERM. Prints `listening on <url>` on stdout once ready
/// (after the kubeconfig is written), so scripts can wait for that line.
pub async fn run(args: Args) -> Result<(), Error> {
    // Signals are caught before the address is announced, so a supervisor that stops the
    // server as soon as it has seen the address gets a graceful shutdown, not a kill.
    let stop = ShutdownSignals::install()?;
    let mut builder = KubeEmu::builder()
        .listen(args.listen)
        .tls(args.tls)
        .history_window(args.history_window);
    if let Some(path) = &args.token_file {
        builder = builder.tokens(read_token_file(path)?);
    }
    let emu = builder.start().await?;
    if let Some(path) = &args.kubeconfig_out {
        emu.write_kubeconfig(path)?;
    }
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on {}", emu.url())
        .and_then(|()| stdout.flush())
        .map_err(|source| Error::Io {
            what: "writing the address to stdout".into(),
            source,
        })?;
    stop.received().await;
    tracing::info!("shutting down");
    emu.shutdown().await;
    Ok(())
}

/// SIGINT and SIGTERM, either of which stops the server.
struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn install() -> Result<ShutdownSignals, Error> {
        use tokio::signal::unix::{SignalKind, signal};
        let install = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|source| Error::Io {
                what: format!("installing the {name} handler"),
                source,
            })
        };
        Ok(ShutdownSignals {
            interrupt: install(SignalKind::interrupt(), "SIGINT")?,
            terminate: install(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    async fn received(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
