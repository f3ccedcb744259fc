//! Named contexts: how to reach one Arbor installation, kept in a file so that remote commands
//! need no flags.
//!
//! The file is `$ARBORCONFIG`, else `$XDG_CONFIG_HOME/arbor/config.yaml`, else
//! `~/.config/arbor/config.yaml`. It holds named contexts the way a kubeconfig does, and the
//! name of the current one:
//!
//! ```yaml
//! current-context: arbor-demo
//! contexts:
//!   - name: arbor-demo
//!     gitsync-addr: https://127.0.0.1:40123
//!     hierarchy-addr: https://127.0.0.1:40125
//!     observer-addr: https://127.0.0.1:40127
//!     policy-addr: https://127.0.0.1:40129
//!     tls-cert: /home/me/arbor/.demo/tls/arborctl.crt
//!     tls-key: /home/me/arbor/.demo/tls/arborctl.key
//!     tls-ca: /home/me/arbor/.demo/tls/ca.crt
//!     kubeconfig: /home/me/arbor/.demo/kubeconfig
//!   - name: production
//!     kubeconfig: /home/me/.kube/config
//!     kube-context: prod
//!     arbor-namespace: arbor-system
//!     release: arbor
//! ```
//!
//! A context with a kubeconfig (or a kube-context) and no addresses, like `production`
//! above, reaches each component through that cluster's API server ([`crate::cluster`]):
//! `arborctl context set production --kubeconfig ~/.kube/config --kube-context prod`.
//!
//! A remote command takes each setting from, in this order: its flag, its `ARBOR_*` variable,
//! the context chosen by `--arbor-context` / `ARBOR_CONTEXT` (else the file's current context),
//! and last the loopback defaults of [`crate::connect`]. A context may leave any setting out.
//! `arborctl context list|show|use|set|delete` reads and edits the file; `arborctl demo` writes
//! its own context, `arbor-demo`, and makes it current.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::output::{Format, OutputArgs, Table, print_structured};

/// The variable naming the config file.
pub const CONFIG_ENV: &str = "ARBORCONFIG";

/// The context `arborctl demo` writes.
pub const DEMO_CONTEXT: &str = "arbor-demo";

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ArborConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: Vec<Context>,
}

/// How to reach one Arbor installation. Every setting is optional: what a context leaves out
/// falls back to the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Context {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitsync_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// The kubeconfig of the cluster Arbor runs in (for kubectl and for commands that read the
    /// cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// The context of that kubeconfig to use; its current context when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_context: Option<String>,
    /// The namespace Arbor is installed in (for reaching it through the cluster); default
    /// `arbor-system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arbor_namespace: Option<String>,
    /// The Helm release name of Arbor; default `arbor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

/// Why the config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error(
        "no config file for arborctl: {CONFIG_ENV} is unset and neither XDG_CONFIG_HOME nor HOME is set"
    )]
    NoConfigPath,
    #[error("cannot read the arborctl config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the arborctl config {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot write the arborctl config {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no context {name:?} in {path} (contexts: {known})")]
    Unknown {
        name: String,
        path: PathBuf,
        known: String,
    },
    #[error("{given} is set but {missing} is not: a client certificate needs its key")]
    UnpairedTls {
        given: &'static str,
        missing: &'static str,
    },
    #[error(
        "the arborctl config {path} names {name:?} as current context, but has no such context"
    )]
    DanglingCurrent { name: String, path: PathBuf },
}

/// Where the config file is, by the rules of the module docs.
pub fn config_path() -> Result<PathBuf, ContextError> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(path) = non_empty(CONFIG_ENV) {
        return Ok(PathBuf::from(path));
    }
    if let Some(dir) = non_empty("XDG_CONFIG_HOME") {
        return Ok(PathBuf::from(dir).join("arbor").join("config.yaml"));
    }
    non_empty("HOME")
        .map(|home| {
            PathBuf::from(home)
                .join(".config")
                .join("arbor")
                .join("config.yaml")
        })
        .ok_or(ContextError::NoConfigPath)
}

