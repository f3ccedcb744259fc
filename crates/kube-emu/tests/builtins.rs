//! Built-in kinds as strict as kube-apiserver where clients rely on it: label and annotation
//! rules, size limits, immutable fields, the defaults clients read back, Secret `stringData`,
//! and the `/scale` subresource of workloads.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{api_status, create, post, raw, start};

fn from_json<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

fn deployment(name: &str) -> Deployment {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
        },
    }))
}

#[tokio::test]
async fn invalid_label_keys_and_values_are_refused_with_kube_apiservers_words() {
    let (_emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let bad = support::config_map("bad", &[("tier", "front end")]);
    let status = api_status(
        api.create(&PostParams::default(), &bad)
            .await
            .expect_err("a space in a label value"),
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "ConfigMap \"bad\" is invalid: metadata.labels: Invalid value: \"front end\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    let bad_key = support::config_map("bad-key", &[("arbor.dev/a/b", "x")]);
    let status = api_status(
        api.create(&PostParams::default(), &bad_key)
            .await
            .expect_err("two slashes"),
    );
    assert_eq!(
        status.details.expect("details").causes[0].field,
        "metadata.labels"
    );
}

/// kube-apiserver's `ValidateOwnerReferences`: one controller per object, on create and on
/// every update (an SSA apply adding a second controller is how two owners collide).
#[tokio::test]
async fn an_object_has_at_most_one_controller_owner() {
    let (_emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = |uid: &str| {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs-{uid}"),
               "uid": uid, "controller": true})
    };
    let one: ConfigMap = from_json(json!({"metadata": {"name": "owned",
        "ownerReferences": [owner("a")]}}));
    api.create(&PostParams::default(), &one)
        .await
        .expect("one controller");
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owned", "ownerReferences": [owner("b")]}});
    let status = api_status(
        api.patch(
            "owned",
            &PatchParams::apply("second-owner"),
            &Patch::Apply(&second),
        )
        .await
        .expect_err("a second controller"),
    );
    assert_eq!(status.code, 422);
    assert!(
        status.message.starts_with(
            "ConfigMap \"owned\" is invalid: metadata.ownerReferences: Invalid value: [{"
        ),
        "{}",
        status.message
    );
    assert!(
        status.message.ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/rs-a and ReplicaSet/rs-b"
        ),
        "{}",
        status.message
    );
    let both: ConfigMap = from_json(json!({"metadata": {"name": "both",
        "ownerReferences": [owner("a"), owner("b")]}}));
    let status = api_status(
        api.create(&PostParams::default(), &both)
            .await
            .expect_err("two controllers"),
    );
    assert_eq!(status.code, 422, "{}", status.message);
}

#[tokio::test]
async fn requests_over_3_mib_and_config_maps_over_1_mib_are_refused() {
    let (_emu, client) = start().await;
    let big = |name: &str, bytes: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {"blob": "x".repeat(bytes)}})
    };
    let (code, status) = post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        big("huge", 50 * 1024 * 1024),
    )
    .await;
    assert_eq!(code, 413, "{status}");
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(
        status["message"],
        "Request entity too large: limit is 3145728"
    );
    let (code, status) = post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        big("large", 1024 * 1024 + 1),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ConfigMap \"large\" is invalid: []: Too long: may not be more than 1048576 bytes"
    );
}

