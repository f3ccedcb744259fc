//! `arborctl vet DIR`: validate a repository the way arbor-gitsync will, offline.
//!
//! A table (the default) prints each error on its own line, as gitsync reports it; `-o json|yaml`
//! prints one document, `{dir, valid, objects, namespaces, kinds, errors}`, for scripts. Either
//! way the exit code is non-zero when the repository has an error.

use anyhow::bail;
use clap::Args;
use serde_json::json;

use crate::output::{Format, OutputArgs, print_structured};
use crate::source::SourceArgs;

#[derive(Debug, Args)]
pub struct VetArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Prints every error and fails when there is any; otherwise summarises what is declared.
pub fn run(args: &VetArgs) -> anyhow::Result<()> {
    let dir = args.source.dir.display().to_string();
    if args.output.format == Format::Table {
        let state = args.source.load()?;
        println!(
            "{dir}: valid, {} object(s) in {} namespace(s), {} declared kind(s)",
            state.objects.len(),
            state.namespaces.len(),
            state.kinds.len()
        );
        return Ok(());
    }
    match args.source.read()? {
        Ok(state) => print_structured(
            args.output.format,
            &json!({
                "dir": dir, "valid": true, "objects": state.objects.len(),
                "namespaces": state.namespaces.len(), "kinds": state.kinds.len(), "errors": [],
            }),
        ),
        Err(errors) => {
            print_structured(
                args.output.format,
                &json!({"dir": dir, "valid": false, "errors": errors}),
            )?;
            bail!("{} error(s) in {dir}", errors.len())
        }
    }
}
