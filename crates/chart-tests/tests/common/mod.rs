//! Shared support of the chart tests: where things are, how helm is run, how its output is
//! read. Each test binary uses part of it, so unused items are expected here.
#![allow(dead_code)]

pub mod helm;
pub mod manifest;
pub mod typed;
pub mod value_sets;
pub mod workload;

use std::path::PathBuf;

/// The workspace root (this crate lives at `crates/chart-tests`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// `charts/arbor`.
pub fn chart_dir() -> PathBuf {
    workspace_root().join("charts/arbor")
}

/// The namespace every test renders the chart into.
pub const NAMESPACE: &str = "arbor-system";

/// The release name every test renders the chart as.
pub const RELEASE: &str = "arbor";

/// The components the chart deploys.
pub const COMPONENTS: [&str; 4] = ["gitsync", "hierarchy", "observer", "webhook"];
