//! The webhook's flags. The Helm chart passes these; each maps to a [`PolicySettings`] field or
//! to the servers.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use arbor_api::hierarchy_config::{self, HierarchyConfigError};
use arbor_policy::keys::{InvalidDomain, Keys, ManagementLabel};
use arbor_policy::ownership::{FlagError, ModeFlags};
use arbor_runtime::flags::{CommonArgs, parse_duration};

use crate::rules::drift::{DriftSettings, UnreachableAnswer};
use crate::settings::PolicySettings;

/// `arbor-webhook`: admission-time policy for Arbor.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "arbor-webhook", version, about)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Address of the HTTPS admission endpoint (`POST /validate`).
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,

    /// PEM certificate (chain) of the admission endpoint; re-read when the file changes.
    #[arg(long)]
    pub webhook_cert: PathBuf,

    /// PEM private key of the admission endpoint; re-read when the file changes.
    #[arg(long)]
    pub webhook_key: PathBuf,

    #[command(flatten)]
    pub modes: ModeFlags,

    /// Domain of the namespace-tree keys (`<domain>/type`, `/parent`, `/template`) and of
    /// Arbor's annotations.
    #[arg(long, default_value = arbor_policy::keys::DEFAULT_DOMAIN)]
    pub domain: String,

    /// The hierarchy configuration file arbor-hierarchy reads (Accurate's format); its
    /// `namingPolicies` are checked when a SubNamespace is created. Without it, none apply.
    #[arg(long, env = "ARBOR_HIERARCHY_CONFIG")]
    pub hierarchy_config: Option<PathBuf>,

    /// Allow deleting a root or sub-namespace (or its SubNamespace) that has sub-namespaces.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_cascading_deletion: bool,

    /// Refuse changes to managed objects, by anyone but --arbor-service-accounts, that make
    /// them differ from git.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub prevent_drift: bool,

    /// arbor-gitsync's gRPC address (`https://host:port`), asked for declared state; required
    /// with --prevent-drift.
    #[arg(long)]
    pub gitsync_addr: Option<String>,

    /// Usernames whose changes are Arbor's own, comma separated, like
    /// `system:serviceaccount:arbor-system:arbor-gitsync`.
    #[arg(long, value_delimiter = ',')]
    pub arbor_service_accounts: Vec<String>,

    /// The answer when arbor-gitsync cannot be asked: allow or deny.
    #[arg(long, value_enum, default_value = "allow")]
    pub drift_unreachable: UnreachableAnswer,

    /// The management label, `key=value` (a bare key means `=enabled`).
    #[arg(
        long,
        env = "ARBOR_MANAGEMENT_LABEL",
        default_value = "arbor.dev/managed=enabled"
    )]
    pub management_label: ManagementLabel,

    /// How long an answer of arbor-gitsync is reused.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub drift_cache_ttl: Duration,

    /// How long to wait for arbor-gitsync before --drift-unreachable decides.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub gitsync_timeout: Duration,
}

/// The flags do not make a valid installation.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error(transparent)]
    Modes(#[from] FlagError),
    #[error("--domain: {0}")]
    Domain(InvalidDomain),
    #[error("--hierarchy-config: {0}")]
    HierarchyConfig(#[from] HierarchyConfigError),
    #[error("--prevent-drift true needs --gitsync-addr to ask arbor-gitsync for declared state")]
    DriftWithoutGitsync,
    #[error(
        "--prevent-drift true needs --arbor-service-accounts, or Arbor's own changes would be refused"
    )]
    DriftWithoutServiceAccounts,
}

