//! `arborctl`, the Arbor operator's command-line tool.
//!
//! Offline commands work on a repository checked out on disk: `vet` reports every error of a
//! source at once, `hydrate` writes the exact objects it would apply. Each subcommand lives in
//! its own module with its `Args` and a `run` function; this file only dispatches.

mod completions;
mod crds;
mod hydrate;
mod source;
mod vet;

use clap::{Parser, Subcommand};

/// Arbor: keep clusters in the state that git and a namespace tree declare.
#[derive(Debug, Parser)]
#[command(name = "arborctl", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a repository and print every error (file, object, code, message).
    Vet(vet::VetArgs),
    /// Write the exact objects a repository would apply, one file per object.
    Hydrate(hydrate::HydrateArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Write the CustomResourceDefinitions of every Arbor kind as YAML.
    Crds(crds::CrdsArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Vet(args) => vet::run(&args),
        Command::Hydrate(args) => hydrate::run(&args),
        Command::Completions(args) => completions::run(&args),
        Command::Crds(args) => crds::run(&args),
    }
}
