//! `arborctl`, the Arbor operator's command-line tool and reference gRPC client.
//!
//! Offline commands work on a repository checked out on disk: `vet` reports every error of a
//! source at once, `hydrate` writes the exact objects it would apply. Remote commands ask the
//! running controllers over gRPC: `status`, `sync` and `diff` (arbor-gitsync), `tree` (arbor-hierarchy),
//! `explain` (both), `drift` (arbor-observer). They find the controllers through the current
//! context of the arborctl config file ([`context`]; `arborctl demo` writes one), which flags
//! and `ARBOR_*` variables override ([`connect`]); with only a kubeconfig they reach the
//! controllers through the API server's port-forward ([`cluster`]). `-o json|yaml` prints the
//! answer for scripts.
//!
//! The same program is installed as `kubectl-arbor`, so with it on the `PATH` kubectl runs it as
//! a plugin: `kubectl arbor status`, `kubectl arbor tree team-a`,
//! `kubectl arbor explain ConfigMap/team-a/settings`. The namespace-tree commands of
//! `kubectl-accurate` (`list`, `ns`, `template`, `sub`, module `namespaces`) work through the
//! API server with the user's kubeconfig.
//!
//! Each subcommand lives in its own module with its `Args` and a `run` function; this file only
//! dispatches.

pub mod cluster;
mod completions;
pub mod connect;
pub mod context;
mod crds;
mod demo;
mod diff;
mod drift;
mod explain;
mod hydrate;
mod namespaces;
pub mod output;
mod review;
mod source;
mod status;
mod sync;
mod tree;
mod vet;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Arbor: keep clusters in the state that git and a namespace tree declare.
#[derive(Debug, Parser)]
#[command(name = "arborctl", version, about)]
pub struct Cli {
    /// On errors, print the whole chain of causes.
    #[arg(short, long, global = true)]
    verbose: bool,

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
    /// Show every source arbor-gitsync watches: commit, counters, conditions, errors.
    Status(status::StatusArgs),
    /// Draw the namespace tree (roots, sub-namespaces, templates and their instances).
    Tree(tree::TreeArgs),
    /// Explain why Arbor creates, updates, deletes or leaves alone one object.
    Explain(explain::ExplainArgs),
    /// Stream drift as arbor-observer sees it, until Ctrl-C or --timeout.
    Drift(drift::DriftArgs),
    /// Ask arbor-webhook what it would answer to a change, without making it (exit 1: denied).
    Review(review::ReviewArgs),
    /// Fetch and sync a source now, and print the commit it synced.
    Sync(sync::SyncArgs),
    /// What syncing a revision or a local directory would create, update and delete (exit 1:
    /// changes), without writing anything.
    Diff(diff::DiffArgs),
    /// List, show, choose and edit the contexts of the arborctl config file.
    Context(context::ContextArgs),
    /// Run Arbor locally: an emulated API server, the four controllers and example repos.
    Demo(demo::DemoArgs),
    /// Print the namespace tree from the API server (as `kubectl accurate list`).
    List(namespaces::ListArgs),
    /// Describe a namespace or set its type (root, template, none).
    Ns(namespaces::NsArgs),
    /// List templates, or set or unset the template a namespace follows.
    Template(namespaces::TemplateArgs),
    /// Create, delete, move, graft or cut sub-namespaces.
    Sub(namespaces::SubArgs),
}

/// Parses the command line, runs the command and reports a failure on stderr. `bin_name` is
/// how usage lines name the program: `arborctl`, or `kubectl arbor` for the plugin.
pub fn main(bin_name: &'static str) -> ExitCode {
    let matches = Cli::command().bin_name(bin_name).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let answers_yes_or_no = cli.command.answers_yes_or_no();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error)
            if error.downcast_ref::<review::Denied>().is_some()
                || error.downcast_ref::<diff::Changes>().is_some() =>
        {
            ExitCode::from(1)
        }
        Err(error) => {
            connect::report(&error, cli.verbose);
            // A command whose exit code is its answer keeps 1 for "no"; failing to answer is 2,
            // as with `kubectl diff`.
            if answers_yes_or_no {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

impl Command {
    /// Commands whose exit code 1 is an answer (denied, changes), not a failure.
    fn answers_yes_or_no(&self) -> bool {
        matches!(self, Self::Review(_) | Self::Diff(_))
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Vet(args) => vet::run(&args),
        Command::Hydrate(args) => hydrate::run(&args),
        Command::Completions(args) => completions::run(&args),
        Command::Crds(args) => crds::run(&args),
        Command::Status(args) => remote(status::run(&args)),
        Command::Tree(args) => remote(tree::run(&args)),
        Command::Explain(args) => remote(explain::run(&args)),
        Command::Drift(args) => remote(drift::run(&args)),
        Command::Review(args) => remote(review::run(&args)),
        Command::Sync(args) => remote(sync::run(&args)),
        Command::Diff(args) => remote(diff::run(&args)),
        Command::Context(args) => context::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::List(args) => remote(namespaces::list(&args)),
        Command::Ns(args) => remote(namespaces::ns(&args)),
        Command::Template(args) => remote(namespaces::template(&args)),
        Command::Sub(args) => remote(namespaces::sub(&args)),
    }
}

/// Remote commands run on a single-threaded runtime: one request (or stream) at a time.
fn remote(command: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(command)
}
