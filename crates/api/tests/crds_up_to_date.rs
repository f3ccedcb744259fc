//! The CRD YAML committed under `charts/arbor/crds/` is what the types render today.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn committed_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/arbor/crds")
}

#[test]
fn committed_crds_match_the_types() -> anyhow::Result<()> {
    let dir = committed_dir();
    let rendered = arbor_api::crds::render_all()?;
    let mut stale = Vec::new();
    for (file, yaml) in &rendered {
        match std::fs::read_to_string(dir.join(file)) {
            Ok(committed) if committed == *yaml => {}
            Ok(_) => stale.push(format!("{file} differs")),
            Err(error) => stale.push(format!("{file} cannot be read: {error}")),
        }
    }
    let expected: BTreeSet<&str> = rendered.iter().map(|(file, _)| file.as_str()).collect();
    for entry in std::fs::read_dir(&dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".arbor.dev.yaml") && !expected.contains(name.as_str()) {
            stale.push(format!("{name} is not an Arbor CRD any more"));
        }
    }
    assert!(
        stale.is_empty(),
        "CRD YAML in {} is stale; run `make crds`:\n{}",
        dir.display(),
        stale.join("\n")
    );
    Ok(())
}

#[test]
fn committed_domain_crd_template_matches_the_types() -> anyhow::Result<()> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../charts/arbor")
        .join(arbor_api::crds::DOMAIN_TEMPLATE);
    let committed = std::fs::read_to_string(&path)?;
    assert!(
        committed == arbor_api::crds::render_domain_template()?,
        "{} is stale; run `make crds`",
        path.display()
    );
    Ok(())
}