#[tokio::test]
async fn immutable_config_maps_keep_their_data_and_an_update_naming_another_uid_conflicts() {
    let (_emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut frozen = support::config_map("frozen", &[]);
    frozen.immutable = Some(true);
    let created = create(&api, &frozen).await;
    let status = api_status(
        api.patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "2"}})),
        )
        .await
        .expect_err("immutable"),
    );
    assert_eq!(
        status.message,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let mut forged = created.clone();
    forged.metadata.uid = Some("another".to_owned());
    let status = api_status(
        api.replace("frozen", &PostParams::default(), &forged)
            .await
            .expect_err("uid precondition"),
    );
    assert_eq!(status.code, 409);
    assert!(
        status
            .message
            .contains("Precondition failed: UID in precondition: another"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn secret_string_data_is_stored_as_data() {
    let (_emu, client) = start().await;
    let api: Api<Secret> = Api::namespaced(client, "default");
    let secret: Secret =
        from_json(json!({"metadata": {"name": "s"}, "stringData": {"token": "abc"}}));
    let created = create(&api, &secret).await;
    assert!(created.string_data.is_none());
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let data = created.data.expect("data");
    assert_eq!(data["token"].0, b"abc");
}

#[tokio::test]
async fn defaults_clients_read_are_filled_in() {
    let (_emu, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}));
    let pod = create(&pods, &pod).await;
    assert_eq!(
        pod.status.and_then(|status| status.phase).as_deref(),
        Some("Pending")
    );
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = from_json(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}));
    let service = create(&services, &service).await;
    let spec = service.spec.clone().expect("spec");
    let ip = spec.cluster_ip.clone().expect("a cluster IP");
    assert!(ip.starts_with("10."), "{ip}");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    // Writing the Service back without its address keeps it; moving it is refused.
    let mut without_ip = service.clone();
    if let Some(spec) = without_ip.spec.as_mut() {
        spec.cluster_ip = None;
        spec.cluster_ips = None;
    }
    let replaced = services
        .replace("web", &PostParams::default(), &without_ip)
        .await
        .expect("replaced");
    assert_eq!(replaced.spec.expect("spec").cluster_ip, Some(ip));
    let status = api_status(
        services
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"]}}),
                ),
            )
            .await
            .expect_err("the address may not move"),
    );
    assert_eq!(status.code, 422);
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let created = create(&deployments, &deployment("web")).await;
    let spec = created.spec;
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        spec.strategy.and_then(|strategy| strategy.type_).as_deref(),
        Some("RollingUpdate")
    );
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_replicas_and_moves_generation() {
    let (_emu, client) = start().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    create(&deployments, &deployment("web")).await;
    let scale = deployments.get_scale("web").await.expect("a scale");
    assert_eq!(scale.spec.and_then(|spec| spec.replicas), Some(1));
    assert_eq!(
        scale.status.and_then(|status| status.selector).as_deref(),
        Some("app=web")
    );
    let scaled = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scaled");
    assert_eq!(scaled.spec.and_then(|spec| spec.replicas), Some(5));
    let stored = deployments.get("web").await.expect("stored");
    assert_eq!(stored.spec.replicas, Some(5));
    assert_eq!(stored.metadata.generation, Some(2));
    let (code, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/x/scale",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404, "config maps have no scale");
}

#[tokio::test]
async fn delete_answers_the_object_or_a_status_as_kube_apiserver_does() {
    let (_emu, client) = start().await;
    let path = "/api/v1/namespaces/default";
    post(
        &client,
        &format!("{path}/configmaps"),
        json!({"metadata": {"name": "plain"}}),
    )
    .await;
    let (code, body) = raw(
        &client,
        "DELETE",
        &format!("{path}/configmaps/plain"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(
        (code, body["kind"].as_str()),
        (200, Some("Status")),
        "{body}"
    );
    assert_eq!(body["status"], "Success");
    post(
        &client,
        &format!("{path}/configmaps"),
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    let (code, body) = raw(
        &client,
        "DELETE",
        &format!("{path}/configmaps/held"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(
        code, 200,
        "a delete held by a finalizer answers 200 with the object"
    );
    assert_eq!(body["kind"], "ConfigMap");
    assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
    post(
        &client,
        &format!("{path}/pods"),
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    let (code, body) = raw(
        &client,
        "DELETE",
        &format!("{path}/pods/p"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(
        (code, body["kind"].as_str()),
        (200, Some("Pod")),
        "pods return the deleted object"
    );
}

#[tokio::test]
async fn objects_over_one_and_a_half_mebibytes_are_not_stored() {
    let (_emu, client) = start().await;
    let (code, status) = post(
        &client,
        "/api/v1/namespaces/default/events",
        json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
               "message": "x".repeat(2 * 1024 * 1024)}),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "Internal error occurred: etcdserver: request is too large"
    );
}

fn node_port_service(name: &str, ports: Value) -> Service {
    from_json(json!({"metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": name}, "ports": ports}}))
}

fn node_ports(service: &Service) -> Vec<i32> {
    service
        .spec
        .iter()
        .flat_map(|spec| spec.ports.iter().flatten())
        .filter_map(|port| port.node_port)
        .collect()
}

#[tokio::test]
async fn node_ports_are_held_by_one_service_at_a_time_and_kept_across_updates() {
    let (_emu, client) = start().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let chosen = create(
        &services,
        &node_port_service(
            "chosen",
            json!([{"name": "http", "port": 80, "nodePort": 30080}]),
        ),
    )
    .await;
    assert_eq!(node_ports(&chosen), [30080]);
    let status = api_status(
        services
            .create(
                &PostParams::default(),
                &node_port_service("copycat", json!([{"port": 80, "nodePort": 30080}])),
            )
            .await
            .expect_err("30080 is taken"),
    );
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            422,
            "Service \"copycat\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        )
    );
    let status = api_status(
        services
            .create(
                &PostParams::default(),
                &node_port_service("low", json!([{"port": 80, "nodePort": 80}])),
            )
            .await
            .expect_err("out of range"),
    );
    assert!(
        status.message.ends_with(
            "provided port is not in the valid range. The range of valid ports is 30000-32767"
        ),
        "{}",
        status.message
    );

    // Allocated ports never collide: with all but two of the range held, two Services of
    // one port each get exactly the two free ones.
    let free = [30000, 32767];
    let emu_ports: Vec<Value> = (30001..32767)
        .filter(|port| *port != 30080)
        .map(|port| json!({"name": format!("p{port}"), "port": port, "nodePort": port}))
        .collect();
    create(
        &services,
        &node_port_service("filler", Value::from(emu_ports)),
    )
    .await;
    let first = create(
        &services,
        &node_port_service("first", json!([{"port": 80}])),
    )
    .await;
    let second = create(
        &services,
        &node_port_service("second", json!([{"port": 80}])),
    )
    .await;
    let mut allocated = [node_ports(&first), node_ports(&second)].concat();
    allocated.sort();
    assert_eq!(allocated, free);

    // An update that leaves the port out keeps it; a delete frees it.
    let mut without_port = chosen.clone();
    if let Some(port) = without_port
        .spec
        .as_mut()
        .and_then(|spec| spec.ports.as_mut())
        .and_then(|ports| ports.first_mut())
    {
        port.node_port = None;
    }
    let replaced = services
        .replace("chosen", &PostParams::default(), &without_port)
        .await
        .expect("replaced");
    assert_eq!(node_ports(&replaced), [30080]);
    services
        .delete("chosen", &Default::default())
        .await
        .expect("deleted");
    let reused = create(
        &services,
        &node_port_service("reused", json!([{"port": 80, "nodePort": 30080}])),
    )
    .await;
    assert_eq!(node_ports(&reused), [30080]);
}

fn cluster_ip(service: &Service) -> String {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.cluster_ip.clone())
        .unwrap_or_default()
}

/// kube-apiserver's service IP allocator: a chosen address must be in the service range and
/// free (`spec.clusterIPs` names it, as kube's dual-stack allocator does), allocated
/// addresses never collide with held ones, and a deleted Service's address is free again.
#[tokio::test]
async fn cluster_ips_are_held_by_one_service_at_a_time() {
    let (_emu, client) = start().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service = |name: &str, ip: Option<&str>| -> Service {
        let mut spec = json!({"selector": {"app": name}, "ports": [{"port": 80}]});
        if let Some(ip) = ip {
            spec["clusterIP"] = json!(ip);
        }
        from_json(json!({"metadata": {"name": name}, "spec": spec}))
    };
    let dns = create(&services, &service("dns", Some("10.96.0.10"))).await;
    assert_eq!(cluster_ip(&dns), "10.96.0.10");
    let refused = |name: &'static str, ip: &'static str| {
        let services = services.clone();
        async move {
            api_status(
                services
                    .create(&PostParams::default(), &service(name, Some(ip)))
                    .await
                    .expect_err("the address is refused"),
            )
        }
    };
    let taken = refused("copycat", "10.96.0.10").await;
    assert_eq!(
        (taken.code, taken.message.as_str()),
        (
            422,
            "Service \"copycat\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"
        )
    );
    let outside = refused("outside", "192.168.0.1").await;
    assert_eq!(
        outside.message,
        "Service \"outside\" is invalid: spec.clusterIPs: Invalid value: []string{\"192.168.0.1\"}: failed to allocate IP 192.168.0.1: the provided IP (192.168.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
    );
    // Headless Services hold no address, however many there are.
    create(&services, &service("headless-a", Some("None"))).await;
    create(&services, &service("headless-b", Some("None"))).await;

    let mut held = std::collections::BTreeSet::from([cluster_ip(&dns)]);
    for index in 0..200 {
        let allocated = create(&services, &service(&format!("svc-{index}"), None)).await;
        assert!(
            held.insert(cluster_ip(&allocated)),
            "{} was given out twice",
            cluster_ip(&allocated)
        );
    }
    services
        .delete("dns", &Default::default())
        .await
        .expect("deleted");
    let reused = create(&services, &service("dns-again", Some("10.96.0.10"))).await;
    assert_eq!(cluster_ip(&reused), "10.96.0.10");
}

/// kube-apiserver's `dropTypeDependentFields`: a Service switched to a type that needs no node
/// ports (or no address) loses the allocated values it did not change, and they are free again;
/// a node port kept by hand on a ClusterIP Service is refused.
#[tokio::test]
async fn a_service_changing_type_releases_what_the_new_type_does_not_use() {
    let (_emu, client) = start().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let exposed = create(
        &services,
        &node_port_service("exposed", json!([{"port": 80, "nodePort": 30080}])),
    )
    .await;
    let mut internal = exposed.clone();
    if let Some(spec) = internal.spec.as_mut() {
        spec.type_ = Some("ClusterIP".into());
    }
    let internal = services
        .replace("exposed", &PostParams::default(), &internal)
        .await
        .expect("switched to ClusterIP");
    assert_eq!(node_ports(&internal), Vec::<i32>::new());
    assert_eq!(
        internal
            .spec
            .as_ref()
            .and_then(|spec| spec.external_traffic_policy.clone()),
        None
    );
    let reused = create(
        &services,
        &node_port_service("reused", json!([{"port": 80, "nodePort": 30080}])),
    )
    .await;
    assert_eq!(node_ports(&reused), [30080]);

    let patched = services
        .patch(
            "reused",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30081}]}}),
            ),
        )
        .await
        .expect_err("a new node port on a ClusterIP Service");
    let status = api_status(patched);
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            422,
            "Service \"reused\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
        )
    );

    let mut external = internal.clone();
    if let Some(spec) = external.spec.as_mut() {
        spec.type_ = Some("ExternalName".into());
        spec.external_name = Some("db.example.org".into());
    }
    let external = services
        .replace("exposed", &PostParams::default(), &external)
        .await
        .expect("switched to ExternalName");
    let spec = external.spec.expect("spec");
    assert_eq!(
        (
            spec.cluster_ip,
            spec.cluster_ips,
            spec.ip_families,
            spec.ip_family_policy
        ),
        (None, None, None, None)
    );
    let address = cluster_ip(&internal);
    let again = create(
        &services,
        &from_json(json!({"metadata": {"name": "again"},
            "spec": {"clusterIP": address, "ports": [{"port": 80}]}})),
    )
    .await;
    assert_eq!(cluster_ip(&again), address);
}

#[tokio::test]
async fn a_job_with_per_index_backoff_limits_defaults_its_backoff_limit_to_max_int32() {
    let (_emu, client) = start().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client, "default");
    let job = |name: &str, per_index: Option<i32>| {
        from_json(json!({"metadata": {"name": name},
            "spec": {"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": per_index,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}))
    };
    let per_index = create(&jobs, &job("per-index", Some(1))).await;
    assert_eq!(
        per_index.spec.and_then(|spec| spec.backoff_limit),
        Some(i32::MAX)
    );
    let plain = create(&jobs, &job("plain", None)).await;
    assert_eq!(plain.spec.and_then(|spec| spec.backoff_limit), Some(6));
}
