//! The observer's command line: the flags every Arbor component takes, plus where to report
//! drift of git-managed objects and which objects count as git-managed.

use arbor_policy::keys::ManagementLabel;
use arbor_policy::object::GroupVersionKind;
use arbor_runtime::flags::CommonArgs;

/// Kinds watched for drift of git-managed objects when `--drift-kinds` is not given.
pub const DEFAULT_DRIFT_KINDS: &str = "v1/ConfigMap,v1/Secret,rbac.authorization.k8s.io/v1/Role,\
rbac.authorization.k8s.io/v1/RoleBinding,rbac.authorization.k8s.io/v1/ClusterRole,\
rbac.authorization.k8s.io/v1/ClusterRoleBinding,v1/ServiceAccount,v1/Service,apps/v1/Deployment";

/// `arbor-observer`'s flags.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "arbor-observer",
    about = "Applies Applications, heals their drift, and reports drift of git-managed objects."
)]
pub struct ObserverArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub sharding: arbor_runtime::ShardArgs,

    /// arbor-gitsync's gRPC address (`https://host:port`, or `http://` on loopback). Drift of
    /// git-managed objects is not reported when absent.
    #[arg(long, env = "ARBOR_GITSYNC_ADDR")]
    pub gitsync_addr: Option<String>,

    /// The label that marks git-managed objects, as `key=value` (a bare key means `enabled`).
    #[arg(
        long,
        env = "ARBOR_MANAGEMENT_LABEL",
        default_value = "arbor.dev/managed=enabled"
    )]
    pub management_label: ManagementLabel,

    /// Kinds whose git-managed objects are watched for drift, as `group/version/Kind`
    /// (`version/Kind` for the core group), comma separated.
    #[arg(long, env = "ARBOR_DRIFT_KINDS", value_delimiter = ',', default_value = DEFAULT_DRIFT_KINDS, value_parser = parse_drift_kind)]
    pub drift_kinds: Vec<GroupVersionKind>,

    /// How many Applications are reconciled at once. Each reconcile in flight holds its own
    /// connection to the API server (with its buffers) and its decoded Application, so this
    /// bounds the memory and the API server load a burst of changes causes.
    #[arg(long, env = "ARBOR_MAX_CONCURRENT_RECONCILES", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,
}

/// Parses `apps/v1/Deployment` or `v1/ConfigMap`.
pub fn parse_drift_kind(text: &str) -> Result<GroupVersionKind, String> {
    let text = text.trim();
    match text.rsplit_once('/') {
        Some((api_version, kind)) if !api_version.is_empty() && !kind.is_empty() => {
            Ok(GroupVersionKind::from_api_version(api_version, kind))
        }
        _ => Err(format!(
            "invalid drift kind {text:?}: use group/version/Kind, like apps/v1/Deployment or v1/ConfigMap"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn defaults_watch_the_nine_usual_kinds_with_the_arbor_label() {
        let args = ObserverArgs::try_parse_from(["arbor-observer"]).unwrap();
        assert_eq!(args.drift_kinds.len(), 9);
        assert_eq!(args.management_label, ManagementLabel::arbor());
        assert!(args.gitsync_addr.is_none());
        assert_eq!(args.max_concurrent_reconciles, 16);
        assert!(
            ObserverArgs::try_parse_from(["arbor-observer", "--max-concurrent-reconciles=0"])
                .is_err()
        );
        let deployment = &args.drift_kinds[8];
        assert_eq!(
            (deployment.group.as_str(), deployment.kind.as_str()),
            ("apps", "Deployment")
        );
        assert_eq!(args.drift_kinds[0].group, "");
    }

    #[test]
    fn drift_kind_without_version_is_refused() {
        assert!(
            parse_drift_kind("ConfigMap")
                .unwrap_err()
                .contains("ConfigMap")
        );
        assert!(parse_drift_kind("/ConfigMap").is_err());
    }

    #[test]
    fn nomos_label_is_accepted() {
        let args = ObserverArgs::try_parse_from([
            "arbor-observer",
            "--management-label",
            "nomos.dev/managed=enabled",
            "--drift-kinds",
            "v1/ConfigMap",
        ])
        .unwrap();
        assert_eq!(args.management_label, ManagementLabel::nomos());
        assert_eq!(args.drift_kinds.len(), 1);
    }
}
