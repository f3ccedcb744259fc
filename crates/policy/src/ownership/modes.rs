//! The flags that choose what one instance manages (seeds/002, "Flags to define modes of
//! operation"): `--gittrack-mode`, `--clustergittrack-mode` and `--namespace`.
//!
//! Values are accepted in any case (`enabled`, `Enabled`, `ENABLED`); an invalid value is refused
//! with the flag's name and the list of valid values. How the flags combine, and which
//! combinations are refused, is [`super::watch::WatchScope::from_flags`]. [`ModeFlags`] is the
//! three flags as every binary that has them takes them (gitsync and the webhook), each with
//! its environment variable, so both read the same values the same way.

use std::fmt;
use std::str::FromStr;

/// `--gittrack-mode`: should this instance manage GitTrack resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GitTrackMode {
    /// Do not manage GitTracks (the default).
    #[default]
    Disabled,
    /// Manage GitTracks.
    Enabled,
}

/// `--clustergittrack-mode`: how this instance manages ClusterGitTracks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ClusterGitTrackMode {
    /// Do not manage ClusterGitTracks.
    Disabled,
    /// Manage ClusterGitTracks and allow them to manage namespaced resources (the default).
    #[default]
    IncludeNamespaced,
    /// Manage ClusterGitTracks but disallow them from managing namespaced resources.
    ExcludeNamespaced,
}

/// `--namespace`: restrict the instance to GitTracks and GitTrackObjects of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum NamespaceRestriction {
    /// `""`, the default: every namespace.
    #[default]
    AllNamespaces,
    Only(String),
}

/// `--gittrack-mode`, `--clustergittrack-mode` and `--namespace`, to flatten into a binary's
/// flags.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ModeFlags {
    /// Whether this instance manages GitTracks: Disabled or Enabled (seeds/002).
    #[arg(long, env = "ARBOR_GITTRACK_MODE", default_value = "Disabled")]
    pub gittrack_mode: GitTrackMode,

    /// How this instance manages ClusterGitTracks: Disabled, IncludeNamespaced or
    /// ExcludeNamespaced (seeds/002).
    #[arg(
        long,
        env = "ARBOR_CLUSTERGITTRACK_MODE",
        default_value = "IncludeNamespaced"
    )]
    pub clustergittrack_mode: ClusterGitTrackMode,

    /// Restrict the instance to the GitTracks and GitTrackObjects of one namespace ("" for all;
    /// for use with --gittrack-mode=Enabled).
    #[arg(long, env = "ARBOR_NAMESPACE", default_value = "")]
    pub namespace: NamespaceRestriction,
}

impl ModeFlags {
    /// What the flags together make this instance watch, or why they cannot be combined.
    pub fn scope(&self) -> Result<super::watch::WatchScope, FlagError> {
        super::watch::WatchScope::from_flags(
            self.gittrack_mode,
            self.clustergittrack_mode,
            self.namespace.clone(),
        )
    }
}

/// A flag value or combination of flags that this instance cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("invalid value {value:?} for {flag}: valid values are {valid} (case-insensitive)")]
    InvalidValue {
        flag: &'static str,
        value: String,
        valid: String,
    },
    #[error("invalid value {value:?} for --namespace: {reason}")]
    InvalidNamespace { value: String, reason: &'static str },
    #[error(
        "--namespace={namespace} restricts which GitTracks this instance manages, but \
         --gittrack-mode=Disabled manages none: --namespace is for use with \
         --gittrack-mode=Enabled"
    )]
    NamespaceWithoutGitTracks { namespace: String },
    #[error(
        "--namespace={namespace} restricts this instance to the GitTracks and GitTrackObjects of \
         {namespace}, but --clustergittrack-mode={mode} makes it manage ClusterGitTracks too \
         (cluster-wide sources; with IncludeNamespaced their GitTrackObjects in every \
         namespace): with --namespace, set --clustergittrack-mode=Disabled (as Faros \
         requires), or drop --namespace"
    )]
    NamespaceWithClusterGitTracks {
        namespace: String,
        mode: ClusterGitTrackMode,
    },
    #[error(
        "--gittrack-mode=Disabled and --clustergittrack-mode=Disabled: this instance would \
         watch nothing; enable at least one of them"
    )]
    NothingWatched,
}

impl GitTrackMode {
    pub const FLAG: &'static str = "--gittrack-mode";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("Disabled", Self::Disabled), ("Enabled", Self::Enabled)];
}

impl ClusterGitTrackMode {
    pub const FLAG: &'static str = "--clustergittrack-mode";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("Disabled", Self::Disabled),
        ("IncludeNamespaced", Self::IncludeNamespaced),
        ("ExcludeNamespaced", Self::ExcludeNamespaced),
    ];
}