impl ArborConfig {
    /// The file at `path`; a missing file is an empty config.
    pub fn load(path: &Path) -> Result<Self, ContextError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::default());
            }
            Err(source) => {
                return Err(ContextError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_saphyr::from_str(&text).map_err(|error| ContextError::Parse {
            path: path.to_owned(),
            message: error.to_string(),
        })
    }

    /// Writes the file, creating its directory. The file names private keys, so it is kept
    /// private to its owner.
    pub fn save(&self, path: &Path) -> Result<(), ContextError> {
        let write = |source| ContextError::Write {
            path: path.to_owned(),
            source,
        };
        let text = serde_saphyr::to_string(self)
            .map_err(|error| write(std::io::Error::other(error.to_string())))?;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(write)?;
        }
        let temporary = path.with_extension("yaml.tmp");
        std::fs::write(&temporary, text).map_err(write)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
                .map_err(write)?;
        }
        std::fs::rename(&temporary, path).map_err(write)
    }

    pub fn get(&self, name: &str) -> Option<&Context> {
        self.contexts.iter().find(|context| context.name == name)
    }

    fn unknown(&self, name: &str, path: &Path) -> ContextError {
        let known: Vec<&str> = self.contexts.iter().map(|c| c.name.as_str()).collect();
        ContextError::Unknown {
            name: name.to_owned(),
            path: path.to_owned(),
            known: if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            },
        }
    }

    /// The context `explicit` names (it must exist), else the current one if the file names
    /// one, else none.
    pub fn select(
        &self,
        explicit: Option<&str>,
        path: &Path,
    ) -> Result<Option<&Context>, ContextError> {
        match explicit {
            Some(name) => self
                .get(name)
                .map(Some)
                .ok_or_else(|| self.unknown(name, path)),
            None => match &self.current_context {
                Some(name) => {
                    self.get(name)
                        .map(Some)
                        .ok_or_else(|| ContextError::DanglingCurrent {
                            name: name.clone(),
                            path: path.to_owned(),
                        })
                }
                None => Ok(None),
            },
        }
    }

    /// Adds `context`, or replaces the one of the same name.
    pub fn upsert(&mut self, context: Context) {
        match self.contexts.iter_mut().find(|c| c.name == context.name) {
            Some(existing) => *existing = context,
            None => self.contexts.push(context),
        }
    }
}

/// Loads the config file and picks the context for a remote command: `explicit` (from
/// `--arbor-context` / `ARBOR_CONTEXT`), else the current one. No file and no explicit name
/// is no context.
pub fn selected(explicit: Option<&str>) -> Result<Option<Context>, ContextError> {
    let path = match config_path() {
        Ok(path) => path,
        Err(error) if explicit.is_some() => return Err(error),
        Err(_) => return Ok(None),
    };
    let config = ArborConfig::load(&path)?;
    Ok(config.select(explicit, &path)?.cloned())
}

/// Writes `context` into the config file and makes it current.
pub fn save_as_current(context: Context) -> Result<PathBuf, ContextError> {
    let path = config_path()?;
    let mut config = ArborConfig::load(&path)?;
    config.current_context = Some(context.name.clone());
    config.upsert(context);
    config.save(&path)?;
    Ok(path)
}

#[derive(Debug, Args)]
pub struct ContextArgs {
    #[command(subcommand)]
    command: ContextCommand,
}

