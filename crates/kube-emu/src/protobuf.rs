//! Request bodies in Kubernetes' protobuf encoding, for the kinds every `kubectl create`
//! subcommand (configmap, secret, namespace, serviceaccount, role, clusterrole, rolebinding,
//! clusterrolebinding, deployment, service, job, cronjob, token, priorityclass,
//! poddisruptionbudget, quota, ingress), `kubectl auth can-i` and `kubectl auth whoami` send that way
//! (client-go's typed clients prefer protobuf and do not fall back to JSON). The envelope is
//! the magic `k8s\0` followed by a `runtime.Unknown` whose `raw` field holds the object; the
//! object is decoded to the same JSON a JSON client would have sent, using the field numbers of
//! the upstream `.proto` files. A field this decoder does not know is refused when it carries a
//! value (gogo-protobuf also writes every unset non-pointer field, empty, and those are
//! skipped), so nothing a client sent is dropped silently. Other kinds are refused with 415 and
//! must be sent as JSON (kubectl create -f / apply do).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

/// The prefix of every protobuf-encoded Kubernetes object.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Clone, Copy)]
enum FieldType {
    Text,
    /// `bytes`, rendered base64 like JSON does.
    Binary,
    Integer,
    Boolean,
    Message(&'static [Field]),
    TextMap,
    BinaryMap,
    /// `map<string, resource.Quantity>`: a Quantity is a message holding its string (1).
    QuantityMap,
    /// `intstr.IntOrString`: type (1), intVal (2), strVal (3); JSON has the number or the string.
    IntOrString,
    /// `metav1.Time`: seconds and nanos, rendered RFC 3339.
    Time,
    /// A Go struct embedded with `json:",inline"`: its fields are the parent's in JSON.
    Inline(&'static [Field]),
}

#[derive(Debug, Clone, Copy)]
struct Field {
    number: u64,
    name: &'static str,
    field_type: FieldType,
    repeated: bool,
    /// A zero on the wire is a value, not an unset field: a Go pointer field (written only when
    /// set, so an explicit `replicas: 0`), or a field Go's JSON writes even at zero.
    zero_is_value: bool,
}

const fn field(number: u64, name: &'static str, field_type: FieldType) -> Field {
    Field {
        number,
        name,
        field_type,
        repeated: false,
        zero_is_value: false,
    }
}

const fn pointer(number: u64, name: &'static str, field_type: FieldType) -> Field {
    Field {
        number,
        name,
        field_type,
        repeated: false,
        zero_is_value: true,
    }
}

/// A field without `omitempty` in its JSON tag: kube-apiserver stores and returns its zero
/// (a PriorityClass's `value: 0`).
const fn written_at_zero(number: u64, name: &'static str, field_type: FieldType) -> Field {
    pointer(number, name, field_type)
}

const fn repeated(number: u64, name: &'static str, field_type: FieldType) -> Field {
    Field {
        number,
        name,
        field_type,
        repeated: true,
        zero_is_value: false,
    }
}

const OWNER_REFERENCE: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "uid", FieldType::Text),
    field(5, "apiVersion", FieldType::Text),
    pointer(6, "controller", FieldType::Boolean),
    pointer(7, "blockOwnerDeletion", FieldType::Boolean),
];

const OBJECT_META: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "generateName", FieldType::Text),
    field(3, "namespace", FieldType::Text),
    field(5, "uid", FieldType::Text),
    field(6, "resourceVersion", FieldType::Text),
    field(7, "generation", FieldType::Integer),
    field(8, "creationTimestamp", FieldType::Time),
    field(11, "labels", FieldType::TextMap),
    field(12, "annotations", FieldType::TextMap),
    repeated(13, "ownerReferences", FieldType::Message(OWNER_REFERENCE)),
    repeated(14, "finalizers", FieldType::Text),
];

const OBJECT_REFERENCE: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(2, "namespace", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "uid", FieldType::Text),
    field(5, "apiVersion", FieldType::Text),
    field(6, "resourceVersion", FieldType::Text),
    field(7, "fieldPath", FieldType::Text),
];

const LOCAL_OBJECT_REFERENCE: &[Field] = &[field(1, "name", FieldType::Text)];

const CONFIG_MAP: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "data", FieldType::TextMap),
    field(3, "binaryData", FieldType::BinaryMap),
    pointer(4, "immutable", FieldType::Boolean),
];

const SECRET: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "data", FieldType::BinaryMap),
    field(3, "type", FieldType::Text),
    field(4, "stringData", FieldType::TextMap),
    pointer(5, "immutable", FieldType::Boolean),
];

