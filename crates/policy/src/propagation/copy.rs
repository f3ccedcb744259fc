//! Making the copy of a source object for another namespace, and telling whether a live copy
//! differs from it.
//!
//! A copy is the source with its metadata rebuilt from three things only: the name, the
//! labels and the annotations (minus `propagateLabelKeyExcludes` /
//! `propagateAnnotationKeyExcludes`), plus the target namespace and
//! `<domain>/from=<source namespace>`. Everything else in the source's metadata is its own
//! identity or the API server's bookkeeping (uid, resourceVersion, creationTimestamp,
//! managedFields, ownerReferences, generation, selfLink, finalizers, ...), and `status` is
//! the server's too, so none of it is copied. A ServiceAccount also loses `secrets`: its
//! token secrets belong to the source namespace.
//!
//! The copy carries the source's `<domain>/propagate` annotation, which is what makes copies
//! propagate onward to the namespaces below the target.
//!
//! A live copy *differs* when some field set in the desired copy is not set to the same value
//! in the live one (Kubernetes' "semantic deep derivative"): fields the desired copy leaves
//! unset (null, empty strings, empty maps and lists) are not compared, and neither is anything
//! the server or others added to the live copy, such as extra labels, `status` or
//! `metadata.uid`.

use serde_json::{Map, Value};

use crate::object::{self, ObjectKey};

use super::config::{CREATED_BY_LABEL, PropagationRules};
use super::glob::KeyPatterns;

/// Metadata fields the API server owns; they never appear in a desired copy.
pub const SERVER_METADATA_FIELDS: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "generation",
    "selfLink",
    "finalizers",
];

/// Why an object cannot be copied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot copy {object}: {reason}")]
pub struct CopyError {
    pub object: String,
    pub reason: String,
}

/// The copy of `source` for `namespace`.
pub fn build_copy(
    rules: &PropagationRules,
    source: &Value,
    namespace: &str,
) -> Result<Value, CopyError> {
    let key = ObjectKey::of(source).map_err(|missing| CopyError {
        object: describe(source),
        reason: missing.to_string(),
    })?;
    let source_namespace = key.namespace.as_deref().ok_or_else(|| CopyError {
        object: key.to_string(),
        reason: "it has no metadata.namespace; only namespaced objects are propagated".into(),
    })?;
    let Value::Object(fields) = source else {
        unreachable!("an object with a key is a JSON object")
    };

    let mut labels = kept(object::labels(source), &rules.label_excludes);
    if let Some(created_by) = &rules.created_by {
        labels.insert(CREATED_BY_LABEL.to_owned(), Value::from(created_by.clone()));
    }
    let mut annotations = kept(object::annotations(source), &rules.annotation_excludes);
    annotations.insert(
        rules.keys.from_annotation.clone(),
        Value::from(source_namespace),
    );

    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::from(key.name.as_str()));
    metadata.insert("namespace".into(), Value::from(namespace));
    metadata.insert("labels".into(), Value::Object(labels));
    metadata.insert("annotations".into(), Value::Object(annotations));

    let is_service_account =
        key.group_kind.group.is_empty() && key.group_kind.kind == "ServiceAccount";
    let mut copy = Map::new();
    for (field, value) in fields {
        match field.as_str() {
            "metadata" => {
                copy.insert(field.clone(), Value::Object(metadata.clone()));
            }
            "status" => {}
            "secrets" if is_service_account => {}
            _ => {
                copy.insert(field.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(copy))
}

fn kept(
    values: std::collections::BTreeMap<String, String>,
    excludes: &KeyPatterns,
) -> Map<String, Value> {
    values
        .into_iter()
        .filter(|(k, _)| !excludes.matches(k))
        .map(|(k, v)| (k, Value::from(v)))
        .collect()
}

fn describe(object: &Value) -> String {
    let kind = object::str_at(object, &["kind"]).unwrap_or("object");
    match (object::namespace(object), object::name(object)) {
        (Some(ns), Some(name)) => format!("{kind} {ns}/{name}"),
        (None, Some(name)) => format!("{kind} {name}"),
        _ => format!("{kind} without a name"),
    }
}

/// Whether applying `desired` would change `live`.
pub fn copy_differs(desired: &Value, live: &Value) -> bool {
    !is_derivative(&without_server_fields(desired), live)
}

fn without_server_fields(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
        if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
            for field in SERVER_METADATA_FIELDS {
                metadata.remove(*field);
            }
        }
    }
    object
}

