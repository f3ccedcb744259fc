//! CustomResourceDefinitions: reading a CRD object into a served kind, and the status the
//! apiextensions controller would write (names accepted, established).

use serde_json::{Value, json};

use super::{
    ALL_VERBS, NameRule, PrinterColumn, ResourceId, ResourceKind, ScaleSubresource, ServedVersion,
};
use crate::meta::{self, string_list};
use crate::schema::StructuralSchema;
use crate::status::Cause;

/// The finalizer that holds a deleted CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The served kind a CRD defines, or the reasons the CRD is invalid.
pub fn kind_from_crd(crd: &Value) -> Result<ResourceKind, Vec<Cause>> {
    let mut causes = Vec::new();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let text = |path: &str| {
        meta::lookup_path(&spec, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let group = text("group");
    let plural = text("names.plural");
    let kind = text("names.kind");
    for (field, value) in [
        ("spec.group", &group),
        ("spec.names.plural", &plural),
        ("spec.names.kind", &kind),
    ] {
        if value.is_empty() {
            causes.push(Cause::required(field, ""));
        }
    }
    if group.is_empty() || !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &Value::from(group.clone()),
            "should be a domain with at least one dot",
        ));
    }
    let expected_name = format!("{plural}.{group}");
    if meta::name(crd) != expected_name {
        causes.push(Cause::invalid(
            "metadata.name",
            &Value::from(meta::name(crd)),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = text("scope");
    let namespaced = match scope.as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        _ => {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "spec.scope".into(),
                message: format!(
                    "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
                ),
            });
            true
        }
    };
    let versions = served_versions(&spec, &mut causes);
    if !causes.is_empty() {
        return Err(causes);
    }
    let singular = match text("names.singular") {
        singular if singular.is_empty() => kind.to_lowercase(),
        singular => singular,
    };
    Ok(ResourceKind {
        id: ResourceId::new(&group, &plural),
        kind,
        singular,
        short_names: string_list(meta::lookup_path(&spec, "names.shortNames")),
        categories: string_list(meta::lookup_path(&spec, "names.categories")),
        namespaced,
        versions,
        verbs: ALL_VERBS.to_vec(),
        name_rule: NameRule::Subdomain,
        tracks_generation: true,
        field_labels: Vec::new(),
        field_subresources: Vec::new(),
        view: None,
        custom: true,
    })
}

/// The served versions, storage version first; exactly one version must be the storage version.
fn served_versions(spec: &Value, causes: &mut Vec<Cause>) -> Vec<ServedVersion> {
    let declared = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if declared.is_empty() {
        causes.push(Cause::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return Vec::new();
    }
    let storage_count = declared
        .iter()
        .filter(|version| version.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage_count != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            &Value::from(storage_count),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut versions: Vec<(bool, ServedVersion)> = declared
        .iter()
        .enumerate()
        .filter(|(_, version)| {
            version.get("served").and_then(Value::as_bool) == Some(true)
                || version.get("storage").and_then(Value::as_bool) == Some(true)
        })
        .map(|(index, version)| {
            let storage = version.get("storage").and_then(Value::as_bool) == Some(true);
            let schema = meta::lookup_path(version, "schema.openAPIV3Schema").cloned();
            let structural = schema.as_ref().and_then(|schema| {
                let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
                StructuralSchema::compile(schema, &path)
                    .map_err(|problems| {
                        causes.extend(problems.into_iter().map(|problem| {
                            Cause::invalid(problem.path, &Value::from(problem.value), &problem.why)
                        }));
                    })
                    .ok()
            });
            let served = version.get("served").and_then(Value::as_bool) == Some(true);
            (
                storage,
                ServedVersion {
                    name: version
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    served,
                    status_subresource: meta::lookup_path(version, "subresources.status").is_some(),
                    scale: meta::lookup_path(version, "subresources.scale").map(|scale| {
                        let path =
                            |key: &str| scale.get(key).and_then(Value::as_str).map(str::to_owned);
                        ScaleSubresource {
                            spec_replicas_path: path("specReplicasPath").unwrap_or_default(),
                            status_replicas_path: path("statusReplicasPath").unwrap_or_default(),
                            label_selector_path: path("labelSelectorPath"),
                        }
                    }),
                    printer_columns: printer_columns(version),
                    schema,
                    structural,
                },
            )
        })
        .collect();
    // Storage version first: the registry stores and defaults to it.
    versions.sort_by_key(|(storage, _)| !*storage);
    versions.into_iter().map(|(_, version)| version).collect()
}

fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(columns) = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    columns
        .iter()
        .map(|column| {
            let field = |name: &str| {
                column
                    .get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            PrinterColumn {
                name: field("name"),
                column_type: field("type"),
                format: field("format"),
                description: field("description"),
                priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
                json_path: field("jsonPath"),
            }
        })
        .collect()
}

/// The status the apiextensions controller reports once it serves the CRD.
pub fn established_status(crd: &Value, kind: &ResourceKind, now: &str) -> Value {
    let names = crd
        .get("spec")
        .and_then(|spec| spec.get("names"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut accepted = names;
    accepted["singular"] = Value::from(kind.singular.clone());
    accepted["listKind"] = Value::from(kind.list_kind());
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({
            "type": kind,
            "status": "True",
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        })
    };
    json!({
        "acceptedNames": accepted,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": [kind.storage_version().name],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                ],
            },
        })
    }

    #[test]
    fn a_crd_becomes_a_served_kind_with_its_storage_version_first() {
        let kind = kind_from_crd(&widget_crd()).expect("valid CRD");
        assert_eq!(kind.id, ResourceId::new("example.com", "widgets"));
        assert_eq!(kind.storage_version().name, "v1");
        assert!(kind.has_status_subresource());
        assert_eq!(kind.versions[0].printer_columns[0].json_path, ".spec.size");
        assert_eq!(kind.short_names, vec!["wd".to_owned()]);
        assert_eq!(kind.singular, "widget");
    }

    #[test]
    fn an_unserved_storage_version_is_stored_but_not_served() {
        let mut crd = widget_crd();
        crd["spec"]["versions"][1]["served"] = json!(false);
        let kind = kind_from_crd(&crd).expect("valid CRD");
        assert_eq!(kind.storage_version().name, "v1");
        assert!(kind.version("v1").is_none());
        assert!(kind.version("v1beta1").is_some());
    }

    #[test]
    fn a_crd_named_otherwise_than_plural_dot_group_is_invalid() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("gadgets.example.com");
        let causes = kind_from_crd(&crd).expect_err("name mismatch");
        assert_eq!(causes[0].field, "metadata.name");
    }
}
