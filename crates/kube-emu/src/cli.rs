//! The `arbor-kube-emu` command: flags, start, print the address, wait for SIGINT / SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::auth::read_token_file;
use crate::authz::read_deny_rules;
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
    /// How requests are authorized: `always-allow` (every authenticated request, the
    /// default) or `rbac` (the stored Roles, ClusterRoles and bindings, as kube-apiserver's
    /// RBAC authorizer; the server starts with kube's bootstrap policy and `system:masters`
    /// may do everything).
    #[arg(long, value_enum, default_value_t = Authorization::AlwaysAllow)]
    pub authorization: Authorization,
    /// YAML file of rules denying verbs to identities (see the `authz` module), for example
    /// `rules: [{users: [system:serviceaccount:arbor-system:arbor-hierarchy], verbs: [delete], resources: [secrets]}]`.
    #[arg(long)]
    pub deny_rules: Option<PathBuf>,
    /// Where an admission webhook service listens, `namespace/name[:port]=host:port` (port
    /// defaults to 443); repeatable. There is no cluster DNS.
    #[arg(long = "service-address", value_parser = parse_service_address)]
    pub service_addresses: Vec<ServiceAddress>,
}

/// The `--authorization` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Authorization {
    AlwaysAllow,
    Rbac,
}

/// One `--service-address`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAddress {
    pub namespace: String,
    pub name: String,
    pub port: u16,
    pub addr: SocketAddr,
}

/// Parses `namespace/name[:port]=host:port`.
pub fn parse_service_address(value: &str) -> Result<ServiceAddress, Error> {
    let invalid = || Error::ServiceAddress {
        value: value.to_owned(),
    };
    let (service, addr) = value.split_once('=').ok_or_else(invalid)?;
    let (namespace, name_port) = service.split_once('/').ok_or_else(invalid)?;
    let (name, port) = match name_port.split_once(':') {
        Some((name, port)) => (name, port.parse().map_err(|_| invalid())?),
        None => (name_port, 443),
    };
    if namespace.is_empty() || name.is_empty() {
        return Err(invalid());
    }
    Ok(ServiceAddress {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        port,
        addr: addr.parse().map_err(|_| invalid())?,
    })
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
        .history_window(args.history_window)
        .rbac(args.authorization == Authorization::Rbac);
    if let Some(path) = &args.token_file {
        builder = builder.tokens(read_token_file(path)?);
    }
    if let Some(path) = &args.deny_rules {
        builder = builder.deny_rules(read_deny_rules(path)?);
    }
    for service in &args.service_addresses {
        builder = builder.service_address(
            &service.namespace,
            &service.name,
            service.port,
            service.addr,
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_addresses_parse_with_and_without_a_port() {
        let parsed =
            parse_service_address("arbor-system/arbor-webhook:8443=127.0.0.1:1234").expect("valid");
        assert_eq!(
            (
                parsed.namespace.as_str(),
                parsed.name.as_str(),
                parsed.port,
                parsed.addr.port()
            ),
            ("arbor-system", "arbor-webhook", 8443, 1234)
        );
        assert_eq!(
            parse_service_address("ns/hook=127.0.0.1:1")
                .expect("valid")
                .port,
            443
        );
        for bad in [
            "ns/hook",
            "hook=127.0.0.1:1",
            "ns/hook:x=127.0.0.1:1",
            "ns/hook=nowhere",
        ] {
            assert!(parse_service_address(bad).is_err(), "{bad}");
        }
    }
}
