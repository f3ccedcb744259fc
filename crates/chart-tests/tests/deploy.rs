//! `deploy/arbor.yaml` is the chart rendered by `make chart`: default values plus
//! `deploy/render-values.yaml` (cert-manager certificates, so the output is deterministic).

mod common;

use common::{helm, workspace_root};

/// The values `make chart` adds to the defaults.
const RENDER_VALUES: &str = "deploy/render-values.yaml";
/// The rendered manifests.
const RENDERED: &str = "deploy/arbor.yaml";

fn render_like_make_chart() -> String {
    let values = workspace_root().join(RENDER_VALUES);
    helm::template(&["--values".to_owned(), values.display().to_string()])
        .unwrap_or_else(|error| panic!("{error:#}"))
}

#[test]
fn rendered_manifests_in_deploy_are_up_to_date() {
    let path = workspace_root().join(RENDERED);
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}; run `make chart`", path.display()));
    let fresh = render_like_make_chart();
    if committed != fresh {
        let (line, (was, now)) = committed
            .lines()
            .chain(std::iter::repeat("<end of file>"))
            .zip(fresh.lines().chain(std::iter::repeat("<end of file>")))
            .enumerate()
            .find(|(_, (was, now))| was != now)
            .unwrap_or((0, ("", "")));
        panic!(
            "{RENDERED} is stale: run `make chart`. First difference at line {}:\n  committed: {was}\n  rendered:  {now}",
            line + 1
        );
    }
}

#[test]
fn rendering_twice_gives_the_same_bytes() {
    assert_eq!(
        render_like_make_chart(),
        render_like_make_chart(),
        "{RENDER_VALUES} must make the render deterministic"
    );
}

#[test]
fn rendered_manifests_hold_no_private_key() {
    let rendered = render_like_make_chart();
    assert!(
        !rendered.contains("PRIVATE KEY") && !rendered.contains("tls.key:"),
        "{RENDERED} would commit key material"
    );
}