const NAMESPACE_SPEC: &[Field] = &[repeated(1, "finalizers", FieldType::Text)];

const NAMESPACE: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(NAMESPACE_SPEC)),
];

const SERVICE_ACCOUNT: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    repeated(2, "secrets", FieldType::Message(OBJECT_REFERENCE)),
    repeated(
        3,
        "imagePullSecrets",
        FieldType::Message(LOCAL_OBJECT_REFERENCE),
    ),
    pointer(4, "automountServiceAccountToken", FieldType::Boolean),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    field(1, "namespace", FieldType::Text),
    field(2, "verb", FieldType::Text),
    field(3, "group", FieldType::Text),
    field(4, "version", FieldType::Text),
    field(5, "resource", FieldType::Text),
    field(6, "subresource", FieldType::Text),
    field(7, "name", FieldType::Text),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[
    field(1, "path", FieldType::Text),
    field(2, "verb", FieldType::Text),
];

const SELF_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    field(
        1,
        "resourceAttributes",
        FieldType::Message(RESOURCE_ATTRIBUTES),
    ),
    field(
        2,
        "nonResourceAttributes",
        FieldType::Message(NON_RESOURCE_ATTRIBUTES),
    ),
];

const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(
        2,
        "spec",
        FieldType::Message(SELF_SUBJECT_ACCESS_REVIEW_SPEC),
    ),
];

const SELF_SUBJECT_RULES_REVIEW_SPEC: &[Field] = &[field(1, "namespace", FieldType::Text)];

/// What `kubectl auth can-i --list` sends.
const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(
        2,
        "spec",
        FieldType::Message(SELF_SUBJECT_RULES_REVIEW_SPEC),
    ),
];

const POLICY_RULE: &[Field] = &[
    repeated(1, "verbs", FieldType::Text),
    repeated(2, "apiGroups", FieldType::Text),
    repeated(3, "resources", FieldType::Text),
    repeated(4, "resourceNames", FieldType::Text),
    repeated(5, "nonResourceURLs", FieldType::Text),
];

const LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    field(1, "key", FieldType::Text),
    field(2, "operator", FieldType::Text),
    repeated(3, "values", FieldType::Text),
];

const LABEL_SELECTOR: &[Field] = &[
    field(1, "matchLabels", FieldType::TextMap),
    repeated(
        2,
        "matchExpressions",
        FieldType::Message(LABEL_SELECTOR_REQUIREMENT),
    ),
];

const AGGREGATION_RULE: &[Field] = &[repeated(
    1,
    "clusterRoleSelectors",
    FieldType::Message(LABEL_SELECTOR),
)];

/// Role, and ClusterRole (which adds its aggregation rule).
const ROLE: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    repeated(2, "rules", FieldType::Message(POLICY_RULE)),
    field(3, "aggregationRule", FieldType::Message(AGGREGATION_RULE)),
];

const SUBJECT: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(2, "apiGroup", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "namespace", FieldType::Text),
];

const ROLE_REF: &[Field] = &[
    field(1, "apiGroup", FieldType::Text),
    field(2, "kind", FieldType::Text),
    field(3, "name", FieldType::Text),
];

/// RoleBinding and ClusterRoleBinding.
const ROLE_BINDING: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    repeated(2, "subjects", FieldType::Message(SUBJECT)),
    field(3, "roleRef", FieldType::Message(ROLE_REF)),
];

const CONTAINER_PORT: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "hostPort", FieldType::Integer),
    field(3, "containerPort", FieldType::Integer),
    field(4, "protocol", FieldType::Text),
    field(5, "hostIP", FieldType::Text),
];

const ENV_VAR: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "value", FieldType::Text),
];

const RESOURCE_REQUIREMENTS: &[Field] = &[
    field(1, "limits", FieldType::QuantityMap),
    field(2, "requests", FieldType::QuantityMap),
];

/// The container fields kubectl's generators fill in; the others (probes, mounts, security
/// context, ...) are refused when set, see the module docs.
const CONTAINER: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "image", FieldType::Text),
    repeated(3, "command", FieldType::Text),
    repeated(4, "args", FieldType::Text),
    field(5, "workingDir", FieldType::Text),
    repeated(6, "ports", FieldType::Message(CONTAINER_PORT)),
    repeated(7, "env", FieldType::Message(ENV_VAR)),
    field(8, "resources", FieldType::Message(RESOURCE_REQUIREMENTS)),
    field(13, "terminationMessagePath", FieldType::Text),
    field(14, "imagePullPolicy", FieldType::Text),
    field(16, "stdin", FieldType::Boolean),
    field(17, "stdinOnce", FieldType::Boolean),
    field(18, "tty", FieldType::Boolean),
    field(20, "terminationMessagePolicy", FieldType::Text),
];

