//! Validation of custom observer schemas against the application's manifest: one test per
//! reason code, each checking the exact resource and path the error names.

use arbor_policy::observe::{
    LIST_MAX_LENGTH_KEY, LIST_MIN_LENGTH_KEY, ListBounds, ObserverSchema, Origin,
    SchemaErrorReason, SchemaErrors, SchemaNode, default_schema, parse_custom_schema,
};
use serde_json::{Value, json};

/// An `echo` application: a Deployment and a Service.
fn manifest() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "echo"},
            "spec": {
                "selector": {"matchLabels": {"app": "echo"}},
                "template": {
                    "metadata": {"labels": {"app": "echo"}},
                    "spec": {"containers": [{"name": "echo", "image": "echoserver:1.10",
                        "ports": [{"containerPort": 8080}]}]}
                }
            }
        }),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "echo"},
            "spec": {"type": "NodePort", "selector": {"app": "echo"},
                "ports": [{"port": 8080, "protocol": "TCP", "targetPort": 8080}]}
        }),
    ]
}

fn control(min: Value, max: Value) -> Value {
    json!({LIST_MIN_LENGTH_KEY: min, LIST_MAX_LENGTH_KEY: max})
}

/// A Service schema observing `ports` with `ports` as the list (control entry included).
fn service_observing_ports(ports: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
        "spec": {"ports": ports}})
}

/// A Deployment schema whose container list is `containers`.
fn deployment_observing_containers(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "echo"},
        "spec": {"template": {"spec": {"containers": containers}}}})
}

/// The errors `custom` gets, as `(printed location, code)` pairs.
fn errors_of(custom: &[Value]) -> Vec<(String, &'static str)> {
    let SchemaErrors(errors) =
        parse_custom_schema(custom, &manifest()).expect_err("the schema must be refused");
    errors
        .iter()
        .map(|error| {
            let location = error.to_string();
            let location = location.split(':').next().unwrap().to_owned();
            (location, error.reason.code())
        })
        .collect()
}

fn single_error(custom: Value) -> (String, &'static str) {
    let errors = errors_of(&[custom]);
    assert_eq!(errors.len(), 1, "exactly one error expected: {errors:?}");
    errors.into_iter().next().unwrap()
}

#[test]
fn schema_example_with_bounded_ports_and_unmanifested_field_is_valid() {
    let custom = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
        "spec": {"selector": {"app": null},
            "ports": [{"port": null, "protocol": null, "targetPort": null},
                {"port": null, "protocol": null, "targetPort": null}, control(json!(1), json!(4))],
            "sessionAffinity": null}});
    let parsed = parse_custom_schema(&[custom], &manifest()).unwrap();
    let ports = parsed[0]
        .root
        .field("spec")
        .and_then(|spec| spec.field("ports"))
        .unwrap();
    let SchemaNode::List { elements, bounds } = ports else {
        panic!("ports must be a list node: {ports:?}");
    };
    assert_eq!(elements.len(), 2);
    assert_eq!(*bounds, ListBounds::from_schema(1, 4));
}

#[test]
fn max_length_zero_means_unlimited_and_allows_any_minimum() {
    let custom = service_observing_ports(json!([{"port": null}, control(json!(3), json!(0))]));
    let parsed = parse_custom_schema(&[custom], &manifest()).unwrap();
    let written = parsed[0].to_value();
    assert_eq!(written["spec"]["ports"][1], control(json!(3), json!(0)));
}

#[test]
fn error_names_resource_index_identity_and_exact_path() {
    let containers = json!([{"name": null}, {LIST_MIN_LENGTH_KEY: 1}]);
    let custom = [
        service_observing_ports(json!([control(json!(1), json!(1))])),
        deployment_observing_containers(containers),
    ];
    assert_eq!(
        errors_of(&custom),
        [(
            "resource[1] (apps/v1 Deployment echo) .spec.template.spec.containers[-1]".to_owned(),
            "MalformedListControl"
        )]
    );
}

