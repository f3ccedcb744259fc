//! What kube-apiserver's registry strategies do to a few built-in kinds on write, where clients
//! read the result: the defaults its defaulting functions fill in (a Pod starts `Pending`, a
//! Service gets a cluster IP and node ports, a Deployment a rolling-update strategy, a Job its
//! selector and completion defaults, a PriorityClass its preemption policy), the empty status
//! a new object starts with where its JSON shows one (PodDisruptionBudget, Ingress, Service,
//! ResourceQuota), Secret `stringData`
//! merged into `data`, the size limits of ConfigMaps and Secrets, and the fields that may not
//! change (`immutable` ConfigMaps and Secrets, a Secret's `type`, a Service's cluster IP).

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::meta;
use crate::registry::ResourceKind;
use crate::status::{ApiError, Cause};

mod service;

pub use service::Held;

/// kube-apiserver's limit on the data of one ConfigMap or Secret.
pub const DATA_SIZE_LIMIT: u64 = 1024 * 1024;

fn is(kind: &ResourceKind, group: &str, name: &str) -> bool {
    kind.id.group == group && kind.kind == name
}

/// Sets `object[field]` to `value` when it is absent (or null).
fn default_field(object: &mut Map<String, Value>, field: &str, value: Value) {
    if object.get(field).is_none_or(Value::is_null) {
        object.insert(field.to_owned(), value);
    }
}

/// The object at `field` of `object`, created empty when absent.
fn child<'a>(object: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    let entry = map.entry(field).or_insert_with(|| json!({}));
    if entry.is_null() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

fn invalid(kind: &ResourceKind, object: &Value, causes: Vec<Cause>) -> Result<(), ApiError> {
    ApiError::invalid_if_any(&kind.id.group, &kind.kind, meta::name(object), causes)
}

/// The defaults of a pod template's or a pod's spec that clients read back.
fn default_pod_spec(spec: &mut Map<String, Value>) {
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = container
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let last = image.rsplit('/').next().unwrap_or_default();
            let pull = if last.contains('@') || (last.contains(':') && !last.ends_with(":latest")) {
                "IfNotPresent"
            } else {
                "Always"
            };
            default_field(container, "imagePullPolicy", json!(pull));
            default_field(
                container,
                "terminationMessagePath",
                json!("/dev/termination-log"),
            );
            default_field(container, "terminationMessagePolicy", json!("File"));
            if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default_field(port, "protocol", json!("TCP"));
                }
            }
        }
    }
}

fn default_template(spec: &mut Map<String, Value>) {
    if let Some(pod_spec) = spec
        .get_mut("template")
        .and_then(|template| template.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        default_pod_spec(pod_spec);
    }
}

/// kube-apiserver's Job defaults, and the selector its strategy generates from the Job's uid
/// (with the labels it puts on the pod template, and on the Job when it has none).
fn default_job(object: &mut Value) {
    let uid = meta::uid(object).to_owned();
    let name = meta::name(object).to_owned();
    let Some(spec) = child(object, "spec") else {
        return;
    };
    if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
        spec.insert("completions".into(), json!(1));
    }
    default_field(spec, "parallelism", json!(1));
    // With per-index limits the Job-wide limit steps aside: kube defaults it to MaxInt32.
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|limit| !limit.is_null());
    let backoff_limit = if per_index { i32::MAX } else { 6 };
    default_field(spec, "backoffLimit", json!(backoff_limit));
    default_field(spec, "completionMode", json!("NonIndexed"));
    default_field(spec, "suspend", json!(false));
    let replacement = if spec
        .get("podFailurePolicy")
        .is_some_and(|policy| !policy.is_null())
    {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    default_field(spec, "podReplacementPolicy", json!(replacement));
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    let mut template_labels = Map::new();
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
        if !manual {
            let metadata = template.entry("metadata").or_insert_with(|| json!({}));
            if let Some(labels) = child(metadata, "labels") {
                for key in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
                    labels.insert(key.into(), json!(uid));
                }
                for key in ["batch.kubernetes.io/job-name", "job-name"] {
                    labels.insert(key.into(), json!(name));
                }
            }
        }
        if let Some(labels) = template
            .get("metadata")
            .and_then(|metadata| metadata.get("labels"))
            .and_then(Value::as_object)
        {
            template_labels = labels.clone();
        }
        if let Some(pod_spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
            default_pod_spec(pod_spec);
        }
    }
    if !manual {
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
    }
    let metadata = meta::metadata_mut(object);
    if metadata
        .get("labels")
        .is_none_or(|labels| labels.as_object().is_none_or(Map::is_empty))
        && !template_labels.is_empty()
    {
        metadata.insert("labels".into(), Value::Object(template_labels));
    }
}