const POD_SPEC: &[Field] = &[
    repeated(2, "containers", FieldType::Message(CONTAINER)),
    field(3, "restartPolicy", FieldType::Text),
    pointer(4, "terminationGracePeriodSeconds", FieldType::Integer),
    pointer(5, "activeDeadlineSeconds", FieldType::Integer),
    field(6, "dnsPolicy", FieldType::Text),
    field(7, "nodeSelector", FieldType::TextMap),
    field(8, "serviceAccountName", FieldType::Text),
    field(9, "serviceAccount", FieldType::Text),
    field(10, "nodeName", FieldType::Text),
    field(11, "hostNetwork", FieldType::Boolean),
    field(12, "hostPID", FieldType::Boolean),
    field(13, "hostIPC", FieldType::Boolean),
    repeated(
        15,
        "imagePullSecrets",
        FieldType::Message(LOCAL_OBJECT_REFERENCE),
    ),
    field(16, "hostname", FieldType::Text),
    field(17, "subdomain", FieldType::Text),
    field(19, "schedulerName", FieldType::Text),
    repeated(20, "initContainers", FieldType::Message(CONTAINER)),
    pointer(21, "automountServiceAccountToken", FieldType::Boolean),
    field(24, "priorityClassName", FieldType::Text),
];

const POD_TEMPLATE_SPEC: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(POD_SPEC)),
];

const ROLLING_UPDATE_DEPLOYMENT: &[Field] = &[
    pointer(1, "maxUnavailable", FieldType::IntOrString),
    pointer(2, "maxSurge", FieldType::IntOrString),
];

const DEPLOYMENT_STRATEGY: &[Field] = &[
    field(1, "type", FieldType::Text),
    field(
        2,
        "rollingUpdate",
        FieldType::Message(ROLLING_UPDATE_DEPLOYMENT),
    ),
];

const DEPLOYMENT_SPEC: &[Field] = &[
    pointer(1, "replicas", FieldType::Integer),
    field(2, "selector", FieldType::Message(LABEL_SELECTOR)),
    field(3, "template", FieldType::Message(POD_TEMPLATE_SPEC)),
    field(4, "strategy", FieldType::Message(DEPLOYMENT_STRATEGY)),
    field(5, "minReadySeconds", FieldType::Integer),
    pointer(6, "revisionHistoryLimit", FieldType::Integer),
    field(7, "paused", FieldType::Boolean),
    pointer(9, "progressDeadlineSeconds", FieldType::Integer),
];

const DEPLOYMENT: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(DEPLOYMENT_SPEC)),
];

const JOB_SPEC: &[Field] = &[
    pointer(1, "parallelism", FieldType::Integer),
    pointer(2, "completions", FieldType::Integer),
    pointer(3, "activeDeadlineSeconds", FieldType::Integer),
    field(4, "selector", FieldType::Message(LABEL_SELECTOR)),
    pointer(5, "manualSelector", FieldType::Boolean),
    field(6, "template", FieldType::Message(POD_TEMPLATE_SPEC)),
    pointer(7, "backoffLimit", FieldType::Integer),
    pointer(8, "ttlSecondsAfterFinished", FieldType::Integer),
    pointer(9, "completionMode", FieldType::Text),
    pointer(10, "suspend", FieldType::Boolean),
];

const JOB: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(JOB_SPEC)),
];

const JOB_TEMPLATE_SPEC: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(JOB_SPEC)),
];

const CRON_JOB_SPEC: &[Field] = &[
    field(1, "schedule", FieldType::Text),
    pointer(2, "startingDeadlineSeconds", FieldType::Integer),
    field(3, "concurrencyPolicy", FieldType::Text),
    pointer(4, "suspend", FieldType::Boolean),
    field(5, "jobTemplate", FieldType::Message(JOB_TEMPLATE_SPEC)),
    pointer(6, "successfulJobsHistoryLimit", FieldType::Integer),
    pointer(7, "failedJobsHistoryLimit", FieldType::Integer),
    pointer(8, "timeZone", FieldType::Text),
];

const CRON_JOB: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(CRON_JOB_SPEC)),
];

const SERVICE_PORT: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "protocol", FieldType::Text),
    field(3, "port", FieldType::Integer),
    field(4, "targetPort", FieldType::IntOrString),
    field(5, "nodePort", FieldType::Integer),
    pointer(6, "appProtocol", FieldType::Text),
];

