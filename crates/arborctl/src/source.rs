//! The arguments that name a source on disk, shared by the offline commands.

use std::path::PathBuf;

use anyhow::{Context, bail};
use arbor_gitsync::error::LoadError;
use arbor_gitsync::source::{LoadOptions, load};
use arbor_policy::layout::{DeclaredState, Layout};
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
}

impl SourceArgs {
    /// Loads the source. When it is invalid, prints every error to stdout, one per line, and
    /// fails with their count.
    pub fn load(&self) -> anyhow::Result<DeclaredState> {
        let options = LoadOptions {
            layout: self.layout.into(),
            sub_path: self.sub_path.clone(),
        };
        match load(&self.dir, &options) {
            Ok(state) => Ok(state),
            Err(LoadError::Invalid(errors)) => {
                for error in &errors {
                    println!("{error}");
                }
                bail!("{} error(s) in {}", errors.len(), self.dir.display())
            }
            Err(io) => Err(io).with_context(|| format!("reading {}", self.dir.display())),
        }
    }
}