#[derive(Debug, Subcommand)]
enum ContextCommand {
    /// List the contexts of the config file; `*` marks the current one.
    List(OutputArgs),
    /// Print one context (the current one without NAME).
    Show {
        name: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Make NAME the current context.
    Use { name: String },
    /// Create or change a context; only the settings given change.
    Set(Box<SetArgs>),
    /// Remove a context.
    Delete { name: String },
}

#[derive(Debug, Args)]
struct SetArgs {
    name: String,
    #[arg(long)]
    gitsync_addr: Option<String>,
    #[arg(long)]
    hierarchy_addr: Option<String>,
    #[arg(long)]
    observer_addr: Option<String>,
    #[arg(long)]
    policy_addr: Option<String>,
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    #[arg(long)]
    tls_key: Option<PathBuf>,
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[arg(long)]
    kube_context: Option<String>,
    #[arg(long)]
    arbor_namespace: Option<String>,
    #[arg(long)]
    release: Option<String>,
    /// Make it the current context too.
    #[arg(long)]
    current: bool,
}

pub fn run(args: &ContextArgs) -> anyhow::Result<()> {
    let path = config_path()?;
    let mut config = ArborConfig::load(&path)?;
    match &args.command {
        ContextCommand::List(output) => list(&config, output.format)?,
        ContextCommand::Show { name, output } => {
            let context = match name {
                Some(name) => config
                    .get(name)
                    .ok_or_else(|| config.unknown(name, &path))?,
                None => config.select(None, &path)?.ok_or_else(|| {
                    anyhow::anyhow!(
                        "{} names no current context; choose one with `arborctl context use NAME`",
                        path.display()
                    )
                })?,
            };
            match output.format {
                Format::Table => print!("{}", serde_saphyr::to_string(context)?),
                format => print_structured(format, &serde_json::to_value(context)?)?,
            }
        }
        ContextCommand::Use { name } => {
            if config.get(name).is_none() {
                return Err(config.unknown(name, &path).into());
            }
            config.current_context = Some(name.clone());
            config.save(&path)?;
            println!("Switched to context {name:?}.");
        }
        ContextCommand::Set(set) => {
            let mut context = config.get(&set.name).cloned().unwrap_or_else(|| Context {
                name: set.name.clone(),
                ..Context::default()
            });
            let replace = |slot: &mut Option<String>, value: &Option<String>| {
                if value.is_some() {
                    slot.clone_from(value);
                }
            };
            replace(&mut context.gitsync_addr, &set.gitsync_addr);
            replace(&mut context.hierarchy_addr, &set.hierarchy_addr);
            replace(&mut context.observer_addr, &set.observer_addr);
            replace(&mut context.policy_addr, &set.policy_addr);
            replace(&mut context.kube_context, &set.kube_context);
            replace(&mut context.arbor_namespace, &set.arbor_namespace);
            replace(&mut context.release, &set.release);
            for (slot, value) in [
                (&mut context.tls_cert, &set.tls_cert),
                (&mut context.tls_key, &set.tls_key),
                (&mut context.tls_ca, &set.tls_ca),
                (&mut context.kubeconfig, &set.kubeconfig),
            ] {
                if let Some(value) = value {
                    *slot = Some(std::path::absolute(value)?);
                }
            }
            config.upsert(context);
            if set.current || config.current_context.is_none() {
                config.current_context = Some(set.name.clone());
            }
            config.save(&path)?;
            println!("Context {:?} written to {}.", set.name, path.display());
        }
        ContextCommand::Delete { name } => {
            if config.get(name).is_none() {
                return Err(config.unknown(name, &path).into());
            }
            config.contexts.retain(|context| &context.name != name);
            if config.current_context.as_deref() == Some(name.as_str()) {
                config.current_context = None;
            }
            config.save(&path)?;
            println!("Context {name:?} deleted.");
        }
    }
    Ok(())
}

fn list(config: &ArborConfig, format: Format) -> anyhow::Result<()> {
    let is_current = |context: &Context| config.current_context.as_deref() == Some(&context.name);
    if format != Format::Table {
        let contexts: Vec<_> = config
            .contexts
            .iter()
            .map(|context| {
                let mut value = serde_json::to_value(context).unwrap_or_default();
                value["current"] = json!(is_current(context));
                value
            })
            .collect();
        return print_structured(format, &json!({ "contexts": contexts }));
    }
    if config.contexts.is_empty() {
        println!("No contexts.");
        return Ok(());
    }
    let mut table = Table::new(&["CURRENT", "NAME", "GITSYNC", "KUBECONFIG"]);
    for context in &config.contexts {
        table.row(vec![
            if is_current(context) { "*" } else { "" }.to_owned(),
            context.name.clone(),
            context
                .gitsync_addr
                .clone()
                .unwrap_or_else(|| "-".to_owned()),
            context
                .kubeconfig
                .as_ref()
                .map(|path| path.display().to_string())
                .unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(name: &str, gitsync: &str) -> Context {
        Context {
            name: name.to_owned(),
            gitsync_addr: Some(gitsync.to_owned()),
            ..Context::default()
        }
    }

    #[test]
    fn a_saved_config_loads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("config.yaml");
        let mut config = ArborConfig::default();
        config.upsert(context("a", "https://a:1"));
        config.upsert(context("b", "https://b:1"));
        config.current_context = Some("b".into());
        config.save(&path).unwrap();
        assert_eq!(ArborConfig::load(&path).unwrap(), config);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the file names private keys: {mode:o}");
    }

    #[test]
    fn upsert_replaces_a_context_of_the_same_name() {
        let mut config = ArborConfig::default();
        config.upsert(context("a", "https://old:1"));
        config.upsert(context("a", "https://new:1"));
        assert_eq!(config.contexts.len(), 1);
        assert_eq!(
            config.contexts[0].gitsync_addr.as_deref(),
            Some("https://new:1")
        );
    }

    #[test]
    fn select_prefers_the_explicit_name_then_the_current_one() {
        let path = Path::new("/config.yaml");
        let mut config = ArborConfig::default();
        assert_eq!(config.select(None, path).unwrap(), None);
        config.upsert(context("a", "https://a:1"));
        config.upsert(context("b", "https://b:1"));
        config.current_context = Some("a".into());
        assert_eq!(config.select(None, path).unwrap().unwrap().name, "a");
        assert_eq!(config.select(Some("b"), path).unwrap().unwrap().name, "b");
        let error = config.select(Some("c"), path).unwrap_err().to_string();
        assert_eq!(error, "no context \"c\" in /config.yaml (contexts: a, b)");
    }

    #[test]
    fn a_current_context_that_does_not_exist_is_an_error_not_the_defaults() {
        let config = ArborConfig {
            current_context: Some("gone".into()),
            contexts: vec![],
        };
        let error = config.select(None, Path::new("/c.yaml")).unwrap_err();
        assert!(
            matches!(error, ContextError::DanglingCurrent { .. }),
            "{error}"
        );
    }

    #[test]
    fn unknown_keys_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "contexts:\n  - name: a\n    gitsync-adr: https://x:1\n",
        )
        .unwrap();
        let error = ArborConfig::load(&path).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("gitsync-adr"), "{error}");
    }

    #[test]
    fn a_missing_or_empty_file_is_an_empty_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        assert_eq!(ArborConfig::load(&path).unwrap(), ArborConfig::default());
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(ArborConfig::load(&path).unwrap(), ArborConfig::default());
    }
}