const SERVICE_SPEC: &[Field] = &[
    repeated(1, "ports", FieldType::Message(SERVICE_PORT)),
    field(2, "selector", FieldType::TextMap),
    field(3, "clusterIP", FieldType::Text),
    field(4, "type", FieldType::Text),
    repeated(5, "externalIPs", FieldType::Text),
    field(7, "sessionAffinity", FieldType::Text),
    field(8, "loadBalancerIP", FieldType::Text),
    repeated(9, "loadBalancerSourceRanges", FieldType::Text),
    field(10, "externalName", FieldType::Text),
    field(11, "externalTrafficPolicy", FieldType::Text),
    field(13, "publishNotReadyAddresses", FieldType::Boolean),
    repeated(18, "clusterIPs", FieldType::Text),
    repeated(19, "ipFamilies", FieldType::Text),
    pointer(17, "ipFamilyPolicy", FieldType::Text),
    pointer(20, "allocateLoadBalancerNodePorts", FieldType::Boolean),
    pointer(21, "loadBalancerClass", FieldType::Text),
    pointer(22, "internalTrafficPolicy", FieldType::Text),
];

const SERVICE: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(SERVICE_SPEC)),
];

/// `kubectl create priorityclass`.
const PRIORITY_CLASS: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    written_at_zero(2, "value", FieldType::Integer),
    field(3, "globalDefault", FieldType::Boolean),
    field(4, "description", FieldType::Text),
    pointer(5, "preemptionPolicy", FieldType::Text),
];

const POD_DISRUPTION_BUDGET_SPEC: &[Field] = &[
    pointer(1, "minAvailable", FieldType::IntOrString),
    field(2, "selector", FieldType::Message(LABEL_SELECTOR)),
    pointer(3, "maxUnavailable", FieldType::IntOrString),
    pointer(4, "unhealthyPodEvictionPolicy", FieldType::Text),
];

/// `kubectl create poddisruptionbudget`; its status (all zeros) is the server's to fill.
const POD_DISRUPTION_BUDGET: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(POD_DISRUPTION_BUDGET_SPEC)),
];

const SCOPED_RESOURCE_SELECTOR_REQUIREMENT: &[Field] = &[
    field(1, "scopeName", FieldType::Text),
    field(2, "operator", FieldType::Text),
    repeated(3, "values", FieldType::Text),
];

const SCOPE_SELECTOR: &[Field] = &[repeated(
    1,
    "matchExpressions",
    FieldType::Message(SCOPED_RESOURCE_SELECTOR_REQUIREMENT),
)];

const RESOURCE_QUOTA_SPEC: &[Field] = &[
    field(1, "hard", FieldType::QuantityMap),
    repeated(2, "scopes", FieldType::Text),
    field(3, "scopeSelector", FieldType::Message(SCOPE_SELECTOR)),
];

/// `kubectl create quota`.
const RESOURCE_QUOTA: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(RESOURCE_QUOTA_SPEC)),
];

const SERVICE_BACKEND_PORT: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "number", FieldType::Integer),
];

const INGRESS_SERVICE_BACKEND: &[Field] = &[
    field(1, "name", FieldType::Text),
    field(2, "port", FieldType::Message(SERVICE_BACKEND_PORT)),
];

const TYPED_LOCAL_OBJECT_REFERENCE: &[Field] = &[
    pointer(1, "apiGroup", FieldType::Text),
    field(2, "kind", FieldType::Text),
    field(3, "name", FieldType::Text),
];

const INGRESS_BACKEND: &[Field] = &[
    field(
        3,
        "resource",
        FieldType::Message(TYPED_LOCAL_OBJECT_REFERENCE),
    ),
    field(4, "service", FieldType::Message(INGRESS_SERVICE_BACKEND)),
];

const HTTP_INGRESS_PATH: &[Field] = &[
    field(1, "path", FieldType::Text),
    field(2, "backend", FieldType::Message(INGRESS_BACKEND)),
    pointer(3, "pathType", FieldType::Text),
];

const HTTP_INGRESS_RULE_VALUE: &[Field] =
    &[repeated(1, "paths", FieldType::Message(HTTP_INGRESS_PATH))];

const INGRESS_RULE_VALUE: &[Field] = &[field(
    1,
    "http",
    FieldType::Message(HTTP_INGRESS_RULE_VALUE),
)];

const INGRESS_RULE: &[Field] = &[
    field(1, "host", FieldType::Text),
    field(2, "ingressRuleValue", FieldType::Inline(INGRESS_RULE_VALUE)),
];

const INGRESS_TLS: &[Field] = &[
    repeated(1, "hosts", FieldType::Text),
    field(2, "secretName", FieldType::Text),
];

