//! The images in `docker/`: one per binary, each building a package and binary the workspace
//! has, running as the user the chart's securityContext expects, and on a base image that
//! has the shared libraries the binary links.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use common::{COMPONENTS, workspace_root};
use serde_json::Value;

/// The binaries that get an image: the four controllers and the CLI.
const IMAGES: [&str; 5] = [
    "arbor-gitsync",
    "arbor-hierarchy",
    "arbor-observer",
    "arbor-webhook",
    "arborctl",
];

/// What a Dockerfile says about its binary.
#[derive(Debug)]
struct Dockerfile {
    path: PathBuf,
    package: String,
    bin: String,
    runtime_base: String,
    user: String,
}

fn dockerfile(image: &str) -> Dockerfile {
    let path = workspace_root().join(format!("docker/Dockerfile.{image}"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
    let words: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(str::split_whitespace)
        .collect();
    let after = |flag: &str| -> String {
        let build = words
            .windows(2)
            .position(|pair| pair == ["cargo", "build"])
            .unwrap_or_else(|| panic!("{} runs no `cargo build`", path.display()));
        words[build..]
            .windows(2)
            .find(|pair| pair[0] == flag)
            .map(|pair| pair[1].to_owned())
            .unwrap_or_else(|| panic!("{}: `cargo build` has no {flag}", path.display()))
    };
    let last_instruction = |instruction: &str| -> String {
        text.lines()
            .filter_map(|line| line.trim().strip_prefix(instruction))
            .filter_map(|rest| rest.split_whitespace().next())
            .next_back()
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{} has no {instruction}", path.display()))
    };
    Dockerfile {
        package: after("-p"),
        bin: after("--bin"),
        runtime_base: last_instruction("FROM "),
        user: last_instruction("USER "),
        path,
    }
}

/// The platform rustc builds for here: the images build for the platform they run on, and a
/// fresh machine's cargo cache holds only the crates of this one.
fn host_triple() -> String {
    let output = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned()))
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_owned()
}

/// `cargo metadata` for the workspace. With dependencies it is filtered to the host platform:
/// unfiltered, cargo needs the crates of every target platform (android_system_properties,
/// windows-sys, ...), which a machine that only built for its host has never downloaded.
fn cargo_metadata(no_deps: bool) -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(workspace_root());
    if no_deps {
        command.arg("--no-deps");
    } else {
        command.args(["--filter-platform", &host_triple()]);
    }
    let output = command.output().expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata fails: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// The workspace's packages and, for each, its binary targets.
fn workspace_binaries() -> BTreeMap<String, BTreeSet<String>> {
    let metadata = cargo_metadata(true);
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let bins = package["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|target| {
                    target["kind"]
                        .as_array()
                        .is_some_and(|kinds| kinds.contains(&Value::from("bin")))
                })
                .filter_map(|target| target["name"].as_str().map(str::to_owned))
                .collect();
            (
                package["name"].as_str().unwrap_or_default().to_owned(),
                bins,
            )
        })
        .collect()
}

#[test]
fn every_image_has_a_dockerfile_including_each_chart_component() {
    for component in COMPONENTS {
        assert!(
            IMAGES.contains(&format!("arbor-{component}").as_str()),
            "{component} has no image"
        );
    }
    for image in IMAGES {
        let dockerfile = dockerfile(image);
        assert_eq!(
            dockerfile.bin,
            image,
            "{} builds another binary",
            dockerfile.path.display()
        );
    }
}

#[test]
fn every_dockerfile_builds_a_package_and_binary_the_workspace_has() {
    let binaries = workspace_binaries();
    for image in IMAGES {
        let dockerfile = dockerfile(image);
        let bins = binaries.get(&dockerfile.package).unwrap_or_else(|| {
            panic!(
                "{}: no workspace package {} (packages: {:?})",
                dockerfile.path.display(),
                dockerfile.package,
                binaries.keys().collect::<Vec<_>>()
            )
        });
        assert!(
            bins.contains(&dockerfile.bin),
            "{}: package {} has no binary {} (binaries: {bins:?})",
            dockerfile.path.display(),
            dockerfile.package,
            dockerfile.bin
        );
    }
}

#[test]
fn every_image_runs_as_the_user_the_chart_expects() {
    for image in IMAGES {
        let dockerfile = dockerfile(image);
        assert!(
            dockerfile.user == "65532" || dockerfile.user == "65532:65532",
            "{}: USER {} is not the chart's runAsUser 65532",
            dockerfile.path.display(),
            dockerfile.user
        );
    }
}

/// Packages reachable from `root` through normal (non-dev, non-build) dependencies.
fn normal_dependency_closure(metadata: &Value, root: &str) -> BTreeSet<String> {
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve.nodes");
    let id_of_name = |name: &str| -> Option<String> {
        metadata["packages"].as_array()?.iter().find_map(|package| {
            (package["name"] == name && package["source"].is_null())
                .then(|| package["id"].as_str().map(str::to_owned))
                .flatten()
        })
    };
    let root_id = id_of_name(root).unwrap_or_else(|| panic!("no workspace package {root}"));
    let mut seen = BTreeSet::new();
    let mut pending = vec![root_id];
    while let Some(id) = pending.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let node = nodes.iter().find(|node| node["id"] == id.as_str());
        for dep in node
            .and_then(|node| node["deps"].as_array())
            .into_iter()
            .flatten()
        {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|kind| kind["kind"].is_null());
            if normal && let Some(dep_id) = dep["pkg"].as_str() {
                pending.push(dep_id.to_owned());
            }
        }
    }
    seen
}

#[test]
fn distroless_images_hold_binaries_that_do_not_link_openssl() {
    let metadata = cargo_metadata(false);
    let package_name = |id: &str| -> String {
        metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|package| package["id"] == id)
            .and_then(|package| package["name"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut checked = 0;
    for image in IMAGES {
        let dockerfile = dockerfile(image);
        let links_openssl = normal_dependency_closure(&metadata, &dockerfile.package)
            .iter()
            .any(|id| package_name(id) == "openssl-sys");
        if dockerfile.runtime_base.contains("distroless") {
            checked += 1;
            assert!(
                !links_openssl,
                "{}: {} links OpenSSL (openssl-sys) but distroless/cc has no libssl3; use the \
                 debian:bookworm-slim runtime of Dockerfile.arbor-gitsync",
                dockerfile.path.display(),
                dockerfile.package
            );
        } else {
            assert!(
                links_openssl,
                "{}: {} does not link OpenSSL, so it belongs on distroless/cc, not {}",
                dockerfile.path.display(),
                dockerfile.package,
                dockerfile.runtime_base
            );
        }
    }
    assert!(checked > 0, "no image is distroless");
}
