//! `arborctl vet DIR`: validate a repository the way arbor-gitsync will, offline.

use clap::Args;

use crate::source::SourceArgs;

#[derive(Debug, Args)]
pub struct VetArgs {
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Prints every error and fails when there is any; otherwise summarises what is declared.
pub fn run(args: &VetArgs) -> anyhow::Result<()> {
    let state = args.source.load()?;
    println!(
        "{}: valid, {} object(s) in {} namespace(s), {} declared kind(s)",
        args.source.dir.display(),
        state.objects.len(),
        state.namespaces.len(),
        state.kinds.len()
    );
    Ok(())
}