const INGRESS_SPEC: &[Field] = &[
    field(1, "defaultBackend", FieldType::Message(INGRESS_BACKEND)),
    repeated(2, "tls", FieldType::Message(INGRESS_TLS)),
    repeated(3, "rules", FieldType::Message(INGRESS_RULE)),
    pointer(4, "ingressClassName", FieldType::Text),
];

/// `kubectl create ingress`; its status (an empty load balancer) is the server's to fill.
const INGRESS: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(INGRESS_SPEC)),
];

const BOUND_OBJECT_REFERENCE: &[Field] = &[
    field(1, "kind", FieldType::Text),
    field(2, "apiVersion", FieldType::Text),
    field(3, "name", FieldType::Text),
    field(4, "uid", FieldType::Text),
];

const TOKEN_REQUEST_SPEC: &[Field] = &[
    repeated(1, "audiences", FieldType::Text),
    field(
        3,
        "boundObjectRef",
        FieldType::Message(BOUND_OBJECT_REFERENCE),
    ),
    pointer(4, "expirationSeconds", FieldType::Integer),
];

/// What `kubectl create token` sends to `serviceaccounts/<name>/token`.
const TOKEN_REQUEST: &[Field] = &[
    field(1, "metadata", FieldType::Message(OBJECT_META)),
    field(2, "spec", FieldType::Message(TOKEN_REQUEST_SPEC)),
];

/// What `kubectl auth whoami` sends: metadata only, the server answers with the status.
const SELF_SUBJECT_REVIEW: &[Field] = &[field(1, "metadata", FieldType::Message(OBJECT_META))];

const TYPE_META: &[Field] = &[
    field(1, "apiVersion", FieldType::Text),
    field(2, "kind", FieldType::Text),
];

const UNKNOWN: &[Field] = &[
    field(1, "typeMeta", FieldType::Message(TYPE_META)),
    field(2, "raw", FieldType::Binary),
];

fn schema_for(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    match (api_version, kind) {
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "Secret") => Some(SECRET),
        ("v1", "Namespace") => Some(NAMESPACE),
        ("v1", "ServiceAccount") => Some(SERVICE_ACCOUNT),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Some(SELF_SUBJECT_ACCESS_REVIEW),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => Some(SELF_SUBJECT_RULES_REVIEW),
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => Some(ROLE),
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => {
            Some(ROLE_BINDING)
        }
        ("apps/v1", "Deployment") => Some(DEPLOYMENT),
        ("batch/v1", "Job") => Some(JOB),
        ("batch/v1", "CronJob") => Some(CRON_JOB),
        ("v1", "Service") => Some(SERVICE),
        ("authentication.k8s.io/v1", "TokenRequest") => Some(TOKEN_REQUEST),
        ("authentication.k8s.io/v1", "SelfSubjectReview") => Some(SELF_SUBJECT_REVIEW),
        ("scheduling.k8s.io/v1", "PriorityClass") => Some(PRIORITY_CLASS),
        ("policy/v1", "PodDisruptionBudget") => Some(POD_DISRUPTION_BUDGET),
        ("v1", "ResourceQuota") => Some(RESOURCE_QUOTA),
        ("networking.k8s.io/v1", "Ingress") => Some(INGRESS),
        _ => None,
    }
}

/// Reads the protobuf wire format.
struct Reader<'a> {
    bytes: &'a [u8],
}

/// A field value as it appears on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.bytes.split_first().ok_or("truncated varint")?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], String> {
        if length > self.bytes.len() {
            return Err("truncated field".into());
        }
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(taken)
    }

    /// The next (field number, value), skipping fixed-width fields nobody here needs.
    fn next_field(&mut self) -> Result<Option<(u64, Wire<'a>)>, String> {
        while !self.bytes.is_empty() {
            let key = self.varint()?;
            let number = key >> 3;
            match key & 7 {
                0 => return Ok(Some((number, Wire::Varint(self.varint()?)))),
                2 => {
                    let length = usize::try_from(self.varint()?).map_err(|_| "field too long")?;
                    return Ok(Some((number, Wire::Bytes(self.take(length)?))));
                }
                1 => {
                    self.take(8)?;
                }
                5 => {
                    self.take(4)?;
                }
                other => return Err(format!("unsupported wire type {other}")),
            }
        }
        Ok(None)
    }
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string field is not UTF-8".to_owned())
}

/// A `map<string, Quantity>` entry: key (1) and the Quantity message (2).
fn quantity_entry(bytes: &[u8]) -> Result<(String, Value), String> {
    let mut reader = Reader { bytes };
    let (mut key, mut value) = (String::new(), Value::from(""));
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire) {
            (1, Wire::Bytes(bytes)) => key = text(bytes)?,
            (2, Wire::Bytes(bytes)) => value = quantity(bytes)?,
            _ => {}
        }
    }
    Ok((key, value))
}

