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

fn definition(name: &str, priority: i64, format: &str, description: &str) -> Value {
    json!({"name": name, "type": "string", "format": format, "description": description,
           "priority": priority})
}

/// The columns of kube-apiserver's Event printer: `kubectl get events` shows LAST SEEN, TYPE,
/// REASON, OBJECT and MESSAGE, `-o wide` the rest.
fn event_definitions() -> Vec<Value> {
    vec![
        definition(
            "Last Seen",
            0,
            "",
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        definition(
            "Type",
            0,
            "",
            "Type of this event (Normal, Warning), new types could be added in the future",
        ),
        definition(
            "Reason",
            0,
            "",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        definition("Object", 0, "", "The object that this event is about."),
        definition(
            "Subobject",
            1,
            "",
            "The field of the object this event is about.",
        ),
        definition("Source", 1, "", "The component reporting this event."),
        definition(
            "Message",
            0,
            "",
            "A human-readable description of the status of this operation.",
        ),
        definition(
            "First Seen",
            1,
            "",
            "The time at which the event was first recorded.",
        ),
        definition(
            "Count",
            1,
            "",
            "The number of times this event has occurred.",
        ),
        definition("Name", 1, "name", "Name must be unique within a namespace."),
    ]
}

/// One Event's cells, read from the stored (core `v1`) shape whichever API lists it.
fn event_cells(event: &Value) -> Vec<Value> {
    let text = |path: &str| {
        crate::meta::lookup_path(event, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let age = |path: &str| match text(path) {
        time if time.is_empty() => "<unknown>".to_owned(),
        time => human_age(&time),
    };
    let last_seen = if crate::meta::lookup_path(event, "series.lastObservedTime").is_some() {
        age("series.lastObservedTime")
    } else if !text("lastTimestamp").is_empty() {
        age("lastTimestamp")
    } else {
        age("eventTime")
    };
    let first_seen = if text("firstTimestamp").is_empty() {
        age("eventTime")
    } else {
        age("firstTimestamp")
    };
    let source = match (text("source.component"), text("source.host")) {
        (component, host) if host.is_empty() => component,
        (component, host) => format!("{component}, {host}"),
    };
    let count = crate::meta::lookup_path(event, "series.count")
        .or_else(|| crate::meta::lookup_path(event, "count"))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    vec![
        Value::from(last_seen),
        Value::from(text("type")),
        Value::from(text("reason")),
        Value::from(format!(
            "{}/{}",
            text("involvedObject.kind").to_lowercase(),
            text("involvedObject.name")
        )),
        Value::from(text("involvedObject.fieldPath")),
        Value::from(source),
        Value::from(text("message")),
        Value::from(first_seen),
        Value::from(count.to_string()),
        Value::from(crate::meta::name(event)),
    ]
}

pub fn table(
    kind: &ResourceKind,
    version: &str,
    objects: &[Arc<Value>],
    list_metadata: Value,
    rows: RowObject,
) -> Value {
    let columns = columns(kind, version);
    // Events have a printer of their own in both groups (one storage, see registry::view).
    let events = kind.kind == "Event" && matches!(kind.id.group.as_str(), "" | "events.k8s.io");
    let definitions = if events {
        event_definitions()
    } else {
        let mut definitions = vec![definition(
            "Name",
            0,
            "name",
            "Name must be unique within a namespace.",
        )];
        definitions.extend(columns.iter().map(|column| {
            json!({
                "name": column.name,
                "type": column.column_type,
                "format": column.format,
                "description": column.description,
                "priority": column.priority,
            })
        }));
        definitions
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells = if events {
                event_cells(object)
            } else {
                let mut cells = vec![Value::from(crate::meta::name(object))];
                cells.extend(columns.iter().map(|column| cell(object, column)));
                cells
            };
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
    fn event_rows_show_what_kubectl_get_events_prints() {
        let event = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "web"}, "message": "restarting",
            "source": {"component": "kubelet", "host": "node-1"}, "count": 4});
        let cells = event_cells(&event);
        assert_eq!(
            cells[1..4],
            [json!("Warning"), json!("BackOff"), json!("pod/web")]
        );
        assert_eq!(cells[5], json!("kubelet, node-1"));
        assert_eq!(cells[6], json!("restarting"));
        assert_eq!(cells[8], json!("4"));
        assert_eq!(cells[9], json!("web.1"));
        assert_eq!(cells.len(), event_definitions().len());
    }

    #[test]
    fn ages_are_short() {
        let ten_minutes_ago = (chrono::Utc::now() - chrono::Duration::minutes(10))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        assert_eq!(human_age(&ten_minutes_ago), "10m");
    }
}
