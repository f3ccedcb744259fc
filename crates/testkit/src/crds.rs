//! The CRDs as the end-to-end and integration tests handle them beyond what the demo does:
//! installed from the committed YAML (as a user installs them, on a shared cluster), and
//! loosened so that the API server stores objects the controllers cannot read.

use std::time::Duration;

use arbor_demo::Error;
use arbor_demo::cluster::{domain_crd, install_crd_list, parse_documents};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;

/// Installs the CRD YAML files of `dir` (`charts/arbor/crds`, as a user installs them with
/// `kubectl apply -f`), plus the SubNamespace CRD of `domain` as
/// [`arbor_demo::cluster::install_crds_for_domain`] does; returns the CRDs installed.
pub async fn install_crd_files(
    client: &Client,
    dir: &std::path::Path,
    domain: &str,
    timeout: Duration,
) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io(format!("reading {}", dir.display())))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(Error::io(format!("reading {}", file.display())))?;
        for document in parse_documents(&file.display().to_string(), &text)? {
            crds.push(
                serde_json::from_value(document).map_err(|error| Error::Invalid {
                    what: format!("{} as a CustomResourceDefinition", file.display()),
                    message: error.to_string(),
                })?,
            );
        }
    }
    if crds.is_empty() {
        return Err(Error::Invalid {
            what: dir.display().to_string(),
            message: "holds no CRD YAML".to_owned(),
        });
    }
    crds.extend(domain_crd(domain));
    install_crd_list(client, &crds, timeout).await?;
    Ok(crds)
}

/// Replaces the schema of every version of the installed CRD `name` (e.g.
/// `gittracks.arbor.dev`) with one that keeps any `spec` and `status`.
///
/// Tests of "one bad object never stops a kind" need an object the API server stores but the
/// controller's Rust type cannot read. A real API server stores such objects whenever the
/// CRD's schema allows them: a CRD installed by an older or hand-edited chart, a version served
/// without structural constraints, a field inside `x-kubernetes-preserve-unknown-fields`. This
/// stands in for all of them without relying on the emulator being lenient about a schema.
pub async fn loosen_crd_schema(client: &Client, name: &str) -> Result<(), Error> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut crd = api
        .get(name)
        .await
        .map_err(Error::kube(format!("reading the CRD {name}")))?;
    let loose: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps =
        serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
        }))
        .map_err(|error| Error::Invalid {
            what: format!("the loose schema of {name}"),
            message: error.to_string(),
        })?;
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut() {
            schema.open_api_v3_schema = Some(loose.clone());
        }
        // Printer columns may point into the old schema.
        version.additional_printer_columns = None;
    }
    crd.metadata.managed_fields = None;
    api.replace(name, &kube::api::PostParams::default(), &crd)
        .await
        .map_err(Error::kube(format!("loosening the CRD {name}")))?;
    Ok(())
}