/// A map entry: key (1) and value (2).
fn map_entry(bytes: &[u8], binary_values: bool) -> Result<(String, Value), String> {
    let mut reader = Reader { bytes };
    let (mut key, mut value) = (String::new(), Value::from(""));
    while let Some((number, wire)) = reader.next_field()? {
        match (number, wire) {
            (1, Wire::Bytes(bytes)) => key = text(bytes)?,
            (2, Wire::Bytes(bytes)) if binary_values => value = Value::from(STANDARD.encode(bytes)),
            (2, Wire::Bytes(bytes)) => value = Value::from(text(bytes)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn time(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader { bytes };
    let mut seconds = 0i64;
    while let Some((number, wire)) = reader.next_field()? {
        if let (1, Wire::Varint(value)) = (number, wire) {
            seconds = value as i64;
        }
    }
    if seconds == 0 {
        return Ok(Value::Null);
    }
    Ok(chrono::DateTime::from_timestamp(seconds, 0)
        .map(|time| Value::from(time.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .unwrap_or(Value::Null))
}

/// A `resource.Quantity` message: its string form (1).
fn quantity(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader { bytes };
    let mut value = String::new();
    while let Some((number, wire)) = reader.next_field()? {
        if let (1, Wire::Bytes(bytes)) = (number, wire) {
            value = text(bytes)?;
        }
    }
    Ok(Value::from(value))
}

/// An `intstr.IntOrString`: the number when its type (1) is 0, else the string (3).
fn int_or_string(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader { bytes };
    let (mut is_string, mut number, mut string) = (false, 0i64, String::new());
    while let Some((field, wire)) = reader.next_field()? {
        match (field, wire) {
            (1, Wire::Varint(kind)) => is_string = kind == 1,
            (2, Wire::Varint(value)) => number = i64::from(value as i32),
            (3, Wire::Bytes(bytes)) => string = text(bytes)?,
            _ => {}
        }
    }
    Ok(if is_string {
        Value::from(string)
    } else {
        Value::from(number)
    })
}

/// Whether a field this decoder does not know carried nothing: gogo-protobuf writes unset
/// non-pointer fields as empty strings, zero numbers and empty messages.
fn is_empty(wire: &Wire<'_>) -> bool {
    match wire {
        Wire::Varint(value) => *value == 0,
        Wire::Bytes(bytes) => bytes.is_empty() || message_is_empty(bytes),
    }
}

/// An embedded message whose every field is empty (an unset struct such as a container's
/// `securityContext` written as an empty message), read without knowing its fields.
fn message_is_empty(bytes: &[u8]) -> bool {
    let mut reader = Reader { bytes };
    loop {
        match reader.next_field() {
            Ok(None) => return true,
            Ok(Some((_, wire))) if is_empty(&wire) => {}
            // Not a message (a string, or a message with content): a value.
            _ => return false,
        }
    }
}

fn message(bytes: &[u8], fields: &[Field]) -> Result<Map<String, Value>, String> {
    let mut reader = Reader { bytes };
    let mut object = Map::new();
    while let Some((number, wire)) = reader.next_field()? {
        let Some(field) = fields.iter().find(|field| field.number == number) else {
            if is_empty(&wire) {
                continue;
            }
            let known: Vec<&str> = fields.iter().map(|field| field.name).collect();
            return Err(format!(
                "protobuf field {number} beside {} is set, and arbor-kube-emu does not decode it; send the object as JSON",
                known.join(", ")
            ));
        };
        let value = match (field.field_type, wire) {
            (FieldType::Text, Wire::Bytes(bytes)) => Value::from(text(bytes)?),
            (FieldType::Binary, Wire::Bytes(bytes)) => Value::from(STANDARD.encode(bytes)),
            (FieldType::Integer, Wire::Varint(value)) => Value::from(value as i64),
            (FieldType::Boolean, Wire::Varint(value)) => Value::from(value != 0),
            (FieldType::Message(inner), Wire::Bytes(bytes)) => {
                Value::Object(message(bytes, inner)?)
            }
            (FieldType::Time, Wire::Bytes(bytes)) => time(bytes)?,
            (FieldType::Inline(inner), Wire::Bytes(bytes)) => {
                object.extend(message(bytes, inner)?);
                continue;
            }
            (FieldType::IntOrString, Wire::Bytes(bytes)) => int_or_string(bytes)?,
            (FieldType::QuantityMap, Wire::Bytes(bytes)) => {
                let (key, value) = quantity_entry(bytes)?;
                let entries = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(entries) = entries.as_object_mut() {
                    entries.insert(key, value);
                }
                continue;
            }
            (map_type @ (FieldType::TextMap | FieldType::BinaryMap), Wire::Bytes(bytes)) => {
                let (key, value) = map_entry(bytes, matches!(map_type, FieldType::BinaryMap))?;
                let entries = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(entries) = entries.as_object_mut() {
                    entries.insert(key, value);
                }
                continue;
            }
            _ => return Err(format!("field {} has an unexpected wire type", field.name)),
        };
        // gogo-protobuf writes every non-pointer field; Go's JSON leaves zero values out. A
        // pointer field is written only when set, so its zero is the client's value.
        let zero = value.is_null() || value == "" || value == 0 || value == false;
        if zero && !field.repeated && !field.zero_is_value {
            continue;
        }
        if field.repeated {
            let items = object
                .entry(field.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(items) = items.as_array_mut() {
                items.push(value);
            }
        } else {
            object.insert(field.name.to_owned(), value);
        }
    }
    Ok(object)
}

/// Decodes a protobuf-encoded object into its JSON form; the error says why it cannot be.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the Kubernetes protobuf prefix")?;
    let unknown = message(envelope, UNKNOWN)?;
    let type_meta = unknown.get("typeMeta").cloned().unwrap_or_default();
    let api_version = type_meta
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = type_meta
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let schema = schema_for(api_version, kind)
        .ok_or_else(|| format!("protobuf bodies are understood for v1 ConfigMap, Secret, Namespace, ServiceAccount, Service, ResourceQuota, apps/v1 Deployment, batch/v1 Job and CronJob, networking.k8s.io/v1 Ingress, policy/v1 PodDisruptionBudget, scheduling.k8s.io/v1 PriorityClass, RBAC roles and bindings, TokenRequest, SelfSubjectReview, SelfSubjectAccessReview and SelfSubjectRulesReview only, not {api_version} {kind}; send JSON"))?;
    let raw = unknown
        .get("raw")
        .and_then(Value::as_str)
        .map(|raw| STANDARD.decode(raw))
        .transpose()
        .map_err(|_| "the raw object is not valid")?
        .unwrap_or_default();
    let mut object = message(&raw, schema)?;
    object.insert("apiVersion".into(), Value::from(api_version));
    object.insert("kind".into(), Value::from(kind));
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn length_delimited(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![((number << 3) | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    fn map_entry_bytes(key: &str, value: &[u8]) -> Vec<u8> {
        [
            length_delimited(1, key.as_bytes()),
            length_delimited(2, value),
        ]
        .concat()
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            length_delimited(1, api_version.as_bytes()),
            length_delimited(2, kind.as_bytes()),
        ]
        .concat();
        let unknown = [length_delimited(1, &type_meta), length_delimited(2, raw)].concat();
        [MAGIC, &unknown].concat()
    }

    #[test]
    fn a_config_map_decodes_to_its_json_form() {
        let metadata = [
            length_delimited(1, b"demo"),
            length_delimited(2, b""),
            length_delimited(11, &map_entry_bytes("app", b"web")),
        ]
        .concat();
        let raw = [
            length_delimited(1, &metadata),
            length_delimited(2, &map_entry_bytes("a", b"1")),
            length_delimited(2, &map_entry_bytes("b", b"2")),
        ]
        .concat();
        let decoded = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
        assert_eq!(
            decoded,
            json!({"metadata": {"name": "demo", "labels": {"app": "web"}}, "data": {"a": "1", "b": "2"}, "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn secret_data_is_base64_like_json() {
        let raw = [
            length_delimited(1, &length_delimited(1, b"s")),
            length_delimited(2, &map_entry_bytes("k", b"\x00\x01")),
            length_delimited(3, b"Opaque"),
        ]
        .concat();
        let decoded = decode(&envelope("v1", "Secret", &raw)).expect("decodes");
        assert_eq!(decoded["data"]["k"], "AAE=");
        assert_eq!(decoded["type"], "Opaque");
    }

    fn varint_field(number: u64, value: u64) -> Vec<u8> {
        let mut out = vec![(number << 3) as u8];
        let mut value = value;
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn an_explicit_zero_of_a_pointer_field_is_kept_and_unset_fields_are_not_invented() {
        let spec = [
            varint_field(1, 0),
            varint_field(5, 0),
            length_delimited(4, b""),
        ]
        .concat();
        let raw = [
            length_delimited(1, &length_delimited(1, b"web")),
            length_delimited(2, &spec),
        ]
        .concat();
        let decoded = decode(&envelope("apps/v1", "Deployment", &raw)).expect("decodes");
        assert_eq!(decoded["spec"], json!({"replicas": 0, "strategy": {}}));
    }

    #[test]
    fn a_set_field_the_decoder_does_not_know_is_refused_not_dropped() {
        // PodSpec field 14 (securityContext) with content.
        let pod_spec = length_delimited(14, &length_delimited(5, b"x"));
        let template = length_delimited(2, &pod_spec);
        let raw = length_delimited(2, &length_delimited(3, &template));
        let error = decode(&envelope("apps/v1", "Deployment", &raw)).unwrap_err();
        assert!(
            error.contains("protobuf field 14") && error.contains("send the object as JSON"),
            "{error}"
        );
        // The same field written empty, as gogo-protobuf writes unset structs, is nothing.
        let pod_spec = length_delimited(14, b"");
        let raw = length_delimited(2, &length_delimited(3, &length_delimited(2, &pod_spec)));
        assert!(decode(&envelope("apps/v1", "Deployment", &raw)).is_ok());
    }

    #[test]
    fn int_or_string_and_quantities_read_as_json_writes_them() {
        let port = [
            varint_field(3, 80),
            length_delimited(4, &[varint_field(1, 0), varint_field(2, 8080)].concat()),
        ]
        .concat();
        let named = length_delimited(
            4,
            &[varint_field(1, 1), length_delimited(3, b"http")].concat(),
        );
        let raw = length_delimited(
            2,
            &[length_delimited(1, &port), length_delimited(1, &named)].concat(),
        );
        let decoded = decode(&envelope("v1", "Service", &raw)).expect("decodes");
        assert_eq!(
            decoded["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"targetPort": "http"}])
        );
        let quantity = length_delimited(1, b"100m");
        let limits = length_delimited(
            1,
            &[length_delimited(1, b"cpu"), length_delimited(2, &quantity)].concat(),
        );
        let container = [length_delimited(1, b"c"), length_delimited(8, &limits)].concat();
        let raw = length_delimited(
            2,
            &length_delimited(6, &length_delimited(2, &length_delimited(2, &container))),
        );
        let decoded = decode(&envelope("batch/v1", "Job", &raw)).expect("decodes");
        assert_eq!(
            decoded["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "100m"}})
        );
    }

    #[test]
    fn a_priority_value_of_zero_is_kept_as_kube_apiserver_stores_it() {
        let raw = [
            length_delimited(1, &length_delimited(1, b"floor")),
            varint_field(2, 0),
            varint_field(3, 0),
            length_delimited(4, b""),
        ]
        .concat();
        let decoded =
            decode(&envelope("scheduling.k8s.io/v1", "PriorityClass", &raw)).expect("decodes");
        assert_eq!(decoded["value"], 0);
        assert!(decoded.get("globalDefault").is_none() && decoded.get("description").is_none());
        // A negative int32 travels as a ten-byte varint.
        let raw = varint_field(2, (-5i64) as u64);
        let decoded =
            decode(&envelope("scheduling.k8s.io/v1", "PriorityClass", &raw)).expect("decodes");
        assert_eq!(decoded["value"], -5);
    }

    #[test]
    fn an_ingress_rule_value_is_inline_as_in_json_and_empty_status_is_nothing() {
        let backend = length_delimited(
            4,
            &[
                length_delimited(1, b"web"),
                length_delimited(2, &varint_field(2, 80)),
            ]
            .concat(),
        );
        let path = [
            length_delimited(1, b"/api"),
            length_delimited(2, &backend),
            length_delimited(3, b"Prefix"),
        ]
        .concat();
        let http = length_delimited(1, &length_delimited(1, &path));
        let rule = [
            length_delimited(1, b"shop.example.com"),
            length_delimited(2, &http),
        ]
        .concat();
        let raw = [
            length_delimited(2, &length_delimited(3, &rule)),
            // status: an empty load balancer, as kubectl writes it.
            length_delimited(3, &length_delimited(1, b"")),
        ]
        .concat();
        let decoded = decode(&envelope("networking.k8s.io/v1", "Ingress", &raw)).expect("decodes");
        assert_eq!(
            decoded["spec"]["rules"],
            json!([{"host": "shop.example.com", "http": {"paths": [
                {"path": "/api", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}
            ]}}])
        );
        assert!(decoded.get("status").is_none());
    }

    #[test]
    fn other_kinds_and_garbage_are_refused() {
        assert!(
            decode(&envelope("apps/v1", "StatefulSet", &[]))
                .unwrap_err()
                .contains("send JSON")
        );
        assert!(decode(b"{}").is_err());
    }
}