#[test]
fn all_errors_are_collected_not_just_the_first() {
    let custom = [
        json!({"kind": "Service", "metadata": {"name": "echo"}, "spec": {"type": "NodePort"}}),
        deployment_observing_containers(json!([{"image": null}])),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "echo"}}),
    ];
    assert_eq!(
        errors_of(&custom),
        [
            (
                "resource[0] (? Service echo) .apiVersion".to_owned(),
                "MissingIdentity"
            ),
            (
                "resource[0] (? Service echo) .spec.type".to_owned(),
                "LeafNotNull"
            ),
            (
                "resource[1] (apps/v1 Deployment echo) .spec.template.spec.containers[-1]"
                    .to_owned(),
                "MissingListControl"
            ),
            (
                "resource[2] (v1 ConfigMap echo) .".to_owned(),
                "ResourceNotInManifest"
            ),
        ]
    );
}

#[test]
fn schema_resource_that_is_not_a_mapping_is_refused() {
    assert_eq!(
        single_error(json!(["v1", "Service"])),
        ("resource[0] (? ? ?) .".to_owned(), "ResourceNotAMapping")
    );
}

#[test]
fn missing_api_version_is_refused() {
    let custom = json!({"kind": "Service", "metadata": {"name": "echo"}});
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (? Service echo) .apiVersion".to_owned(),
            "MissingIdentity"
        )
    );
}

#[test]
fn missing_kind_is_refused() {
    let custom = json!({"apiVersion": "v1", "kind": null, "metadata": {"name": "echo"}});
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 ? echo) .kind".to_owned(),
            "MissingIdentity"
        )
    );
}

#[test]
fn missing_metadata_name_is_refused() {
    for metadata in [json!({"namespace": null}), Value::Null] {
        let custom = json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata});
        assert_eq!(
            single_error(custom),
            (
                "resource[0] (v1 Service ?) .metadata.name".to_owned(),
                "MissingIdentity"
            )
        );
    }
    let without_metadata = json!({"apiVersion": "v1", "kind": "Service"});
    assert_eq!(single_error(without_metadata).1, "MissingIdentity");
}

#[test]
fn identity_that_is_not_a_string_is_refused() {
    let custom = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": 7}});
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service ?) .metadata.name".to_owned(),
            "IdentityNotAString"
        )
    );
}

#[test]
fn metadata_that_is_not_a_mapping_is_refused() {
    let custom = json!({"apiVersion": "v1", "kind": "Service", "metadata": "echo"});
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service ?) .metadata".to_owned(),
            "MetadataNotAMapping"
        )
    );
}

#[test]
fn observed_field_with_a_value_is_refused() {
    let custom = service_observing_ports(json!([{"port": 8080}, control(json!(1), json!(1))]));
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service echo) .spec.ports[0].port".to_owned(),
            "LeafNotNull"
        )
    );
}

#[test]
fn list_without_control_entry_is_refused() {
    for ports in [json!([{"port": null}]), json!([])] {
        assert_eq!(
            single_error(service_observing_ports(ports)),
            (
                "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
                "MissingListControl"
            )
        );
    }
}

#[test]
fn control_entry_without_both_lengths_is_refused() {
    let custom = service_observing_ports(json!([{LIST_MAX_LENGTH_KEY: 2}]));
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
            "MalformedListControl"
        )
    );
}

#[test]
fn control_entry_with_unknown_key_is_refused() {
    let custom = service_observing_ports(
        json!([{LIST_MIN_LENGTH_KEY: 1, LIST_MAX_LENGTH_KEY: 1, "extra": 1}]),
    );
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
            "MalformedListControl"
        )
    );
}

#[test]
fn list_length_that_is_not_an_integer_is_refused() {
    for length in [json!("1"), json!(1.5), Value::Null] {
        let custom = service_observing_ports(json!([control(length, json!(2))]));
        assert_eq!(
            single_error(custom),
            (
                "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
                "ListLengthNotInteger"
            )
        );
    }
}

#[test]
fn negative_list_length_is_refused() {
    let custom = service_observing_ports(json!([control(json!(0), json!(-1))]));
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
            "NegativeListLength"
        )
    );
}

#[test]
fn minimum_above_maximum_is_refused() {
    let custom = service_observing_ports(json!([control(json!(3), json!(2))]));
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
            "MinAboveMax"
        )
    );
}

#[test]
fn maximum_below_the_number_of_observed_elements_is_refused() {
    let custom = service_observing_ports(
        json!([{"port": null}, {"port": null}, control(json!(1), json!(1))]),
    );
    assert_eq!(
        single_error(custom),
        (
            "resource[0] (v1 Service echo) .spec.ports[-1]".to_owned(),
            "MaxBelowObservedElements"
        )
    );
}

