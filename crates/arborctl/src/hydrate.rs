//! `arborctl hydrate DIR -o OUT`: write the exact objects a repository would apply.

use std::path::PathBuf;

use arbor_source::hydrate::{OutputFormat, render, write};
use clap::{Args, ValueEnum};

use crate::source::SourceArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct HydrateArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The output directory; it must not exist or be empty.
    #[arg(short, long)]
    pub output: PathBuf,
    /// The file format of the hydrated objects.
    #[arg(long, value_enum, default_value_t = FormatArg::Yaml)]
    pub format: FormatArg,
}

/// Validates the source (failing like `vet` on errors) and writes one file per object.
pub fn run(args: &HydrateArgs) -> anyhow::Result<()> {
    let state = args.source.load()?;
    let format = match args.format {
        FormatArg::Yaml => OutputFormat::Yaml,
        FormatArg::Json => OutputFormat::Json,
    };
    let files = render(&state, format)?;
    write(&args.output, &files)?;
    println!("wrote {} file(s) to {}", files.len(), args.output.display());
    Ok(())
}
