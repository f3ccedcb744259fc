//! The command line (the Helm chart passes exactly these flags).

use std::path::PathBuf;

use arbor_runtime::flags::CommonArgs;

/// `arbor-hierarchy`: keeps the namespace tree and propagates labels, annotations and objects.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "arbor-hierarchy", version, about)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// The domain of the keys read and written (`<domain>/type`, `/parent`, `/propagate`...):
    /// `arbor.dev`, or `accurate.cybozu.com` / `innu.cybozu.com` to take over from those.
    #[arg(long, env = "ARBOR_DOMAIN", default_value = arbor_policy::keys::DEFAULT_DOMAIN)]
    pub domain: String,

    /// The configuration file, in Accurate's format; without one nothing but namespaces and
    /// SubNamespaces is watched.
    #[arg(long, env = "ARBOR_HIERARCHY_CONFIG")]
    pub config: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn domain_defaults_to_arbor_and_config_is_optional() {
        let args = Args::try_parse_from(["arbor-hierarchy"]).unwrap();
        assert_eq!(args.domain, "arbor.dev");
        assert_eq!(args.config, None);
    }

    #[test]
    fn domain_and_config_are_read_from_flags() {
        let args = Args::try_parse_from([
            "arbor-hierarchy",
            "--domain",
            "innu.cybozu.com",
            "--config",
            "/etc/arbor/hierarchy.yaml",
        ])
        .unwrap();
        assert_eq!(args.domain, "innu.cybozu.com");
        assert_eq!(
            args.config,
            Some(PathBuf::from("/etc/arbor/hierarchy.yaml"))
        );
    }
}
