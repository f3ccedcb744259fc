//! The OpenAPI v3 schemas of built-in kinds, as kube-apiserver publishes them under
//! `components.schemas` (`io.k8s.api.apps.v1.Deployment`, ...), so `kubectl explain
//! deployment.spec` works. They come from k8s-openapi's types, which are generated from
//! Kubernetes' own OpenAPI document, with descriptions; the k8s-openapi release Arbor builds
//! with may describe a newer Kubernetes than the one the emulator reports, so a field added
//! since 1.32 can show up in `kubectl explain`.
//!
//! Generating them takes a while, so it happens once per process, for every group version.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// `(group, version)` → the component schemas of its built-in kinds and what they refer to.
type Documents = BTreeMap<(String, String), Map<String, Value>>;

/// The component schemas of the built-in kinds of `group`/`version`; empty when it has none.
pub fn schemas(group: &str, version: &str) -> Option<&'static Map<String, Value>> {
    static DOCUMENTS: OnceLock<Documents> = OnceLock::new();
    DOCUMENTS
        .get_or_init(generate_all)
        .get(&(group.to_owned(), version.to_owned()))
}

/// Adds `T`'s schema (and everything it refers to) to the generator; the name it is filed
/// under.
fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The k8s-openapi type of each built-in kind the emulator serves.
fn add_kind(generator: &mut SchemaGenerator, group: &str, kind: &str) -> Option<String> {
    use api::{
        admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v2 as autoscaling,
        batch::v1 as batch, certificates::v1 as certificates, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery, events::v1 as events,
        flowcontrol::v1 as flowcontrol, networking::v1 as networking, node::v1 as node,
        policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
        storage::v1 as storage,
    };
    let g = generator;
    Some(match (group, kind) {
        ("", "Namespace") => add::<core::Namespace>(g),
        ("", "ConfigMap") => add::<core::ConfigMap>(g),
        ("", "Secret") => add::<core::Secret>(g),
        ("", "ServiceAccount") => add::<core::ServiceAccount>(g),
        ("", "Service") => add::<core::Service>(g),
        ("", "Pod") => add::<core::Pod>(g),
        ("", "ResourceQuota") => add::<core::ResourceQuota>(g),
        ("", "LimitRange") => add::<core::LimitRange>(g),
        ("", "ReplicationController") => add::<core::ReplicationController>(g),
        ("", "PodTemplate") => add::<core::PodTemplate>(g),
        ("", "Event") => add::<core::Event>(g),
        ("", "Node") => add::<core::Node>(g),
        ("", "Endpoints") => add::<core::Endpoints>(g),
        ("", "PersistentVolume") => add::<core::PersistentVolume>(g),
        ("", "PersistentVolumeClaim") => add::<core::PersistentVolumeClaim>(g),
        ("apps", "Deployment") => add::<apps::Deployment>(g),
        ("apps", "ReplicaSet") => add::<apps::ReplicaSet>(g),
        ("apps", "StatefulSet") => add::<apps::StatefulSet>(g),
        ("apps", "DaemonSet") => add::<apps::DaemonSet>(g),
        ("apps", "ControllerRevision") => add::<apps::ControllerRevision>(g),
        ("batch", "Job") => add::<batch::Job>(g),
        ("batch", "CronJob") => add::<batch::CronJob>(g),
        ("rbac.authorization.k8s.io", "Role") => add::<rbac::Role>(g),
        ("rbac.authorization.k8s.io", "RoleBinding") => add::<rbac::RoleBinding>(g),
        ("rbac.authorization.k8s.io", "ClusterRole") => add::<rbac::ClusterRole>(g),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => add::<rbac::ClusterRoleBinding>(g),
        ("coordination.k8s.io", "Lease") => add::<coordination::Lease>(g),
        ("events.k8s.io", "Event") => add::<events::Event>(g),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            add::<apiextensions::CustomResourceDefinition>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            add::<admission::ValidatingWebhookConfiguration>(g)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            add::<admission::MutatingWebhookConfiguration>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            add::<admission::ValidatingAdmissionPolicy>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            add::<admission::ValidatingAdmissionPolicyBinding>(g)
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            add::<api::authorization::v1::SelfSubjectAccessReview>(g)
        }
        ("apiregistration.k8s.io", "APIService") => add::<apiregistration::APIService>(g),
        ("autoscaling", "HorizontalPodAutoscaler") => {
            add::<autoscaling::HorizontalPodAutoscaler>(g)
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            add::<certificates::CertificateSigningRequest>(g)
        }
        ("discovery.k8s.io", "EndpointSlice") => add::<discovery::EndpointSlice>(g),
        ("networking.k8s.io", "Ingress") => add::<networking::Ingress>(g),
        ("networking.k8s.io", "IngressClass") => add::<networking::IngressClass>(g),
        ("networking.k8s.io", "NetworkPolicy") => add::<networking::NetworkPolicy>(g),
        ("node.k8s.io", "RuntimeClass") => add::<node::RuntimeClass>(g),
        ("policy", "PodDisruptionBudget") => add::<policy::PodDisruptionBudget>(g),
        ("scheduling.k8s.io", "PriorityClass") => add::<scheduling::PriorityClass>(g),
        ("storage.k8s.io", "StorageClass") => add::<storage::StorageClass>(g),
        ("storage.k8s.io", "CSIDriver") => add::<storage::CSIDriver>(g),
        ("storage.k8s.io", "CSINode") => add::<storage::CSINode>(g),
        ("storage.k8s.io", "CSIStorageCapacity") => add::<storage::CSIStorageCapacity>(g),
        ("storage.k8s.io", "VolumeAttachment") => add::<storage::VolumeAttachment>(g),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => add::<flowcontrol::FlowSchema>(g),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            add::<flowcontrol::PriorityLevelConfiguration>(g)
        }
        _ => return None,
    })
}

fn generate_all() -> Documents {
    let registry = crate::registry::Registry::with_builtins();
    let mut documents = Documents::new();
    for (group, versions) in registry.groups() {
        for version in versions {
            let mut generator = SchemaSettings::openapi3().into_generator();
            let mut kinds = Vec::new();
            for kind in registry.in_group_version(&group, &version) {
                if let Some(name) = add_kind(&mut generator, &group, &kind.kind) {
                    kinds.push((name, kind.kind.clone()));
                }
            }
            let mut schemas = generator.take_definitions(true);
            // kubectl explain finds a kind's schema by this extension, as on kube-apiserver.
            for (name, kind) in kinds {
                if let Some(schema) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
                    schema.insert(
                        "x-kubernetes-group-version-kind".into(),
                        json!([{"group": group, "version": version, "kind": kind}]),
                    );
                }
            }
            documents.insert((group.clone(), version), schemas);
        }
    }
    documents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployments_are_described_down_to_their_containers() {
        let schemas = schemas("apps", "v1").expect("apps/v1 has built-in kinds");
        let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        let spec_ref = deployment["properties"]["spec"].to_string();
        assert!(
            spec_ref.contains("#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"),
            "{spec_ref}"
        );
        assert!(schemas.contains_key("io.k8s.api.core.v1.Container"));
        assert!(
            schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]["description"]
                .as_str()
                .is_some_and(|text| !text.is_empty())
        );
    }
}