/// The status a new object of `kind` starts with, where kube's JSON shows one from the start.
fn initial_status(kind: &ResourceKind) -> Option<Value> {
    match (kind.id.group.as_str(), kind.kind.as_str()) {
        ("policy", "PodDisruptionBudget") => Some(
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
        ),
        ("networking.k8s.io", "Ingress") => Some(json!({"loadBalancer": {}})),
        ("", "ResourceQuota") => Some(json!({})),
        _ => None,
    }
}

/// Secret `stringData` is write-only: merged into `data` (base64), winning over it.
fn merge_string_data(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = map.remove("stringData") else {
        return;
    };
    let data = map.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    for (key, value) in string_data {
        let text = value.as_str().unwrap_or_default();
        data[key.as_str()] =
            Value::from(base64::engine::general_purpose::STANDARD.encode(text.as_bytes()));
    }
}

/// The bytes of a ConfigMap's or Secret's data, as kube-apiserver sums them.
fn data_size(kind: &ResourceKind, object: &Value) -> u64 {
    let sum = |field: &str, decode: bool| -> u64 {
        object
            .get(field)
            .and_then(Value::as_object)
            .map(|data| {
                data.iter()
                    .map(|(key, value)| {
                        let text = value.as_str().unwrap_or_default();
                        let bytes = if decode {
                            base64::engine::general_purpose::STANDARD
                                .decode(text)
                                .map_or(text.len(), |decoded| decoded.len())
                        } else {
                            text.len()
                        };
                        (key.len() + bytes) as u64
                    })
                    .sum()
            })
            .unwrap_or(0)
    };
    if kind.kind == "Secret" {
        sum("data", true)
    } else {
        sum("data", false) + sum("binaryData", true)
    }
}

fn size_causes(kind: &ResourceKind, object: &Value) -> Vec<Cause> {
    if data_size(kind, object) <= DATA_SIZE_LIMIT {
        return Vec::new();
    }
    // kube-apiserver names no field for a ConfigMap (an empty path prints as "[]").
    let field = if kind.kind == "Secret" { "data" } else { "[]" };
    vec![Cause::too_long(field, DATA_SIZE_LIMIT)]
}

fn is_config_map_or_secret(kind: &ResourceKind) -> bool {
    is(kind, "", "ConfigMap") || is(kind, "", "Secret")
}

