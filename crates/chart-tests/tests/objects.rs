//! Every rendered object is a valid object of its Kubernetes kind, with no field its type
//! does not know.

mod common;

use common::manifest::{Manifest, render};
use common::typed::{self, GENERIC_KINDS};
use common::value_sets;
use serde_json::json;

#[test]
fn every_rendered_object_deserialises_into_its_kubernetes_type_without_unknown_fields() {
    let mut problems = Vec::new();
    for set in value_sets::all() {
        let rendered = render(&set);
        assert!(
            !rendered.manifests.is_empty(),
            "[{}] renders nothing",
            set.name
        );
        problems.extend(
            rendered
                .manifests
                .iter()
                .filter_map(|manifest| typed::check(manifest).err())
                .map(|problem| format!("[{}] {problem}", set.name)),
        );
    }
    assert!(
        problems.is_empty(),
        "invalid objects:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_other_projects_kinds_appear_only_in_the_sets_that_enable_them() {
    let is_generic =
        |manifest: &&Manifest| GENERIC_KINDS.contains(&(manifest.api_version(), manifest.kind()));
    let defaults = render(&value_sets::defaults());
    assert_eq!(defaults.manifests.iter().filter(is_generic).count(), 0);
    let full = render(&value_sets::cert_manager_monitoring_network_policies());
    for (api_version, kind) in GENERIC_KINDS {
        assert!(
            full.manifests
                .iter()
                .any(|manifest| manifest.api_version() == api_version && manifest.kind() == kind),
            "[{}] renders no {api_version} {kind}",
            full.set
        );
    }
}

fn deployment_with_container(container: serde_json::Value) -> Manifest {
    Manifest {
        source: "test".to_owned(),
        object: json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "probe"},
            "spec": {
                "selector": {"matchLabels": {"app": "probe"}},
                "template": {
                    "metadata": {"labels": {"app": "probe"}},
                    "spec": {"containers": [container]}
                }
            }
        }),
    }
}

#[test]
fn the_check_names_the_path_of_a_misspelt_field() {
    let manifest = deployment_with_container(json!({
        "name": "probe",
        "image": "probe",
        "imagePullPolicyy": "Always",
    }));
    let problem = typed::check(&manifest).expect_err("a misspelt field is an error");
    assert!(
        problem.contains("unknown field .spec.template.spec.containers[0].imagePullPolicyy"),
        "{problem}"
    );
}

#[test]
fn the_check_accepts_a_valid_object_with_empty_fields() {
    let manifest = deployment_with_container(json!({
        "name": "probe",
        "image": "probe",
        "args": [],
        "env": null,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }));
    assert_eq!(typed::check(&manifest), Ok(()));
}

#[test]
fn the_check_refuses_a_kind_it_has_no_type_for() {
    let manifest = Manifest {
        source: "test".to_owned(),
        object: json!({"apiVersion": "example.invalid/v1", "kind": "Gadget", "metadata": {"name": "x"}}),
    };
    let problem = typed::check(&manifest).expect_err("an unknown kind is an error");
    assert!(problem.contains("Gadget"), "{problem}");
}
