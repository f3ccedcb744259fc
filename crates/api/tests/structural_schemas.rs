//! Every CRD schema is structural, as the API server requires
//! (<https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema>).
//!
//! The walk checks the rules that a derived schema can break: every node is typed unless it
//! keeps unknown fields; no logical junctors (`allOf`, `anyOf`, `oneOf`, `not`) carrying types,
//! defaults or descriptions; no `$ref`; no tuple `items`; no object that is both a struct and
//! a map. It also pins where unknown fields are kept: only in the declared objects of
//! GitTrackObjects and in Application manifests.

use std::collections::BTreeSet;

use serde_json::Value;

const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];
const FORBIDDEN_IN_JUNCTORS: [&str; 5] = [
    "type",
    "default",
    "description",
    "additionalProperties",
    "nullable",
];

fn schemas() -> Vec<(String, Value)> {
    arbor_api::crds::all()
        .into_iter()
        .map(|crd| {
            let version = &crd.spec.versions[0];
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .unwrap_or_else(|| panic!("{} has no schema", crd.spec.names.kind));
            (
                crd.spec.names.kind.clone(),
                serde_json::to_value(schema).unwrap(),
            )
        })
        .collect()
}

fn is_true(node: &Value, key: &str) -> bool {
    node.get(key).and_then(Value::as_bool) == Some(true)
}

/// Walks one node; `path` is its JSON path from the root (`.spec.data`, `.spec.manifest[]`).
fn check(path: &str, node: &Value, problems: &mut Vec<String>, preserved: &mut BTreeSet<String>) {
    let Some(object) = node.as_object() else {
        problems.push(format!("{path}: schema is not an object: {node}"));
        return;
    };
    let preserve_unknown = is_true(node, "x-kubernetes-preserve-unknown-fields");
    if preserve_unknown {
        preserved.insert(path.to_owned());
    }
    let typed = object
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !typed && !preserve_unknown && !is_true(node, "x-kubernetes-int-or-string") {
        problems.push(format!("{path}: no type"));
    }
    if object.contains_key("$ref") {
        problems.push(format!("{path}: $ref is not allowed"));
    }
    if object.contains_key("properties") && object.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    for junctor in JUNCTORS {
        let Some(branches) = object.get(junctor) else {
            continue;
        };
        let branches: Vec<&Value> = match branches {
            Value::Array(list) => list.iter().collect(),
            single => vec![single],
        };
        for branch in branches {
            for key in FORBIDDEN_IN_JUNCTORS {
                if branch.get(key).is_some() {
                    problems.push(format!("{path}: {junctor} sets {key}"));
                }
            }
        }
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            check(&format!("{path}.{name}"), child, problems, preserved);
        }
    }
    match object.get("additionalProperties") {
        Some(Value::Bool(_)) | None => {}
        Some(child) => check(&format!("{path}.*"), child, problems, preserved),
    }
    match object.get("items") {
        Some(Value::Array(_)) => problems.push(format!("{path}: tuple items are not allowed")),
        Some(child) => check(&format!("{path}[]"), child, problems, preserved),
        None => {}
    }
}

#[test]
fn every_crd_schema_is_structural() {
    let mut problems = Vec::new();
    for (kind, schema) in schemas() {
        let mut kind_problems = Vec::new();
        check("", &schema, &mut kind_problems, &mut BTreeSet::new());
        problems.extend(kind_problems.into_iter().map(|p| format!("{kind}{p}")));
    }
    assert!(
        problems.is_empty(),
        "non-structural schemas:\n{}",
        problems.join("\n")
    );
}

#[test]
fn unknown_fields_are_kept_only_in_declared_objects_and_manifests() {
    for (kind, schema) in schemas() {
        let mut preserved = BTreeSet::new();
        check("", &schema, &mut Vec::new(), &mut preserved);
        let expected: &[&str] = match kind.as_str() {
            "GitTrackObject" | "ClusterGitTrackObject" => &[".spec.data"],
            "Application" => &[
                ".spec.manifest[]",
                ".spec.observerSchema[]",
                ".status.lastAppliedManifest[]",
                ".status.lastObservedManifest[]",
            ],
            _ => &[],
        };
        let expected: BTreeSet<String> = expected.iter().map(|p| p.to_string()).collect();
        assert_eq!(preserved, expected, "{kind}");
    }
}

#[test]
fn checker_finds_untyped_and_junctor_problems() {
    let bad = serde_json::json!({
        "type": "object",
        "properties": {
            "free": {},
            "either": {"type": "object", "oneOf": [{"type": "string"}]},
        },
    });
    let mut problems = Vec::new();
    check("", &bad, &mut problems, &mut BTreeSet::new());
    assert_eq!(problems, [".free: no type", ".either: oneOf sets type"]);
}

#[test]
fn spec_is_required_and_reference_carries_its_cel_rule() {
    for (kind, schema) in schemas() {
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        // A SubNamespace without spec is valid, as Accurate documents it (#17.1).
        assert_eq!(
            required.contains(&Value::from("spec")),
            kind != "SubNamespace",
            "{kind}: spec required?"
        );
        if kind.ends_with("GitTrack") {
            let rules = &schema["properties"]["spec"]["properties"]["reference"]["x-kubernetes-validations"];
            assert!(
                rules[0]["rule"].as_str().unwrap().contains("size() == 1"),
                "{kind}"
            );
        }
    }
}
