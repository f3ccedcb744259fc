//! The rendered chart against an API server: every object `helm template` renders is applied
//! to arbor-kube-emu with arbor-testkit's server-side apply (the release namespace first, the
//! CRDs next, the webhook configuration last), and what the cluster then serves is checked:
//! Arbor's kinds in discovery, the webhook configuration read back with its CA bundle.
//!
//! The emulator does not serve `policy/v1`, so the render leaves the PodDisruptionBudgets out
//! (their shape is checked by `objects.rs`). Whether the RBAC the chart grants covers the
//! requests each controller makes waits for the end-to-end suite, which runs the binaries
//! against the emulator's request accounting.

mod common;

use anyhow::{Context, bail};
use arbor_kube_emu::KubeEmu;
use arbor_testkit::cluster::{apply, ensure_namespace};
use common::NAMESPACE;
use common::manifest::{Manifest, Rendered, render};
use common::value_sets::ValueSet;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, GroupVersionKind};
use kube::discovery::{Discovery, Scope};

/// The order a person applying the render would follow: definitions before their objects,
/// and webhook configurations last, since once stored the API server calls the webhook on
/// every write and no webhook runs here.
fn apply_order(manifest: &Manifest) -> u8 {
    match manifest.kind() {
        "CustomResourceDefinition" => 0,
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => 2,
        _ => 1,
    }
}

fn emulator_render() -> Rendered {
    render(&ValueSet::new(
        "applied to arbor-kube-emu",
        &["podDisruptionBudget.enabled=false"],
    ))
}

#[tokio::test]
async fn the_rendered_chart_applies_and_its_kinds_and_webhook_are_served() -> anyhow::Result<()> {
    let rendered = emulator_render();
    let emu = KubeEmu::start().await?;
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml()).await?;

    ensure_namespace(&client, NAMESPACE).await?;
    let mut manifests: Vec<&Manifest> = rendered.manifests.iter().collect();
    manifests.sort_by_key(|manifest| apply_order(manifest));
    for manifest in &manifests {
        let stored = apply(&client, &manifest.object, None)
            .await
            .with_context(|| manifest.describe())?;
        if stored.metadata.uid.is_none() {
            bail!("{} was applied but has no uid", manifest.describe());
        }
    }

    let crds: Vec<CustomResourceDefinition> = rendered.typed_of_kind("CustomResourceDefinition");
    assert!(!crds.is_empty(), "the render holds no CRD");
    let groups: Vec<&str> = crds.iter().map(|crd| crd.spec.group.as_str()).collect();
    let discovery = Discovery::new(client.clone()).filter(&groups).run().await?;
    for crd in &crds {
        for version in crd.spec.versions.iter().filter(|version| version.served) {
            let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
            let (resource, capabilities) = discovery.resolve_gvk(&gvk).unwrap_or_else(|| {
                panic!("{gvk:?} of CRD {:?} is not in discovery", crd.metadata.name)
            });
            assert_eq!(resource.plural, crd.spec.names.plural, "{gvk:?}");
            let expected_scope = if crd.spec.scope == "Namespaced" {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
            assert_eq!(capabilities.scope, expected_scope, "{gvk:?}");
        }
    }

    let configurations: Vec<ValidatingWebhookConfiguration> =
        rendered.typed_of_kind("ValidatingWebhookConfiguration");
    assert!(
        !configurations.is_empty(),
        "the render holds no webhook configuration"
    );
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for configuration in configurations {
        let name = configuration.metadata.name.clone().unwrap_or_default();
        let stored = api
            .get(&name)
            .await
            .with_context(|| format!("reading back {name}"))?;
        let rendered_hooks = configuration.webhooks.unwrap_or_default();
        let stored_hooks = stored.webhooks.unwrap_or_default();
        assert_eq!(
            stored_hooks
                .iter()
                .map(|hook| &hook.name)
                .collect::<Vec<_>>(),
            rendered_hooks
                .iter()
                .map(|hook| &hook.name)
                .collect::<Vec<_>>(),
            "{name}: the webhooks read back"
        );
        for (stored_hook, rendered_hook) in stored_hooks.iter().zip(&rendered_hooks) {
            let ca_bundle = stored_hook.client_config.ca_bundle.clone();
            assert!(
                ca_bundle
                    .as_ref()
                    .is_some_and(|bundle| !bundle.0.is_empty()),
                "{name}/{}: no caBundle read back",
                stored_hook.name
            );
            assert_eq!(
                ca_bundle, rendered_hook.client_config.ca_bundle,
                "{name}/{}",
                stored_hook.name
            );
            assert_eq!(
                stored_hook.client_config.service, rendered_hook.client_config.service,
                "{name}/{}: the Service it calls",
                stored_hook.name
            );
        }
    }
    emu.shutdown().await;
    Ok(())
}