impl Args {
    /// The decision settings these flags describe.
    pub fn settings(&self) -> Result<PolicySettings, ArgsError> {
        let scope = self.modes.scope()?;
        let keys = Keys::for_domain(&self.domain).map_err(ArgsError::Domain)?;
        let label = self.management_label.clone();
        let rules = hierarchy_config::load(self.hierarchy_config.as_deref(), &keys)?.rules;
        let mut settings = PolicySettings::new(scope, keys).with_rules(rules);
        settings.allow_cascading_deletion = self.allow_cascading_deletion;
        if self.prevent_drift {
            if self.gitsync_addr.is_none() {
                return Err(ArgsError::DriftWithoutGitsync);
            }
            let service_accounts: BTreeSet<String> = self
                .arbor_service_accounts
                .iter()
                .map(|account| account.trim().to_owned())
                .filter(|account| !account.is_empty())
                .collect();
            if service_accounts.is_empty() {
                return Err(ArgsError::DriftWithoutServiceAccounts);
            }
            settings.drift = Some(DriftSettings {
                label,
                service_accounts,
                unreachable: self.drift_unreachable,
            });
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_policy::ownership::ClusterGitTrackMode;
    use clap::Parser;

    const REQUIRED: [&str; 5] = [
        "arbor-webhook",
        "--webhook-cert",
        "tls.crt",
        "--webhook-key",
        "tls.key",
    ];

    fn parse(extra: &[&str]) -> Args {
        Args::try_parse_from(REQUIRED.iter().chain(extra)).unwrap()
    }

    #[test]
    fn defaults_are_the_seeds_and_safe() {
        let args = parse(&[]);
        assert_eq!(args.webhook_addr.to_string(), "0.0.0.0:9443");
        let settings = args.settings().unwrap();
        assert_eq!(
            settings.scope.cluster_gittrack_mode(),
            ClusterGitTrackMode::IncludeNamespaced
        );
        assert!(!settings.allow_cascading_deletion);
        assert!(settings.drift.is_none());
        assert_eq!(settings.keys.domain(), "arbor.dev");
    }

    #[test]
    fn boolean_flags_take_an_explicit_value() {
        let args = parse(&[
            "--allow-cascading-deletion",
            "true",
            "--prevent-drift",
            "true",
            "--gitsync-addr",
            "https://gitsync:9090",
            "--arbor-service-accounts",
            "system:serviceaccount:arbor:gitsync, system:serviceaccount:arbor:hierarchy",
            "--drift-unreachable",
            "deny",
            "--management-label",
            "nomos.dev/managed",
        ]);
        let settings = args.settings().unwrap();
        assert!(settings.allow_cascading_deletion);
        let drift = settings.drift.unwrap();
        assert_eq!(drift.unreachable, UnreachableAnswer::Deny);
        assert_eq!(drift.label, ManagementLabel::nomos());
        assert!(
            drift
                .service_accounts
                .contains("system:serviceaccount:arbor:hierarchy")
        );
    }

    #[test]
    fn invalid_combinations_are_refused_with_the_flag() {
        let error = parse(&["--gittrack-mode", "Enabled", "--namespace", "foo"])
            .settings()
            .unwrap_err();
        assert!(error.to_string().contains("--namespace"), "{error}");
        let error = parse(&["--prevent-drift", "true"]).settings().unwrap_err();
        assert!(error.to_string().contains("--gitsync-addr"), "{error}");
        assert!(Args::try_parse_from(REQUIRED.iter().chain(&["--gittrack-mode", "on"])).is_err());
    }

    /// The file is read by the loader arbor-hierarchy uses: a file it refuses is refused here,
    /// naming the flag, the file and the field.
    #[test]
    fn a_bad_hierarchy_config_is_refused_naming_the_flag_the_file_and_the_field() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "watches:\n  - kind: Secret\n").unwrap();
        let path = file.path().to_str().unwrap();
        let error = parse(&["--hierarchy-config", path])
            .settings()
            .unwrap_err()
            .to_string();
        for named in ["--hierarchy-config", path, "watches[0]", "version"] {
            assert!(error.contains(named), "{named}: {error}");
        }
    }

    #[test]
    fn a_management_label_without_a_prefix_is_refused_naming_the_flag() {
        let error = Args::try_parse_from(REQUIRED.iter().chain(&["--management-label", "managed"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("--management-label"), "{error}");
        assert!(error.contains("prefixed key"), "{error}");
    }

    #[test]
    fn mode_and_label_flags_read_the_environment_variables_gitsync_reads() {
        let command = <Args as clap::CommandFactory>::command();
        let env_of = |id: &str| {
            command
                .get_arguments()
                .find(|argument| argument.get_id() == id)
                .and_then(|argument| argument.get_env())
                .map(|name| name.to_string_lossy().into_owned())
        };
        for (id, env) in [
            ("gittrack_mode", "ARBOR_GITTRACK_MODE"),
            ("clustergittrack_mode", "ARBOR_CLUSTERGITTRACK_MODE"),
            ("namespace", "ARBOR_NAMESPACE"),
            ("management_label", "ARBOR_MANAGEMENT_LABEL"),
        ] {
            assert_eq!(env_of(id).as_deref(), Some(env), "--{id}");
        }
    }
}
