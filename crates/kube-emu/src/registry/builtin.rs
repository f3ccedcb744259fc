//! The built-in kinds: the subset of Kubernetes' own API that Arbor and its tests use.

use super::view::{Conversion, StorageView};
use super::{ALL_VERBS, NameRule, ResourceId, ResourceKind, ScaleSubresource, ServedVersion};

/// How a built-in kind differs from an ordinary namespaced kind with no status subresource.
struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    status: bool,
    generation: bool,
    name_rule: NameRule,
    create_only: bool,
    in_category_all: bool,
    field_labels: &'static [&'static str],
    scalable: bool,
    field_subresources: &'static [(&'static str, &'static str)],
}

const fn namespaced(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        short_names: &[],
        namespaced: true,
        status: false,
        generation: false,
        name_rule: NameRule::Subdomain,
        create_only: false,
        in_category_all: false,
        field_labels: &[],
        scalable: false,
        field_subresources: &[],
    }
}

impl Builtin {
    const fn cluster(mut self) -> Builtin {
        self.namespaced = false;
        self
    }
    const fn short(mut self, names: &'static [&'static str]) -> Builtin {
        self.short_names = names;
        self
    }
    /// A kind with spec and status: status subresource and generation tracking.
    const fn workload(mut self) -> Builtin {
        self.status = true;
        self.generation = true;
        self
    }
    /// A workload with a `/scale` subresource.
    const fn scalable(mut self) -> Builtin {
        self.scalable = true;
        self
    }
    const fn with_status(mut self) -> Builtin {
        self.status = true;
        self
    }
    const fn with_generation(mut self) -> Builtin {
        self.generation = true;
        self
    }
    const fn names(mut self, rule: NameRule) -> Builtin {
        self.name_rule = rule;
        self
    }
    const fn create_only(mut self) -> Builtin {
        self.create_only = true;
        self
    }
    /// Listed by `kubectl get all`.
    const fn in_all(mut self) -> Builtin {
        self.in_category_all = true;
        self
    }
    const fn fields(mut self, labels: &'static [&'static str]) -> Builtin {
        self.field_labels = labels;
        self
    }
    /// Subresources that write one field: `(subresource, field path)`.
    const fn field_subresources(
        mut self,
        subresources: &'static [(&'static str, &'static str)],
    ) -> Builtin {
        self.field_subresources = subresources;
        self
    }
}

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";

