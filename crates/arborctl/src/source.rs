//! The arguments that name a source on disk, shared by the offline commands.

use std::path::PathBuf;

use anyhow::{Context, bail};
use arbor_policy::layout::{DeclaredState, Layout, Scope, ScopeTable, SourceError};
use arbor_policy::object::GroupKind;
use arbor_source::LoadError;
use arbor_source::{LoadOptions, load};
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Every YAML/JSON object in the tree (Faros).
    Flat,
    /// system/, cluster/ and namespaces/ with abstract namespaces (Nomos).
    Hierarchical,
}

impl From<LayoutArg> for Layout {
    fn from(layout: LayoutArg) -> Self {
        match layout {
            LayoutArg::Flat => Layout::Flat,
            LayoutArg::Hierarchical => Layout::Hierarchical,
        }
    }
}

#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The repository checkout.
    pub dir: PathBuf,
    /// How the repository is laid out.
    #[arg(long, value_enum, default_value_t = LayoutArg::Hierarchical)]
    pub layout: LayoutArg,
    /// The source's directory inside the repository.
    #[arg(long, default_value = "")]
    pub sub_path: String,
    /// Ask this cluster (its kubeconfig) which kinds it serves, so that a kind the repository
    /// does not declare by a CustomResourceDefinition is placed by the scope the cluster gives
    /// it. Without it, a built-in table of the Kubernetes kinds (removed ones included) is used.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The context of --kubeconfig; its current context when absent.
    #[arg(long, requires = "kubeconfig")]
    pub context: Option<String>,
}

impl SourceArgs {
    /// Loads the source. When it is invalid, prints every error to stdout, one per line, and
    /// fails with their count.
    pub fn load(&self) -> anyhow::Result<DeclaredState> {
        match self.read()? {
            Ok(state) => Ok(state),
            Err(errors) => {
                for error in &errors {
                    println!("{error}");
                }
                bail!("{} error(s) in {}", errors.len(), self.dir.display())
            }
        }
    }

    /// Reads the source: its declared state, or every error it has (files that cannot be read
    /// at all are the outer error).
    pub fn read(&self) -> anyhow::Result<Result<DeclaredState, Vec<SourceError>>> {
        let known_scopes = match &self.kubeconfig {
            Some(kubeconfig) => served_scopes(kubeconfig, self.context.as_deref())?,
            None => ScopeTable::default(),
        };
        let options = LoadOptions {
            layout: self.layout.into(),
            sub_path: self.sub_path.clone(),
            known_scopes,
        };
        match load(&self.dir, &options) {
            Ok(state) => Ok(Ok(state)),
            Err(LoadError::Invalid(errors)) => Ok(Err(errors)),
            Err(io) => Err(io).with_context(|| format!("reading {}", self.dir.display())),
        }
    }
}

/// The scope of every kind the cluster of `kubeconfig` serves, from its discovery.
fn served_scopes(
    kubeconfig: &std::path::Path,
    context: Option<&str>,
) -> anyhow::Result<ScopeTable> {
    let discover = async {
        let config = arbor_runtime::client::config_for(Some(kubeconfig), context).await?;
        let client = arbor_runtime::client::with_retries(config)?;
        let discovery = kube::Discovery::new(client)
            .run()
            .await
            .context("asking the cluster which kinds it serves")?;
        let mut kinds = Vec::new();
        for group in discovery.groups() {
            for (resource, capabilities) in group.recommended_resources() {
                let scope = match capabilities.scope {
                    kube::discovery::Scope::Namespaced => Scope::Namespaced,
                    kube::discovery::Scope::Cluster => Scope::Cluster,
                };
                kinds.push((GroupKind::new(&resource.group, &resource.kind), scope));
            }
        }
        anyhow::Ok(ScopeTable::served(kinds))
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(discover)
        .with_context(|| {
            format!(
                "reading the kinds served by the cluster of {}",
                kubeconfig.display()
            )
        })
}