/// Defaults and checks of a new object of a built-in kind; `held` is what the other Services
/// hold.
pub fn on_create(kind: &ResourceKind, object: &mut Value, held: &Held) -> Result<(), ApiError> {
    if kind.custom {
        return Ok(());
    }
    if is(kind, "", "Secret") {
        merge_string_data(object);
        if let Some(map) = object.as_object_mut() {
            default_field(map, "type", json!("Opaque"));
        }
    }
    if is_config_map_or_secret(kind) {
        return invalid(kind, object, size_causes(kind, object));
    }
    if is(kind, "", "Pod") {
        if let Some(spec) = child(object, "spec") {
            default_pod_spec(spec);
        }
        if let Some(status) = child(object, "status") {
            default_field(status, "phase", json!("Pending"));
            default_field(status, "qosClass", json!("BestEffort"));
        }
    } else if is(kind, "", "Service") {
        service::on_create(kind, object, held)?;
    } else if is(kind, "batch", "Job") {
        default_job(object);
    } else if is(kind, "scheduling.k8s.io", "PriorityClass") {
        if let Some(map) = object.as_object_mut() {
            default_field(map, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    } else if let Some(status) = initial_status(kind) {
        if let Some(map) = object.as_object_mut() {
            default_field(map, "status", status);
        }
    } else if let Some(default) = workload_defaults(kind)
        && let Some(spec) = child(object, "spec")
    {
        default(spec);
    }
    Ok(())
}

/// kube-apiserver's Deployment strategy defaults, field by field: a strategy sent without a
/// type (kubectl's protobuf body carries an empty one) is a RollingUpdate of 25% / 25%.
fn default_deployment_strategy(spec: &mut Map<String, Value>) {
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if !strategy.is_object() {
        *strategy = json!({});
    }
    let Some(strategy) = strategy.as_object_mut() else {
        return;
    };
    default_field(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) != Some("RollingUpdate") {
        return;
    }
    let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
    if let Some(rolling) = rolling.as_object_mut() {
        default_field(rolling, "maxUnavailable", json!("25%"));
        default_field(rolling, "maxSurge", json!("25%"));
    }
}

/// The spec defaults of a workload kind, if `kind` is one.
fn workload_defaults(kind: &ResourceKind) -> Option<fn(&mut Map<String, Value>)> {
    match (kind.id.group.as_str(), kind.kind.as_str()) {
        ("apps", "Deployment") => Some(|spec| {
            default_field(spec, "replicas", json!(1));
            default_field(spec, "revisionHistoryLimit", json!(10));
            default_field(spec, "progressDeadlineSeconds", json!(600));
            default_deployment_strategy(spec);
            default_template(spec);
        }),
        ("apps", "ReplicaSet") | ("", "ReplicationController") => Some(|spec| {
            default_field(spec, "replicas", json!(1));
            default_template(spec);
        }),
        ("apps", "StatefulSet") => Some(|spec| {
            default_field(spec, "replicas", json!(1));
            default_field(spec, "revisionHistoryLimit", json!(10));
            default_field(spec, "podManagementPolicy", json!("OrderedReady"));
            default_field(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            default_template(spec);
        }),
        ("batch", "CronJob") => Some(|spec| {
            default_field(spec, "concurrencyPolicy", json!("Allow"));
            default_field(spec, "suspend", json!(false));
            default_field(spec, "successfulJobsHistoryLimit", json!(3));
            default_field(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(job_spec) = spec
                .get_mut("jobTemplate")
                .and_then(|template| template.get_mut("spec"))
                .and_then(Value::as_object_mut)
            {
                default_template(job_spec);
            }
        }),
        ("apps", "DaemonSet") => Some(|spec| {
            default_field(spec, "revisionHistoryLimit", json!(10));
            default_field(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            default_template(spec);
        }),
        _ => None,
    }
}

const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";

/// Defaults and checks of an update of a built-in kind (`old` is the stored object; `held`
/// what the other Services hold).
pub fn on_update(
    kind: &ResourceKind,
    old: &Value,
    new: &mut Value,
    held: &Held,
) -> Result<(), ApiError> {
    if kind.custom {
        return Ok(());
    }
    if is(kind, "", "Secret") {
        merge_string_data(new);
    }
    if is_config_map_or_secret(kind) {
        let mut causes = Vec::new();
        if old.get("immutable").and_then(Value::as_bool) == Some(true) {
            if new.get("immutable").and_then(Value::as_bool) != Some(true) {
                causes.push(Cause::forbidden("immutable", IMMUTABLE_WHEN_SET));
            }
            for field in ["data", "binaryData"] {
                if old.get(field) != new.get(field) {
                    causes.push(Cause::forbidden(field, IMMUTABLE_WHEN_SET));
                }
            }
        }
        if is(kind, "", "Secret") {
            let old_type = old.get("type").cloned().unwrap_or(json!("Opaque"));
            if let Some(map) = new.as_object_mut() {
                default_field(map, "type", old_type.clone());
            }
            let new_type = new.get("type").cloned().unwrap_or(Value::Null);
            if new_type != old_type {
                causes.push(Cause::invalid("type", &new_type, "field is immutable"));
            }
        }
        causes.extend(size_causes(kind, new));
        return invalid(kind, new, causes);
    }
    if is(kind, "", "Service") {
        service::on_update(kind, old, new, held)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Registry, ResourceId};

    fn kind(group: &str, plural: &str) -> std::sync::Arc<ResourceKind> {
        Registry::with_builtins()
            .get(&ResourceId::new(group, plural))
            .cloned()
            .expect("built in")
    }

    #[test]
    fn a_pod_starts_pending_and_a_service_gets_a_cluster_ip() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
        on_create(&kind("", "pods"), &mut pod, &Held::default()).expect("valid");
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        let mut service = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        on_create(&kind("", "services"), &mut service, &Held::default()).expect("valid");
        let ip = service["spec"]["clusterIP"].as_str().expect("an address");
        assert!(ip.starts_with("10."), "{ip}");
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 80);
        let mut moved = service.clone();
        moved["spec"]["clusterIP"] = json!("10.0.0.1");
        let error = on_update(
            &kind("", "services"),
            &service,
            &mut moved,
            &Held::default(),
        )
        .expect_err("immutable");
        assert!(
            error.message.contains("spec.clusterIPs[0]"),
            "{}",
            error.message
        );
    }

    #[test]
    fn secret_string_data_lands_in_data_and_immutable_data_stays() {
        let secrets = kind("", "secrets");
        let mut secret =
            json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}, "immutable": true});
        on_create(&secrets, &mut secret, &Held::default()).expect("valid");
        assert_eq!(secret["data"]["a"], "Yg==");
        assert!(secret.get("stringData").is_none());
        assert_eq!(secret["type"], "Opaque");
        let mut changed = secret.clone();
        changed["data"]["a"] = json!("Yw==");
        let error =
            on_update(&secrets, &secret, &mut changed, &Held::default()).expect_err("immutable");
        assert_eq!(
            error.message,
            "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        );
    }

    #[test]
    fn config_maps_hold_at_most_one_mebibyte() {
        let mut big = json!({"metadata": {"name": "big"}, "data": {"a": "x".repeat(1024 * 1024)}});
        let error =
            on_create(&kind("", "configmaps"), &mut big, &Held::default()).expect_err("too big");
        assert_eq!(
            error.message,
            "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"
        );
    }
}
