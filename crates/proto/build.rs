//! Generates the Rust code for `proto/arbor/v1/*.proto` with the vendored protoc, so building
//! needs no protoc installed, and writes the encoded file descriptor set for gRPC reflection.

use std::path::PathBuf;

const PROTO_FILES: [&str; 5] = [
    "arbor/v1/common.proto",
    "arbor/v1/sync.proto",
    "arbor/v1/hierarchy.proto",
    "arbor/v1/observer.proto",
    "arbor/v1/policy.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../../proto");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);

    let protos: Vec<PathBuf> = PROTO_FILES
        .iter()
        .map(|file| proto_root.join(file))
        .collect();
    // The protos live outside this package, where cargo does not look for changes by itself:
    // without these lines an edited .proto leaves the generated code stale until a clean build.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", proto_root.display());
    for proto in &protos {
        println!("cargo:rerun-if-changed={}", proto.display());
    }
    let includes = [proto_root, protoc_bin_vendored::include_path()?];
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("arbor_v1_descriptor.bin"))
        .compile_with_config(config, &protos, &includes)?;
    Ok(())
}
