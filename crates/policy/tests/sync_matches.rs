//! seeds/000, "Resource Matches": the declared object against the live one, table-driven.

use arbor_policy::keys::ManagementLabel;
use arbor_policy::sync::{CompareFields, Difference, FieldPath, compare, introduced};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shipping-dev",
            "labels": {"app.kubernetes.io/name": "web"},
        },
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}},
        },
    })
}

/// `deployment()` with `edit` applied to a copy.
fn edited(edit: impl FnOnce(&mut Value)) -> Value {
    let mut object = deployment();
    edit(&mut object);
    object
}

fn compare_fields(paths: &[&str]) -> CompareFields {
    CompareFields::parse(paths).expect("valid compareFields")
}

struct Case {
    name: &'static str,
    declared: Value,
    live: Value,
    fields: CompareFields,
    differing_paths: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let all = CompareFields::AllDeclared;
    vec![
        Case {
            name: "identical objects match",
            declared: deployment(),
            live: deployment(),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "server-owned metadata on the live object is ignored",
            declared: deployment(),
            live: edited(|o| {
                o["metadata"]["uid"] = json!("c0ffee");
                o["metadata"]["resourceVersion"] = json!("7");
                o["metadata"]["generation"] = json!(3);
                o["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
                o["metadata"]["managedFields"] = json!([{"manager": "arbor"}]);
                o["metadata"]["selfLink"] = json!("/apis/apps/v1/x");
            }),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "server-owned metadata in an exported declaration is ignored",
            declared: edited(|o| {
                o["metadata"]["uid"] = json!("from-another-cluster");
                o["metadata"]["resourceVersion"] = json!("1");
                o["metadata"]["generation"] = json!(1);
            }),
            live: edited(|o| {
                o["metadata"]["uid"] = json!("c0ffee");
                o["metadata"]["resourceVersion"] = json!("7");
                o["metadata"]["generation"] = json!(3);
            }),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "the management label is ignored whether declared or not",
            declared: edited(|o| {
                o["metadata"]["labels"]["arbor.dev/managed"] = json!("disabled");
            }),
            live: edited(|o| o["metadata"]["labels"]["arbor.dev/managed"] = json!("enabled")),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "labels and annotations added on the cluster are ignored",
            declared: deployment(),
            live: edited(|o| {
                o["metadata"]["labels"]["team"] = json!("shipping");
                o["metadata"]["annotations"] = json!({
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "deployment.kubernetes.io/revision": "4",
                });
            }),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "a declared kubectl last-applied annotation is never compared",
            declared: edited(|o| {
                o["metadata"]["annotations"] =
                    json!({"kubectl.kubernetes.io/last-applied-configuration": "{\"old\":1}"});
            }),
            live: deployment(),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "a declared label changed on the cluster differs",
            declared: deployment(),
            live: edited(|o| o["metadata"]["labels"]["app.kubernetes.io/name"] = json!("api")),
            fields: all.clone(),
            differing_paths: &[r#"metadata.labels["app.kubernetes.io/name"]"#],
        },
        Case {
            name: "status is ignored when not declared",
            declared: deployment(),
            live: edited(|o| o["status"] = json!({"readyReplicas": 1})),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "status is compared when declared",
            declared: edited(|o| o["status"] = json!({"readyReplicas": 2})),
            live: edited(|o| o["status"] = json!({"readyReplicas": 1, "replicas": 2})),
            fields: all.clone(),
            differing_paths: &["status.readyReplicas"],
        },
        Case {
            name: "fields defaulted inside a list element are ignored",
            declared: deployment(),
            live: edited(|o| {
                o["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] =
                    json!("IfNotPresent");
            }),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "a list element changed at its index differs",
            declared: deployment(),
            live: edited(|o| {
                o["spec"]["template"]["spec"]["containers"][0]["image"] = json!("web:2")
            }),
            fields: all.clone(),
            differing_paths: &["spec.template.spec.containers[0].image"],
        },
        Case {
            name: "an element added to a list on the cluster differs by length",
            declared: deployment(),
            live: edited(|o| {
                o["spec"]["template"]["spec"]["containers"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "sidecar", "image": "proxy:1"}));
            }),
            fields: all.clone(),
            differing_paths: &["spec.template.spec.containers"],
        },
        Case {
            name: "a declared field missing on the cluster differs",
            declared: deployment(),
            live: edited(|o| {
                o["spec"].as_object_mut().unwrap().remove("replicas");
            }),
            fields: all.clone(),
            differing_paths: &["spec.replicas"],
        },
        Case {
            name: "a declared null matches an absent field and differs from a set one",
            declared: edited(|o| {
                o["spec"]["paused"] = Value::Null;
                o["spec"]["minReadySeconds"] = Value::Null;
            }),
            live: edited(|o| o["spec"]["minReadySeconds"] = json!(5)),
            fields: all.clone(),
            differing_paths: &["spec.minReadySeconds"],
        },
        Case {
            name: "a declared empty list or map matches an absent field",
            declared: edited(|o| {
                o["spec"]["template"]["spec"]["volumes"] = json!([]);
                o["spec"]["template"]["spec"]["nodeSelector"] = json!({});
            }),
            live: deployment(),
            fields: all.clone(),
            differing_paths: &[],
        },
        Case {
            name: "a declared map missing on the cluster is reported field by field",
            declared: edited(|o| o["spec"]["selector"] = json!({"matchLabels": {"app": "web"}})),
            live: deployment(),
            fields: all.clone(),
            differing_paths: &["spec.selector.matchLabels.app"],
        },
        Case {
            name: "numbers compare by value and types are not coerced",
            declared: edited(|o| {
                o["spec"]["replicas"] = json!(2.0);
                o["spec"]["revisionHistoryLimit"] = json!("10");
            }),
            live: edited(|o| o["spec"]["revisionHistoryLimit"] = json!(10)),
            fields: all.clone(),
            differing_paths: &["spec.revisionHistoryLimit"],
        },
        Case {
            name: "compareFields restricts the comparison to its paths",
            declared: deployment(),
            live: edited(|o| {
                o["metadata"]["labels"]["app.kubernetes.io/name"] = json!("api");
                o["spec"]["replicas"] = json!(5);
            }),
            fields: compare_fields(&["spec.replicas"]),
            differing_paths: &["spec.replicas"],
        },
        Case {
            name: "a compareFields path that is not declared is not compared",
            declared: deployment(),
            live: edited(|o| o["spec"]["strategy"] = json!({"type": "Recreate"})),
            fields: compare_fields(&["spec.strategy", "spec.replicas"]),
            differing_paths: &[],
        },
        Case {
            name: "overlapping compareFields paths report a difference once",
            declared: deployment(),
            live: edited(|o| o["spec"]["replicas"] = json!(5)),
            fields: compare_fields(&["spec.replicas", "spec"]),
            differing_paths: &["spec.replicas"],
        },
        Case {
            name: "compareFields never reaches into server-owned metadata",
            declared: edited(|o| o["metadata"]["resourceVersion"] = json!("1")),
            live: edited(|o| o["metadata"]["resourceVersion"] = json!("9")),
            fields: compare_fields(&["metadata"]),
            differing_paths: &[],
        },
    ]
}

#[test]
fn resource_matches_table() {
    let label = ManagementLabel::arbor();
    for case in cases() {
        let comparison = compare(&case.declared, &case.live, &case.fields, &label);
        let paths: Vec<String> = comparison.paths().map(ToString::to_string).collect();
        assert_eq!(paths, case.differing_paths, "{}", case.name);
        assert_eq!(
            comparison.matches(),
            case.differing_paths.is_empty(),
            "{}",
            case.name
        );
    }
}

#[test]
fn differences_carry_the_declared_and_live_values() {
    let declared = deployment();
    let live = edited(|o| {
        o["spec"]["replicas"] = json!(3);
        o["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sidecar"}));
        o["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("app.kubernetes.io/name");
    });
    let comparison = compare(
        &declared,
        &live,
        &CompareFields::AllDeclared,
        &ManagementLabel::arbor(),
    );
    let rendered: Vec<String> = comparison
        .differences
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        rendered,
        [
            r#"metadata.labels["app.kubernetes.io/name"]: declared "web", missing on the cluster"#,
            "spec.replicas: declared 2, cluster has 3",
            "spec.template.spec.containers: declared a list of length 1, cluster has length 2",
        ]
    );
    assert!(matches!(
        &comparison.differences[1],
        Difference::Differs { path, .. } if *path == "spec.replicas".parse::<FieldPath>().unwrap()
    ));
}