#[test]
fn schema_shape_differing_from_manifest_is_refused() {
    let custom = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
        "spec": {"selector": [null, control(json!(0), json!(0))], "type": {"name": null}}});
    let errors = errors_of(&[custom]);
    assert_eq!(
        errors,
        [
            (
                "resource[0] (v1 Service echo) .spec.selector".to_owned(),
                "ShapeDiffersFromManifest"
            ),
            (
                "resource[0] (v1 Service echo) .spec.type".to_owned(),
                "ShapeDiffersFromManifest"
            ),
        ]
    );
}

#[test]
fn schema_resource_not_in_manifest_is_refused() {
    let wrong_version =
        json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "echo"}});
    assert_eq!(
        single_error(wrong_version),
        (
            "resource[0] (apps/v1beta1 Deployment echo) .".to_owned(),
            "ResourceNotInManifest"
        )
    );
    let other_namespace = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "echo", "namespace": "elsewhere"}});
    assert_eq!(single_error(other_namespace).1, "ResourceNotInManifest");
}

#[test]
fn resource_observed_twice_is_refused() {
    let minimal = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"}});
    let errors = parse_custom_schema(&[minimal.clone(), minimal], &manifest())
        .unwrap_err()
        .0;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].index, 1);
    assert_eq!(
        errors[0].reason,
        SchemaErrorReason::DuplicateResource { first: 0 }
    );
}

#[test]
fn manifest_resource_without_identity_is_refused() {
    let mut manifest = manifest();
    manifest.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}));
    let errors = ObserverSchema::for_application(&manifest, &[])
        .unwrap_err()
        .0;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].origin, Origin::Manifest);
    assert_eq!(
        errors[0].to_string().split(':').next().unwrap(),
        "manifest[2] (v1 ConfigMap ?) ."
    );
    assert_eq!(
        errors[0].reason,
        SchemaErrorReason::MissingIdentity {
            field: "metadata.name"
        }
    );
}

#[test]
fn default_schema_observes_every_manifest_field_with_lists_bounded_to_their_length() {
    let schema = default_schema(&manifest()[0]).unwrap();
    assert_eq!(
        schema.to_value(),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "echo"},
            "spec": {
                "selector": {"matchLabels": {"app": null}},
                "template": {
                    "metadata": {"labels": {"app": null}},
                    "spec": {"containers": [
                        {"name": null, "image": null,
                            "ports": [{"containerPort": null}, control(json!(1), json!(1))]},
                        control(json!(1), json!(1))
                    ]}
                }
            }
        })
    );
}

#[test]
fn custom_schema_replaces_the_default_only_for_the_resources_it_names() {
    let custom = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"}});
    let schema =
        ObserverSchema::for_application(&manifest(), std::slice::from_ref(&custom)).unwrap();
    assert_eq!(
        schema.to_value(),
        [default_schema(&manifest()[0]).unwrap().to_value(), custom]
    );
}

#[test]
fn written_schema_parses_back_to_the_same_schema() {
    let schema = ObserverSchema::for_application(&manifest(), &[]).unwrap();
    let reparsed = ObserverSchema::for_application(&manifest(), &schema.to_value()).unwrap();
    assert_eq!(reparsed, schema);
}

#[test]
fn schema_namespace_selects_one_resource_and_no_namespace_selects_all_of_that_name() {
    let service_in = |namespace: &str| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "echo", "namespace": namespace}, "spec": {"type": "ClusterIP"}})
    };
    let manifest = [service_in("a"), service_in("b")];
    let only_b = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "echo", "namespace": "b"}, "spec": {"type": null}});
    let parsed = parse_custom_schema(&[only_b], &manifest).unwrap();
    let namespaces: Vec<_> = parsed
        .iter()
        .map(|schema| schema.id.namespace.as_deref())
        .collect();
    assert_eq!(namespaces, [Some("b")]);

    let every_echo = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"}});
    let parsed = parse_custom_schema(&[every_echo], &manifest).unwrap();
    let namespaces: Vec<_> = parsed
        .iter()
        .map(|schema| schema.id.namespace.as_deref())
        .collect();
    assert_eq!(namespaces, [Some("a"), Some("b")]);
}
