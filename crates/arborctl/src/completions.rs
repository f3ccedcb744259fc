//! `arborctl completions SHELL`: print a completion script for the shell.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::Cli;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: Shell,
}

pub fn run(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "arborctl", &mut std::io::stdout());
    Ok(())
}