impl NamespaceRestriction {
    pub const FLAG: &'static str = "--namespace";

    /// Whether an object in `namespace` is within the restriction.
    pub fn admits(&self, namespace: &str) -> bool {
        match self {
            Self::AllNamespaces => true,
            Self::Only(only) => only == namespace,
        }
    }
}

/// Finds `value` among `choices`, ignoring case, or names the flag and the valid values.
fn parse_choice<T: Copy>(
    flag: &'static str,
    value: &str,
    choices: &[(&'static str, T)],
) -> Result<T, FlagError> {
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(_, choice)| *choice)
        .ok_or_else(|| FlagError::InvalidValue {
            flag,
            value: value.to_owned(),
            valid: choices
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

fn choice_name<T: PartialEq>(choices: &[(&'static str, T)], value: &T) -> &'static str {
    choices
        .iter()
        .find(|(_, choice)| choice == value)
        .map(|(name, _)| *name)
        .expect("every variant is among the choices")
}

impl FromStr for GitTrackMode {
    type Err = FlagError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        parse_choice(Self::FLAG, value, Self::CHOICES)
    }
}

impl FromStr for ClusterGitTrackMode {
    type Err = FlagError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        parse_choice(Self::FLAG, value, Self::CHOICES)
    }
}

impl FromStr for NamespaceRestriction {
    type Err = FlagError;

    /// `""` is every namespace; anything else must be a namespace name (an RFC 1123 label).
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if value.is_empty() {
            return Ok(Self::AllNamespaces);
        }
        let invalid = |reason| FlagError::InvalidNamespace {
            value: value.to_owned(),
            reason,
        };
        if value.len() > 63 {
            return Err(invalid("a namespace name has at most 63 characters"));
        }
        let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
        if !value.bytes().all(allowed) || value.starts_with('-') || value.ends_with('-') {
            return Err(invalid(
                "a namespace name is lower-case letters, digits and '-', and starts and ends \
                 with a letter or digit",
            ));
        }
        Ok(Self::Only(value.to_owned()))
    }
}

impl fmt::Display for GitTrackMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(choice_name(Self::CHOICES, self))
    }
}

impl fmt::Display for ClusterGitTrackMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(choice_name(Self::CHOICES, self))
    }
}

impl fmt::Display for NamespaceRestriction {
    /// The flag's value: `""` for every namespace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AllNamespaces => f.write_str("\"\""),
            Self::Only(namespace) => f.write_str(namespace),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seeds_defaults() {
        assert_eq!(GitTrackMode::default(), GitTrackMode::Disabled);
        assert_eq!(
            ClusterGitTrackMode::default(),
            ClusterGitTrackMode::IncludeNamespaced
        );
        assert_eq!(
            NamespaceRestriction::default(),
            NamespaceRestriction::AllNamespaces
        );
    }

    #[test]
    fn modes_parse_in_any_case_and_display_canonically() {
        for text in ["enabled", "Enabled", "ENABLED"] {
            assert_eq!(text.parse::<GitTrackMode>().unwrap(), GitTrackMode::Enabled);
        }
        let mode: ClusterGitTrackMode = "excludenamespaced".parse().unwrap();
        assert_eq!(mode, ClusterGitTrackMode::ExcludeNamespaced);
        assert_eq!(mode.to_string(), "ExcludeNamespaced");
        for mode in ClusterGitTrackMode::CHOICES.iter().map(|(_, mode)| *mode) {
            assert_eq!(mode.to_string().parse::<ClusterGitTrackMode>(), Ok(mode));
        }
    }

    #[test]
    fn invalid_mode_names_the_flag_and_lists_valid_values() {
        let error = "Namespaced".parse::<ClusterGitTrackMode>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid value \"Namespaced\" for --clustergittrack-mode: valid values are \
             Disabled, IncludeNamespaced, ExcludeNamespaced (case-insensitive)"
        );
        let error = "on".parse::<GitTrackMode>().unwrap_err();
        assert!(
            error.to_string().contains("--gittrack-mode") && error.to_string().contains("Enabled"),
            "{error}"
        );
    }

    #[test]
    fn empty_namespace_means_every_namespace() {
        let all: NamespaceRestriction = "".parse().unwrap();
        assert!(all.admits("foo") && all.admits("bar"));
        let foo: NamespaceRestriction = "foo".parse().unwrap();
        assert!(foo.admits("foo") && !foo.admits("bar"));
    }

    #[test]
    fn invalid_namespace_names_are_refused() {
        for bad in ["Foo", "-foo", "foo-", "foo_bar", "foo.bar", &"a".repeat(64)] {
            assert!(
                matches!(
                    bad.parse::<NamespaceRestriction>(),
                    Err(FlagError::InvalidNamespace { .. })
                ),
                "{bad:?} accepted"
            );
        }
    }
}
