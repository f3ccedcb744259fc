//! What kube-apiserver does to a Service on write: its defaults, the cluster IP and node ports
//! it allocates from finite pools (each held by one Service at a time and free again when the
//! Service lets it go), the type-dependent fields it drops when the type changes
//! (`dropTypeDependentFields`), and the checks on those fields.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{child, default_field, invalid};
use crate::meta;
use crate::registry::ResourceKind;
use crate::status::{ApiError, Cause};

/// The addresses and node ports the other stored Services hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub node_ports: BTreeSet<i64>,
    pub cluster_ips: BTreeSet<String>,
}

/// kube's default service range, 10.96.0.0/12: its first and last address (the network and
/// broadcast addresses) are never given out.
const SERVICE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// kube's default node-port range.
const NODE_PORT_RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

fn service_type(service: &Value) -> &str {
    meta::lookup_path(service, "spec.type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn spec_str<'a>(service: &'a Value, field: &str) -> Option<&'a str> {
    service.get("spec")?.get(field)?.as_str()
}

/// Every type but ExternalName has an address (`None` counts: a headless Service).
fn needs_cluster_ip(service: &Value) -> bool {
    service_type(service) != "ExternalName"
}

/// The types whose ports have node ports, before LoadBalancer's opt-out.
fn has_node_port_type(service: &Value) -> bool {
    matches!(service_type(service), "NodePort" | "LoadBalancer")
}

/// Whether kube-apiserver gives `service`'s ports node ports: every port of a NodePort
/// Service, and of a LoadBalancer Service unless it opts out.
fn needs_node_ports(service: &Value) -> bool {
    match service_type(service) {
        "NodePort" => true,
        "LoadBalancer" => {
            meta::lookup_path(service, "spec.allocateLoadBalancerNodePorts") != Some(&json!(false))
        }
        _ => false,
    }
}

/// kube's `ExternallyAccessible`: reachable from outside the cluster.
fn externally_accessible(service: &Value) -> bool {
    has_node_port_type(service)
        || (service_type(service) == "ClusterIP"
            && meta::lookup_path(service, "spec.externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|ips| !ips.is_empty()))
}

/// The defaults of kube's `SetDefaults_Service` that do not depend on an allocation.
fn default_service(object: &mut Value) {
    let Some(spec) = child(object, "spec") else {
        return;
    };
    default_field(spec, "type", json!("ClusterIP"));
    default_field(spec, "sessionAffinity", json!("None"));
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if matches!(service_type.as_str(), "NodePort" | "LoadBalancer") {
        default_field(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        default_field(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if service_type != "ExternalName" {
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_field(port, "protocol", json!("TCP"));
            let number = port.get("port").cloned().unwrap_or(Value::Null);
            default_field(port, "targetPort", number);
        }
    }
    if let Some(status) = child(object, "status") {
        default_field(status, "loadBalancer", json!({}));
    }
}

/// kube's `dropTypeDependentFields`: when an update switches to a type that does not use an
/// allocated or type-bound field and the user left that field as it was, the field is wiped
/// (and what it held is released).
fn drop_type_dependent_fields(old: &Value, new: &mut Value) {
    let same = |new: &Value, field: &str| old["spec"].get(field) == new["spec"].get(field);
    let mut wipe = Vec::new();
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        if same(new, "clusterIP") && same(new, "clusterIPs") {
            wipe.extend(["clusterIP", "clusterIPs"]);
        }
        for field in ["ipFamilies", "ipFamilyPolicy"] {
            if same(new, field) {
                wipe.push(field);
            }
        }
    }
    if service_type(old) == "LoadBalancer" && service_type(new) != "LoadBalancer" {
        if old["spec"].get("allocateLoadBalancerNodePorts").is_some()
            && same(new, "allocateLoadBalancerNodePorts")
        {
            wipe.push("allocateLoadBalancerNodePorts");
        }
        if same(new, "loadBalancerClass") {
            wipe.push("loadBalancerClass");
        }
    }
    if externally_accessible(old)
        && !externally_accessible(new)
        && same(new, "externalTrafficPolicy")
    {
        wipe.push("externalTrafficPolicy");
    }
    let node_ports_kept = has_node_port_type(old)
        && !has_node_port_type(new)
        && set_node_ports(new).is_subset(&set_node_ports(old));
    let needs_health_check_port = |service: &Value| {
        service_type(service) == "LoadBalancer"
            && spec_str(service, "externalTrafficPolicy") == Some("Local")
    };
    if needs_health_check_port(old)
        && !needs_health_check_port(new)
        && same(new, "healthCheckNodePort")
    {
        wipe.push("healthCheckNodePort");
    }
    let load_balancer = service_type(new) == "LoadBalancer";
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in wipe {
        spec.remove(field);
    }
    if node_ports_kept {
        for port in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            port.remove("nodePort");
        }
    }
    if !load_balancer && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("loadBalancer".into(), json!({}));
    }
}

/// The node ports `service`'s ports name, unset ones left out.
fn set_node_ports(service: &Value) -> BTreeSet<i64> {
    node_ports_of(service)
        .into_iter()
        .map(|(_, port)| port)
        .filter(|port| *port != 0)
        .collect()
}

/// kube's type-dependent checks that a client can hit through a type change.
fn check_type_dependent_fields(kind: &ResourceKind, service: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if service_type(service) == "ClusterIP" {
        for (index, (_, port)) in node_ports_of(service).iter().enumerate() {
            if *port != 0 {
                causes.push(Cause::forbidden(
                    format!("spec.ports[{index}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    invalid(kind, service, causes)
}

/// An Invalid cause on `spec.clusterIPs` as kube's allocator words it (the value as Go prints
/// a `[]string`).
fn refused_address(ip: &str, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: "spec.clusterIPs".into(),
        message: format!("Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: {why}"),
    }
}

/// The usable addresses of the service range, first and last.
fn service_range() -> (u32, u32) {
    let (network, prefix) = SERVICE_RANGE;
    let base = u32::from(network);
    let size = 1u32 << (32 - prefix);
    (base + 1, base + size - 2)
}

/// Why kube's allocator refuses the chosen address `ip`, if it does.
fn refusal(ip: &str, held: &Held) -> Option<Cause> {
    let Ok(address) = ip.parse::<Ipv4Addr>() else {
        return Some(Cause::invalid(
            "spec.clusterIPs[0]",
            &json!(ip),
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    };
    let (first, last) = service_range();
    let (network, prefix) = SERVICE_RANGE;
    if !(first..=last).contains(&u32::from(address)) {
        return Some(refused_address(
            ip,
            &format!(
                "the provided IP ({ip}) is not in the valid range. The range of valid IPs is \
                 {network}/{prefix}"
            ),
        ));
    }
    held.cluster_ips
        .contains(ip)
        .then(|| refused_address(ip, "provided IP is already allocated"))
}

/// A free address of the service range, from a random start as kube's allocator picks.
fn allocate_cluster_ip(held: &Held) -> Result<String, ApiError> {
    let (first, last) = service_range();
    let size = last - first + 1;
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let start = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) % size;
    (0..size)
        .map(|step| Ipv4Addr::from(first + (start + step) % size).to_string())
        .find(|ip| !held.cluster_ips.contains(ip))
        .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))
}

/// Gives `service` its address: on an update (`old`) the one it holds, else the chosen one
/// when it is valid and free, else a free one; then the address fields that follow from it.
fn assign_cluster_ip(
    kind: &ResourceKind,
    service: &mut Value,
    old: Option<&Value>,
    held: &Held,
) -> Result<(), ApiError> {
    if !needs_cluster_ip(service) {
        return Ok(());
    }
    let holding = old
        .filter(|old| needs_cluster_ip(old))
        .and_then(|old| spec_str(old, "clusterIP"))
        .filter(|ip| !ip.is_empty());
    let requested = spec_str(service, "clusterIP").filter(|ip| !ip.is_empty());
    let ip = match (requested, holding) {
        (None, Some(holding)) => holding.to_owned(),
        (Some(requested), Some(holding)) if requested == holding => holding.to_owned(),
        (Some(requested), Some(_)) => {
            let cause = Cause::invalid(
                "spec.clusterIPs[0]",
                &json!(requested),
                "may not change once set",
            );
            return invalid(kind, service, vec![cause]);
        }
        (Some("None"), None) => "None".to_owned(),
        (Some(requested), None) => {
            if let Some(cause) = refusal(requested, held) {
                return invalid(kind, service, vec![cause]);
            }
            requested.to_owned()
        }
        (None, None) => allocate_cluster_ip(held)?,
    };
    let kept_ips = old
        .filter(|_| holding == Some(ip.as_str()))
        .and_then(|old| meta::lookup_path(old, "spec.clusterIPs"))
        .cloned();
    let Some(spec) = child(service, "spec") else {
        return Ok(());
    };
    spec.insert("clusterIP".into(), json!(ip));
    default_field(spec, "clusterIPs", kept_ips.unwrap_or_else(|| json!([ip])));
    if ip != "None" {
        default_field(spec, "ipFamilies", json!(["IPv4"]));
        default_field(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    Ok(())
}

/// The node port of each of `service`'s ports (0 where none is set), in order.
fn node_ports_of(service: &Value) -> Vec<(String, i64)> {
    meta::lookup_path(service, "spec.ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|port| {
            let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
            let number = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
            (name.to_owned(), number)
        })
        .collect()
}

/// Gives each port of `service` that needs a node port one no other Service holds, as
/// kube-apiserver's allocator does. A port the user chose must be in range and free; on an
/// update (`old`), a port left out keeps the node port its namesake held, and the ports `old`
/// already held stay its own.
fn assign_node_ports(
    kind: &ResourceKind,
    service: &mut Value,
    old: Option<&Value>,
    held: &Held,
) -> Result<(), ApiError> {
    if !needs_node_ports(service) {
        return Ok(());
    }
    let mut wanted = node_ports_of(service);
    let old = old.filter(|old| needs_node_ports(old));
    let holding: BTreeSet<i64> = old.map(set_node_ports).unwrap_or_default();
    if let Some(old) = old {
        // kube patches the old values in by port name, unless another port now uses them.
        let kept: BTreeSet<i64> = wanted
            .iter()
            .map(|(_, port)| *port)
            .filter(|port| holding.contains(port))
            .collect();
        let by_name: BTreeMap<String, i64> = node_ports_of(old).into_iter().collect();
        for (name, port) in wanted.iter_mut().filter(|(_, port)| *port == 0) {
            if let Some(previous) = by_name
                .get(name)
                .filter(|previous| !kept.contains(previous))
            {
                *port = *previous;
            }
        }
    }
    let mut causes = Vec::new();
    for (index, (_, port)) in wanted.iter().enumerate() {
        if *port == 0 || holding.contains(port) {
            continue;
        }
        let why = if !NODE_PORT_RANGE.contains(port) {
            format!(
                "provided port is not in the valid range. The range of valid ports is {}-{}",
                NODE_PORT_RANGE.start(),
                NODE_PORT_RANGE.end()
            )
        } else if held.node_ports.contains(port) {
            "provided port is already allocated".to_owned()
        } else {
            continue;
        };
        causes.push(Cause::invalid(
            format!("spec.ports[{index}].nodePort"),
            &json!(port),
            &why,
        ));
    }
    invalid(kind, service, causes)?;
    let mut taken = held.node_ports.clone();
    taken.extend(wanted.iter().map(|(_, port)| *port));
    for (_, port) in wanted.iter_mut().filter(|(_, port)| *port == 0) {
        *port = allocate_node_port(&taken)?;
        taken.insert(*port);
    }
    let ports = service
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("ports"))
        .and_then(Value::as_array_mut);
    for (port, (_, number)) in ports.into_iter().flatten().zip(wanted) {
        if let Some(port) = port.as_object_mut() {
            port.insert("nodePort".into(), json!(number));
        }
    }
    Ok(())
}

/// A free port of the node-port range, from a random start as kube's allocator picks.
fn allocate_node_port(taken: &BTreeSet<i64>) -> Result<i64, ApiError> {
    let size = NODE_PORT_RANGE.end() - NODE_PORT_RANGE.start() + 1;
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let start = i64::from(u16::from_be_bytes([bytes[0], bytes[1]])) % size;
    (0..size)
        .map(|step| NODE_PORT_RANGE.start() + (start + step) % size)
        .find(|port| !taken.contains(port))
        .ok_or_else(|| ApiError::internal("failed to allocate a nodePort: range is full"))
}

/// A new Service: defaults, checks, then its address and node ports.
pub fn on_create(kind: &ResourceKind, object: &mut Value, held: &Held) -> Result<(), ApiError> {
    default_service(object);
    check_type_dependent_fields(kind, object)?;
    assign_cluster_ip(kind, object, None, held)?;
    assign_node_ports(kind, object, None, held)
}

/// An update of the stored Service `old`: what the new type does not use is dropped, the
/// defaults of the new type filled in, the address kept, node ports kept or allocated.
pub fn on_update(
    kind: &ResourceKind,
    old: &Value,
    new: &mut Value,
    held: &Held,
) -> Result<(), ApiError> {
    drop_type_dependent_fields(old, new);
    default_service(new);
    check_type_dependent_fields(kind, new)?;
    assign_cluster_ip(kind, new, Some(old), held)?;
    assign_node_ports(kind, new, Some(old), held)
}