#[test]
fn empty_compare_fields_means_every_declared_field() {
    assert_eq!(
        CompareFields::parse::<&str>(&[]).unwrap(),
        CompareFields::AllDeclared
    );
}

#[test]
fn invalid_compare_fields_name_the_bad_path() {
    let error = CompareFields::parse(&["spec.replicas", "spec..template"]).unwrap_err();
    assert_eq!(error.path, "spec..template");
    assert!(error.to_string().contains("spec..template"), "{error}");
}

/// Drift prevention refuses only what a change introduces: (case, old, new, introduced paths).
#[test]
fn a_change_introduces_only_differences_the_old_object_did_not_have() {
    let label = ManagementLabel::arbor();
    let image = |image: &'static str| {
        edited(move |o| {
            o["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
        })
    };
    let replicas = |n: u64| edited(move |o| o["spec"]["replicas"] = json!(n));
    let image_path = "spec.template.spec.containers[0].image";
    let cases: Vec<(&str, Option<Value>, Value, Vec<&str>)> = vec![
        (
            "a change to a matching field",
            Some(deployment()),
            image("web:2"),
            vec![image_path],
        ),
        (
            "a matching object stays matching",
            Some(deployment()),
            deployment(),
            vec![],
        ),
        (
            "earlier drift left as it was",
            Some(image("web:2")),
            image("web:2"),
            vec![],
        ),
        (
            "earlier drift moved back to git",
            Some(image("web:2")),
            deployment(),
            vec![],
        ),
        (
            "earlier drift moved elsewhere",
            Some(image("web:2")),
            image("web:3"),
            vec![image_path],
        ),
        (
            "earlier drift kept, a new field changed",
            Some(image("web:2")),
            edited(|o| {
                o["spec"]["template"]["spec"]["containers"][0]["image"] = json!("web:2");
                o["spec"]["replicas"] = json!(5);
            }),
            vec!["spec.replicas"],
        ),
        (
            "a create differing from git",
            None,
            replicas(3),
            vec!["spec.replicas"],
        ),
    ];
    for (case, old, new, expected) in cases {
        let found = introduced(
            &deployment(),
            old.as_ref(),
            &new,
            &CompareFields::AllDeclared,
            &label,
        );
        let paths: Vec<String> = found.iter().map(|d| d.path().to_string()).collect();
        assert_eq!(paths, expected, "{case}");
    }
}
