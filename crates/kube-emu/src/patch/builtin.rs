//! The list semantics of built-in kinds, transcribed from the `+listType`, `+listMapKey`,
//! `patchStrategy` and `patchMergeKey` markers of the `k8s.io/api` types.
//!
//! Only lists are described; everything else is a granular map or a scalar anyway. Lists not
//! named here are atomic, which is kube's default too.

use serde_json::json;

use super::schema::{ListType, MergeStrategy, Schema};

/// The schema of `group`/`kind`, and whether that kind has a `/status` subresource.
pub fn schema_for(group: &str, kind: &str) -> (Schema, bool) {
    let root = object()
        .with_field("metadata", object_meta())
        .with_field("status", object().with_field("conditions", conditions()));
    let root = match (group, kind) {
        ("", "Pod") => root.with_field("spec", pod_spec()),
        ("", "PodTemplate") => root.with_field("template", pod_template()),
        ("", "ReplicationController")
        | ("apps", "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet")
        | ("batch", "Job") => root.with_field("spec", workload_spec()),
        ("batch", "CronJob") => root.with_field(
            "spec",
            object().with_field(
                "jobTemplate",
                object()
                    .with_field("metadata", object_meta())
                    .with_field("spec", workload_spec()),
            ),
        ),
        ("", "Service") => root.with_field("spec", object().with_field("ports", service_ports())),
        ("", "ServiceAccount") => root
            .with_field("secrets", Schema::keyed_list("name", object()))
            .with_field("imagePullSecrets", Schema::keyed_list("name", object())),
        _ => root,
    };
    (root, has_status_subresource(group, kind))
}

fn has_status_subresource(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "",
            "Pod"
                | "Service"
                | "Namespace"
                | "Node"
                | "ReplicationController"
                | "PersistentVolume"
                | "PersistentVolumeClaim"
                | "ResourceQuota"
        ) | (
            "apps",
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
        ) | ("batch", "Job" | "CronJob")
            | ("autoscaling", "HorizontalPodAutoscaler")
            | ("policy", "PodDisruptionBudget")
            | ("networking.k8s.io", "Ingress")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("apiregistration.k8s.io", "APIService")
            | ("certificates.k8s.io", "CertificateSigningRequest")
    )
}

fn object() -> Schema {
    Schema::default()
}

/// `metadata` of every object: owner references keyed by uid, finalizers a set.
pub fn object_meta() -> Schema {
    object()
        .with_field("ownerReferences", Schema::keyed_list("uid", object()))
        .with_field(
            "finalizers",
            Schema::list_of(object(), ListType::Set, MergeStrategy::MergeValues),
        )
}

fn conditions() -> Schema {
    Schema::keyed_list("type", object())
}

fn pod_template() -> Schema {
    object()
        .with_field("metadata", object_meta())
        .with_field("spec", pod_spec())
}

/// The spec of every kind that stamps out pods from `.spec.template`.
fn workload_spec() -> Schema {
    object().with_field("template", pod_template())
}

fn pod_spec() -> Schema {
    object()
        .with_field("containers", Schema::keyed_list("name", container()))
        .with_field("initContainers", Schema::keyed_list("name", container()))
        .with_field(
            "ephemeralContainers",
            Schema::keyed_list("name", container()),
        )
        .with_field("volumes", Schema::keyed_list("name", object()))
        .with_field("imagePullSecrets", Schema::keyed_list("name", object()))
        .with_field("hostAliases", Schema::keyed_list("ip", object()))
        .with_field(
            "topologySpreadConstraints",
            Schema::list_of(
                object(),
                ListType::Map(vec!["topologyKey".into(), "whenUnsatisfiable".into()]),
                MergeStrategy::MergeByKey("topologyKey".into()),
            ),
        )
}

fn container() -> Schema {
    object()
        .with_field("ports", port_list("containerPort", "containerPort"))
        .with_field("env", Schema::keyed_list("name", object()))
        .with_field("volumeMounts", Schema::keyed_list("mountPath", object()))
        .with_field("volumeDevices", Schema::keyed_list("devicePath", object()))
}

fn service_ports() -> Schema {
    port_list("port", "port")
}

/// Port lists: strategic merge keys them by port number alone, apply by number and protocol,
/// with the protocol defaulting to TCP.
fn port_list(number_field: &str, merge_key: &str) -> Schema {
    let item = object().with_field("protocol", Schema::defaulting(json!("TCP")));
    Schema::list_of(
        item,
        ListType::Map(vec![number_field.to_owned(), "protocol".to_owned()]),
        MergeStrategy::MergeByKey(merge_key.to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_containers_are_keyed_by_name() {
        let (schema, status) = schema_for("apps", "Deployment");
        let containers = schema
            .field("spec")
            .field("template")
            .field("spec")
            .field("containers");
        assert_eq!(containers.list, ListType::Map(vec!["name".into()]));
        assert_eq!(
            containers.strategy,
            MergeStrategy::MergeByKey("name".into())
        );
        assert!(status);
    }

    #[test]
    fn container_ports_differ_between_apply_and_strategic_merge() {
        let (schema, _) = schema_for("", "Pod");
        let ports = schema
            .field("spec")
            .field("containers")
            .item()
            .field("ports");
        assert_eq!(
            ports.list,
            ListType::Map(vec!["containerPort".into(), "protocol".into()])
        );
        assert_eq!(
            ports.strategy,
            MergeStrategy::MergeByKey("containerPort".into())
        );
    }

    #[test]
    fn configmaps_have_no_status_subresource_and_atomic_unknown_lists() {
        let (schema, status) = schema_for("", "ConfigMap");
        assert!(!status);
        assert_eq!(schema.field("data").list, ListType::Atomic);
        let (rbac, _) = schema_for("rbac.authorization.k8s.io", "RoleBinding");
        assert_eq!(rbac.field("subjects").list, ListType::Atomic);
        assert_eq!(rbac.field("subjects").strategy, MergeStrategy::Replace);
    }
}
