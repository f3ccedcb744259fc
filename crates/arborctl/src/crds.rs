//! `arborctl crds [--out DIR]`: the CustomResourceDefinitions of every Arbor kind, as YAML.
//!
//! With `--out`, one file per CRD named `<plural>.<group>.yaml` (this is how `make crds`
//! refreshes `charts/arbor/crds/`); without, one multi-document stream on stdout, ready for
//! `kubectl apply -f -`. Files of CRDs that no longer exist are reported, not deleted: the
//! directory may hold files this command did not write.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct CrdsArgs {
    /// Directory to write to (stdout when absent)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the chart template that installs the SubNamespace CRD of the configured
    /// key domain (Accurate's or Innu's group) to this file
    #[arg(long)]
    pub domain_template: Option<PathBuf>,
}

pub fn run(args: &CrdsArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.domain_template {
        let template = arbor_api::crds::render_domain_template()?;
        if std::fs::read_to_string(path).ok().as_deref() != Some(template.as_str()) {
            std::fs::write(path, template)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    let rendered = arbor_api::crds::render_all()?;
    match &args.out {
        Some(dir) => {
            for name in write_files(dir, &rendered)? {
                eprintln!(
                    "warning: {} is not an Arbor CRD any more; delete it if nothing else needs it",
                    dir.join(name).display()
                );
            }
            Ok(())
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(multi_document(&rendered).as_bytes())?;
            Ok(())
        }
    }
}

/// Writes every CRD into `dir`; returns the names of Arbor CRD files there that were not
/// written (left from kinds that were removed).
fn write_files(dir: &Path, rendered: &[(String, String)]) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, yaml) in rendered {
        let path = dir.join(name);
        // Unchanged files are left alone so their modification time says when they last changed.
        if std::fs::read_to_string(&path).is_ok_and(|existing| existing == *yaml) {
            continue;
        }
        std::fs::write(&path, yaml).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let suffix = format!(".{}.yaml", arbor_api::crds::GROUP);
    let mut leftovers = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(&suffix) && !rendered.iter().any(|(file, _)| *file == name) {
            leftovers.push(name);
        }
    }
    leftovers.sort();
    Ok(leftovers)
}

fn multi_document(rendered: &[(String, String)]) -> String {
    rendered
        .iter()
        .map(|(_, yaml)| format!("---\n{yaml}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_file_per_crd_named_after_it() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let rendered = arbor_api::crds::render_all()?;
        let leftovers = write_files(dir.path(), &rendered)?;
        assert!(leftovers.is_empty());
        for (name, yaml) in &rendered {
            assert_eq!(std::fs::read_to_string(dir.path().join(name))?, *yaml);
        }
        assert!(dir.path().join("gittracks.arbor.dev.yaml").exists());
        Ok(())
    }

    #[test]
    fn files_of_removed_crds_are_reported_and_kept() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let old = dir.path().join("retired.arbor.dev.yaml");
        std::fs::write(&old, "kind: CustomResourceDefinition\n")?;
        std::fs::write(dir.path().join("values.yaml"), "x: 1\n")?;
        let leftovers = write_files(dir.path(), &arbor_api::crds::render_all()?)?;
        assert_eq!(leftovers, ["retired.arbor.dev.yaml"]);
        assert!(old.exists());
        Ok(())
    }

    #[test]
    fn stdout_stream_holds_every_crd_as_its_own_document() -> anyhow::Result<()> {
        let rendered = arbor_api::crds::render_all()?;
        let stream = multi_document(&rendered);
        assert_eq!(stream.matches("---\n").count(), rendered.len());
        assert!(stream.contains("name: applications.arbor.dev"));
        Ok(())
    }
}
