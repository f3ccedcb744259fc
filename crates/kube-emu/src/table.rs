//! `meta.k8s.io/v1` Table output, which `kubectl get` asks for: a Name column, a CRD's
//! additionalPrinterColumns (or Age when it declares none), and Age for built-in kinds.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::jsonpath::JsonPath;
use crate::present::{RowObject, partial_metadata};
use crate::registry::{PrinterColumn, ResourceKind};

fn column(
    name: &str,
    column_type: &str,
    format: &str,
    description: &str,
    json_path: &str,
) -> PrinterColumn {
    PrinterColumn {
        name: name.to_owned(),
        column_type: column_type.to_owned(),
        format: format.to_owned(),
        description: description.to_owned(),
        priority: 0,
        json_path: json_path.to_owned(),
    }
}

fn age_column() -> PrinterColumn {
    column(
        "Age",
        "date",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        ".metadata.creationTimestamp",
    )
}

/// The columns after Name for `kind` in `version`.
fn columns(kind: &ResourceKind, version: &str) -> Vec<PrinterColumn> {
    let declared = kind
        .version(version)
        .map(|served| served.printer_columns.clone())
        .unwrap_or_default();
    if !declared.is_empty() {
        return declared;
    }
    let mut columns = Vec::new();
    match kind.kind.as_str() {
        "Namespace" => columns.push(column(
            "Status",
            "string",
            "",
            "The status of the namespace",
            ".status.phase",
        )),
        "Secret" => columns.push(column(
            "Type",
            "string",
            "",
            "The type of the secret",
            ".type",
        )),
        "Lease" => columns.push(column(
            "Holder",
            "string",
            "",
            "The holder of the lease",
            ".spec.holderIdentity",
        )),
        _ => {}
    }
    columns.push(age_column());
    columns
}

/// The first value a printer column's JSONPath reaches, as kube-apiserver's table convertor
/// shows it.
fn evaluate(object: &Value, path: &str) -> Option<Value> {
    JsonPath::parse(path)
        .ok()?
        .find(object)
        .first()
        .map(|value| (*value).clone())
}

/// kube's short human durations: 45s, 5m12s, 17m, 3h20m, 26h, 3d4h, 12d.
pub fn human_age(timestamp: &str) -> String {
    let Ok(created) = chrono::DateTime::parse_from_rfc3339(timestamp) else {
        return "<invalid>".into();
    };
    let seconds = (chrono::Utc::now() - created.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86400);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{minutes}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{minutes}m"),
        s if s < 8 * 3600 => format!("{hours}h{}m", minutes % 60),
        s if s < 48 * 3600 => format!("{hours}h"),
        s if s < 8 * 86400 => format!("{days}d{}h", hours % 24),
        _ => format!("{days}d"),
    }
}

fn cell(object: &Value, column: &PrinterColumn) -> Value {
    match evaluate(object, &column.json_path) {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(text)) if column.column_type == "date" => Value::from(human_age(&text)),
        Some(Value::String(text)) => Value::from(text),
        Some(value @ (Value::Number(_) | Value::Bool(_))) => value,
        Some(other) => Value::from(other.to_string()),
    }
}

pub fn table(
    kind: &ResourceKind,
    version: &str,
    objects: &[Arc<Value>],
    list_metadata: Value,
    rows: RowObject,
) -> Value {
    let columns = columns(kind, version);
    let mut definitions = vec![json!({
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name must be unique within a namespace.",
        "priority": 0,
    })];
    definitions.extend(columns.iter().map(|column| {
        json!({
            "name": column.name,
            "type": column.column_type,
            "format": column.format,
            "description": column.description,
            "priority": column.priority,
        })
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![Value::from(crate::meta::name(object))];
            cells.extend(columns.iter().map(|column| cell(object, column)));
            let mut row = json!({"cells": cells});
            match rows {
                RowObject::None => {}
                RowObject::Metadata => row["object"] = partial_metadata(object),
                RowObject::Object => {
                    row["object"] = crate::present::in_version(kind, version, object)
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_paths_follow_fields_and_indexes() {
        let object = json!({"spec": {"size": 3, "ports": [{"port": 80}]}});
        assert_eq!(evaluate(&object, ".spec.size"), Some(json!(3)));
        assert_eq!(evaluate(&object, ".spec.ports[0].port"), Some(json!(80)));
        assert_eq!(evaluate(&object, ".spec.missing"), None);
    }

    #[test]
    fn the_ready_column_of_arbors_crds_reads_the_ready_condition() {
        let object = json!({"status": {"conditions": [
            {"type": "Stalled", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let column = column(
            "Ready",
            "string",
            "",
            "",
            r#".status.conditions[?(@.type=="Ready")].status"#,
        );
        assert_eq!(cell(&object, &column), json!("True"));
    }

    #[test]
    fn ages_are_short() {
        let ten_minutes_ago = (chrono::Utc::now() - chrono::Duration::minutes(10))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        assert_eq!(human_age(&ten_minutes_ago), "10m");
    }
}