/// Whether every value set in `expected` is set to the same value in `actual`.
fn is_derivative(expected: &Value, actual: &Value) -> bool {
    match expected {
        Value::Null => true,
        Value::String(s) if s.is_empty() => true,
        Value::Object(fields) if fields.is_empty() => true,
        Value::Array(items) if items.is_empty() => true,
        Value::Object(fields) => actual.as_object().is_some_and(|actual| {
            fields.iter().all(|(k, v)| match actual.get(k) {
                Some(a) => is_derivative(v, a),
                None => is_derivative(v, &Value::Null),
            })
        }),
        Value::Array(items) => actual.as_array().is_some_and(|actual| {
            items.len() == actual.len()
                && items.iter().zip(actual).all(|(e, a)| is_derivative(e, a))
        }),
        Value::Number(n) => actual.as_number().is_some_and(|a| same_number(n, a)),
        scalar => scalar == actual,
    }
}

/// JSON numbers are compared by value: `1` and `1.0` are the same number.
fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    a == b || a.as_f64().zip(b.as_f64()).is_some_and(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use crate::propagation::config::PropagationConfig;
    use serde_json::json;

    fn rules() -> PropagationRules {
        PropagationConfig {
            propagate_label_key_excludes: vec!["*kubernetes.io/*".into()],
            propagate_annotation_key_excludes: vec!["kubectl.kubernetes.io/*".into()],
            ..Default::default()
        }
        .compile(&Keys::default())
        .unwrap()
    }

    fn source() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {
                "name": "pull", "namespace": "root", "uid": "u1", "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 2,
                "selfLink": "/api/v1/namespaces/root/secrets/pull",
                "managedFields": [{"manager": "kubectl"}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u0"}],
                "finalizers": ["example.com/keep"],
                "labels": {"team": "a", "app.kubernetes.io/name": "x"},
                "annotations": {"arbor.dev/propagate": "update",
                                "kubectl.kubernetes.io/last-applied-configuration": "{}"}
            },
            "type": "Opaque",
            "data": {"k": "dg=="},
            "status": {"phase": "x"}
        })
    }

    #[test]
    fn copy_replaces_namespace_sets_from_and_strips_server_fields() {
        let copy = build_copy(&rules(), &source(), "team-a").unwrap();
        assert_eq!(
            copy,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {
                    "name": "pull", "namespace": "team-a",
                    "labels": {"team": "a"},
                    "annotations": {"arbor.dev/propagate": "update", "arbor.dev/from": "root"}
                },
                "type": "Opaque",
                "data": {"k": "dg=="}
            })
        );
    }

    #[test]
    fn service_account_copy_drops_token_secrets() {
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "ci", "namespace": "root"},
            "secrets": [{"name": "ci-token"}], "automountServiceAccountToken": false});
        let copy = build_copy(&rules(), &sa, "team-a").unwrap();
        assert!(copy.get("secrets").is_none());
        assert_eq!(copy["automountServiceAccountToken"], json!(false));
    }

    #[test]
    fn copy_of_an_object_without_identity_names_what_is_missing() {
        let err = build_copy(
            &rules(),
            &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "root"}}),
            "a",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot copy Secret without a name: object has no metadata.name"
        );
        let err = build_copy(
            &rules(),
            &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}}),
            "a",
        )
        .unwrap_err();
        assert!(err.reason.contains("namespace"), "{err}");
    }

    #[test]
    fn live_copy_with_server_fields_and_extra_labels_does_not_differ() {
        let desired = build_copy(&rules(), &source(), "team-a").unwrap();
        let mut live = desired.clone();
        live["metadata"]["uid"] = json!("u2");
        live["metadata"]["resourceVersion"] = json!("99");
        live["metadata"]["labels"]["added-by-someone"] = json!("x");
        live["status"] = json!({"observed": true});
        assert!(!copy_differs(&desired, &live));
    }

    #[test]
    fn live_copy_with_changed_or_missing_values_differs() {
        let desired = build_copy(&rules(), &source(), "team-a").unwrap();
        let mut changed = desired.clone();
        changed["data"]["k"] = json!("other");
        assert!(copy_differs(&desired, &changed));
        let mut unlabelled = desired.clone();
        unlabelled["metadata"]["labels"] = json!({});
        assert!(copy_differs(&desired, &unlabelled));
        let mut foreign = desired.clone();
        foreign["metadata"]["annotations"]["arbor.dev/from"] = json!("elsewhere");
        assert!(copy_differs(&desired, &foreign));
    }

    #[test]
    fn unset_values_in_the_desired_copy_are_not_compared_but_lists_are_exact() {
        assert!(is_derivative(
            &json!({"a": "", "b": null, "c": {}}),
            &json!({"a": "x"})
        ));
        assert!(!is_derivative(
            &json!({"l": [1, 2]}),
            &json!({"l": [1, 2, 3]})
        ));
        assert!(is_derivative(&json!({"n": 1}), &json!({"n": 1.0})));
        assert!(!is_derivative(&json!({"b": false}), &json!({})));
    }
}
