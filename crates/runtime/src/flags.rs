//! Flags that every Arbor binary accepts.
//!
//! Each flag has an environment variable so that a Helm chart can configure a Deployment
//! without rewriting its command line; the command line wins when both are given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::telemetry::LogFormat;

/// The flags shared by all controllers. Embed with `#[command(flatten)]`.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Kubeconfig to use; in-cluster configuration, then `~/.kube/config`, when absent.
    #[arg(long, env = "KUBECONFIG", global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context; the current context when absent.
    #[arg(long, env = "ARBOR_KUBE_CONTEXT", global = true)]
    pub context: Option<String>,

    /// Log filter, in `tracing` env-filter syntax (`info`, `arbor_gitsync=debug,info`).
    #[arg(long, env = "ARBOR_LOG", default_value = "info", global = true)]
    pub log_level: String,

    /// Log output format.
    #[arg(long, env = "ARBOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// Address of the admin server: `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, env = "ARBOR_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,

    /// Address of the gRPC server.
    #[arg(long, env = "ARBOR_GRPC_ADDR", default_value = "0.0.0.0:9090")]
    pub grpc_addr: SocketAddr,

    /// With `--shards` above 1: the URL the other replicas reach this replica's gRPC server at
    /// (in a pod, `https://$(POD_IP):9090`; an IPv6 pod IP may be written without brackets),
    /// written on its membership Lease so that a request about a shard another replica holds
    /// is passed to that replica. Default: the bound
    /// address when it is a loopback one; otherwise such requests are answered with the
    /// holder's name instead.
    #[arg(long, env = "ARBOR_GRPC_ADVERTISE_ADDRESS")]
    pub grpc_advertise_address: Option<String>,

    /// The name every replica's serving certificate carries (such as the Service's DNS name),
    /// which this replica verifies the others' certificates against when it calls them at their
    /// advertised addresses; default: each address's host.
    #[arg(long, env = "ARBOR_GRPC_ADVERTISE_SERVER_NAME")]
    pub grpc_advertise_server_name: Option<String>,

    #[command(flatten)]
    pub tls: TlsArgs,

    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,

    #[command(flatten)]
    pub listener: crate::listener::ListenerArgs,

    #[command(flatten)]
    pub authz: crate::authz::AuthzArgs,

    /// How long in-flight work may take to finish after SIGTERM before the process exits.
    #[arg(long, env = "ARBOR_SHUTDOWN_GRACE", value_parser = parse_duration, default_value = "20s")]
    pub shutdown_grace: Duration,
}

/// Certificate files for serving gRPC and for calling other components.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// PEM certificate chain this component presents, as a server and as a client.
    #[arg(long = "tls-cert", env = "ARBOR_TLS_CERT", requires = "key")]
    pub cert: Option<PathBuf>,

    /// PEM private key of `--tls-cert`.
    #[arg(long = "tls-key", env = "ARBOR_TLS_KEY", requires = "cert")]
    pub key: Option<PathBuf>,

    /// PEM CA bundle that peers' certificates must chain to. When set, servers require client
    /// certificates (mutual TLS) and clients verify servers against it.
    #[arg(long = "tls-client-ca", env = "ARBOR_TLS_CA")]
    pub ca: Option<PathBuf>,
}

/// Leader election settings.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderElectionArgs {
    /// Run only while holding the Lease, so that several replicas can run for availability.
    #[arg(
        long = "leader-election",
        env = "ARBOR_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub enabled: bool,

    /// Name of the Lease; each component uses its own.
    #[arg(long = "lease-name", env = "ARBOR_LEASE_NAME")]
    pub lease_name: Option<String>,

    /// Namespace of the Lease; the pod's namespace when absent.
    #[arg(
        long = "lease-namespace",
        env = "POD_NAMESPACE",
        default_value = "arbor-system"
    )]
    pub lease_namespace: String,

    /// This replica's identity in the Lease; the pod name (or host name) when absent.
    #[arg(long = "lease-identity", env = "POD_NAME")]
    pub identity: Option<String>,

    /// How long a Lease stays valid without renewal.
    #[arg(long = "lease-duration", env = "ARBOR_LEASE_DURATION", value_parser = parse_duration, default_value = "15s")]
    pub lease_duration: Duration,

    /// How often the holder renews.
    #[arg(long = "lease-renew-interval", env = "ARBOR_LEASE_RENEW", value_parser = parse_duration, default_value = "5s")]
    pub renew_interval: Duration,
}

/// Parses durations such as `500ms`, `30s`, `5m`, `1h` or `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid =
        || format!("invalid duration {text:?}: use a number with ms, s, m or h, like 30s or 1m30s");
    if text.is_empty() {
        return Err(invalid());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        if digits == 0 {
            return Err(invalid());
        }
        let value: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value * 60),
            "h" => Duration::from_secs(value * 3600),
            _ => return Err(invalid()),
        };
        total += unit;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    #[test]
    fn durations_accept_units_and_compounds() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "10", "s", "1d", "1.5s", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn defaults_enable_leader_election_and_bind_admin_and_grpc() {
        let cli = Cli::try_parse_from(["arbor"]).unwrap();
        assert!(cli.common.leader_election.enabled);
        assert_eq!(cli.common.admin_addr.port(), 8080);
        assert_eq!(cli.common.grpc_addr.port(), 9090);
    }

    #[test]
    fn tls_certificate_requires_its_key() {
        let err = Cli::try_parse_from(["arbor", "--tls-cert", "c.pem"]).unwrap_err();
        assert!(err.to_string().contains("--tls-key"), "{err}");
    }

    #[test]
    fn leader_election_can_be_turned_off() {
        let cli = Cli::try_parse_from(["arbor", "--leader-election", "false"]).unwrap();
        assert!(!cli.common.leader_election.enabled);
    }
}