fn table() -> Vec<Builtin> {
    vec![
        namespaced("", "v1", "Namespace", "namespaces")
            .cluster()
            .short(&["ns"])
            .with_status()
            .names(NameRule::Label)
            .fields(&["status.phase"]),
        namespaced("", "v1", "ConfigMap", "configmaps").short(&["cm"]),
        namespaced("", "v1", "Secret", "secrets").fields(&["type"]),
        namespaced("", "v1", "ServiceAccount", "serviceaccounts").short(&["sa"]),
        namespaced("", "v1", "Service", "services")
            .in_all()
            .short(&["svc"])
            .with_status()
            .names(NameRule::Label),
        namespaced("", "v1", "Pod", "pods")
            .in_all()
            .short(&["po"])
            .with_status()
            .field_subresources(&[("ephemeralcontainers", "spec.ephemeralContainers")])
            .fields(&[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.phase",
                "status.podIP",
            ]),
        namespaced("", "v1", "ResourceQuota", "resourcequotas")
            .short(&["quota"])
            .with_status(),
        namespaced("", "v1", "LimitRange", "limitranges").short(&["limits"]),
        namespaced("", "v1", "ReplicationController", "replicationcontrollers")
            .in_all()
            .short(&["rc"])
            .workload()
            .scalable(),
        namespaced("", "v1", "PodTemplate", "podtemplates"),
        namespaced("", "v1", "Event", "events")
            .short(&["ev"])
            .fields(EVENT_FIELDS),
        namespaced("apps", "v1", "Deployment", "deployments")
            .in_all()
            .short(&["deploy"])
            .workload()
            .scalable(),
        namespaced("apps", "v1", "ReplicaSet", "replicasets")
            .in_all()
            .short(&["rs"])
            .workload()
            .scalable(),
        namespaced("apps", "v1", "StatefulSet", "statefulsets")
            .in_all()
            .short(&["sts"])
            .workload()
            .scalable(),
        namespaced("apps", "v1", "DaemonSet", "daemonsets")
            .in_all()
            .short(&["ds"])
            .workload(),
        namespaced("batch", "v1", "Job", "jobs").in_all().workload(),
        namespaced("batch", "v1", "CronJob", "cronjobs")
            .in_all()
            .short(&["cj"])
            .workload(),
        namespaced(RBAC, "v1", "Role", "roles").names(NameRule::PathSegment),
        namespaced(RBAC, "v1", "RoleBinding", "rolebindings").names(NameRule::PathSegment),
        namespaced(RBAC, "v1", "ClusterRole", "clusterroles")
            .cluster()
            .names(NameRule::PathSegment),
        namespaced(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings")
            .cluster()
            .names(NameRule::PathSegment),
        namespaced("coordination.k8s.io", "v1", "Lease", "leases"),
        namespaced("events.k8s.io", "v1", "Event", "events")
            .short(&["ev"])
            .fields(EVENT_FIELDS),
        namespaced(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        )
        .cluster()
        .short(&["crd", "crds"])
        .workload(),
        namespaced(
            ADMISSION,
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        )
        .cluster()
        .with_generation(),
        namespaced(
            ADMISSION,
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        )
        .cluster()
        .with_generation(),
        namespaced(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
        )
        .cluster()
        .create_only(),
        namespaced("authentication.k8s.io", "v1", "TokenReview", "tokenreviews")
            .cluster()
            .create_only(),
        namespaced(
            "authentication.k8s.io",
            "v1",
            "SelfSubjectReview",
            "selfsubjectreviews",
        )
        .cluster()
        .create_only(),
        // The rest of Kubernetes 1.32's stored kinds. The emulator runs none of the controllers
        // behind them (no kubelet, scheduler, endpoints or certificate signer): they are stored
        // and served so clients that list, create or watch them get what kube-apiserver gives.
        namespaced("", "v1", "Node", "nodes")
            .cluster()
            .short(&["no"])
            .with_status()
            .fields(&["spec.unschedulable"]),
        namespaced("", "v1", "Endpoints", "endpoints").short(&["ep"]),
        namespaced("", "v1", "PersistentVolume", "persistentvolumes")
            .cluster()
            .short(&["pv"])
            .with_status(),
        namespaced("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
            .short(&["pvc"])
            .with_status(),
        namespaced("apiregistration.k8s.io", "v1", "APIService", "apiservices")
            .cluster()
            // `v1.` names the core group's APIService: a version and a group, not a DNS name.
            .names(NameRule::PathSegment)
            .with_status(),
        namespaced("apps", "v1", "ControllerRevision", "controllerrevisions"),
        namespaced(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
        )
        .in_all()
        .short(&["hpa"])
        .with_status(),
        namespaced(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
        )
        .cluster()
        .short(&["csr"])
        .with_status()
        .field_subresources(&[("approval", "status.conditions")])
        .fields(&["spec.signerName"]),
        namespaced("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
        namespaced("networking.k8s.io", "v1", "Ingress", "ingresses")
            .short(&["ing"])
            .with_status(),
        namespaced("networking.k8s.io", "v1", "IngressClass", "ingressclasses").cluster(),
        namespaced(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
        )
        .short(&["netpol"]),
        namespaced("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses").cluster(),
        namespaced(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
        )
        .short(&["pdb"])
        .with_status()
        .with_generation(),
        namespaced(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
        )
        .cluster()
        .short(&["pc"]),
        namespaced("storage.k8s.io", "v1", "StorageClass", "storageclasses")
            .cluster()
            .short(&["sc"]),
        namespaced("storage.k8s.io", "v1", "CSIDriver", "csidrivers").cluster(),
        namespaced("storage.k8s.io", "v1", "CSINode", "csinodes").cluster(),
        namespaced(
            "storage.k8s.io",
            "v1",
            "CSIStorageCapacity",
            "csistoragecapacities",
        ),
        namespaced(
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            "volumeattachments",
        )
        .cluster()
        .with_status(),
        namespaced(
            ADMISSION,
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
        )
        .cluster()
        .with_status()
        .with_generation(),
        namespaced(
            ADMISSION,
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        )
        .cluster()
        .with_generation(),
        namespaced(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "FlowSchema",
            "flowschemas",
        )
        .cluster()
        .with_status()
        .with_generation(),
        namespaced(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
        )
        .cluster()
        .with_status()
        .with_generation(),
        namespaced(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
        )
        .cluster()
        .create_only(),
        namespaced(
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
            "subjectaccessreviews",
        )
        .cluster()
        .create_only(),
        namespaced(
            "authorization.k8s.io",
            "v1",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
        )
        .create_only(),
    ]
}

/// The built-in kinds as registry entries.
pub(super) fn kinds() -> Vec<ResourceKind> {
    table()
        .into_iter()
        .map(|builtin| ResourceKind {
            id: ResourceId::new(builtin.group, builtin.plural),
            kind: builtin.kind.to_owned(),
            singular: builtin.kind.to_lowercase(),
            short_names: builtin
                .short_names
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            categories: if builtin.in_category_all {
                vec!["all".to_owned()]
            } else {
                Vec::new()
            },
            namespaced: builtin.namespaced,
            versions: vec![ServedVersion {
                name: builtin.version.to_owned(),
                served: true,
                status_subresource: builtin.status,
                scale: builtin.scalable.then(ScaleSubresource::workload),
                printer_columns: Vec::new(),
                schema: None,
                structural: None,
            }],
            verbs: if builtin.create_only {
                vec!["create"]
            } else {
                ALL_VERBS.to_vec()
            },
            name_rule: builtin.name_rule,
            tracks_generation: builtin.generation,
            field_labels: builtin.field_labels.to_vec(),
            field_subresources: builtin.field_subresources.to_vec(),
            // kube-apiserver stores events.k8s.io Events with the core ones.
            view: (builtin.group == "events.k8s.io").then(|| StorageView {
                storage: ResourceId::new("", "events"),
                conversion: Conversion::Events,
            }),
            custom: false,
        })
        .collect()
}
