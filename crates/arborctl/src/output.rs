//! Rendering: aligned tables for people, JSON or YAML for scripts.
//!
//! Generated prost messages are not serde types, so each command converts its response into a
//! `serde_json::Value` with the small functions here and in its own module. Field names follow
//! the proto's JSON names (lowerCamelCase); enums are written by their short name (`IN_SYNC`,
//! `GitTrack`), timestamps as RFC 3339, and an unset optional message as `null`.

use std::fmt::Write as _;

use arbor_proto::v1::{Condition, Decision, ObjectRef, SourceKind, SourceRef};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

/// How a command prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    #[default]
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Whether stdout takes colours: a terminal, and `NO_COLOR` unset (no-color.org).
pub fn colour_stdout() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Prints `value` as pretty JSON or as one YAML document.
pub fn print_structured(format: Format, value: &Value) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Yaml => print!("{}", serde_saphyr::to_string(value)?),
        Format::Table => anyhow::bail!("a table is not a structured format"),
    }
    Ok(())
}

/// The characters of `cell` a terminal shows: ANSI colour sequences take no room.
fn visible_width(cell: &str) -> usize {
    let mut width = 0;
    let mut chars = cell.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            width += 1;
        }
    }
    width
}

/// Columns padded to their widest cell; the last column is not padded.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            rows: vec![header.iter().map(|cell| (*cell).to_owned()).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|column| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(column))
                    .map(|cell| visible_width(cell))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let padding = widths[column] - visible_width(cell);
                    let _ = write!(line, "{cell}{:padding$}  ", "");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `GitTrack/<namespace>/<name>` or `ClusterGitTrack/<name>`, as sources are written elsewhere.
pub fn source_name(source: &SourceRef) -> String {
    match source.kind() {
        SourceKind::ClusterGitTrack => format!("ClusterGitTrack/{}", source.name),
        SourceKind::GitTrack => format!("GitTrack/{}/{}", source.namespace, source.name),
        SourceKind::Unspecified => format!("?/{}/{}", source.namespace, source.name),
    }
}

pub fn optional_source_name(source: Option<&SourceRef>) -> String {
    source.map_or_else(|| "-".to_owned(), source_name)
}

/// `Kind/namespace/name` or `Kind/name`, with `.group` after the kind for non-core groups.
pub fn object_name(object: &ObjectRef) -> String {
    let kind = if object.group.is_empty() {
        object.kind.clone()
    } else {
        format!("{}.{}", object.kind, object.group)
    };
    if object.namespace.is_empty() {
        format!("{kind}/{}", object.name)
    } else {
        format!("{kind}/{}/{}", object.namespace, object.name)
    }
}

pub fn optional_object_name(object: Option<&ObjectRef>) -> String {
    object.map_or_else(|| "-".to_owned(), object_name)
}

/// RFC 3339, or `-` when unset.
pub fn timestamp(time: Option<&prost_types::Timestamp>) -> String {
    time.map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// The short name of a proto enum value: `MANAGED_STATE_IN_SYNC` under prefix
/// `MANAGED_STATE_` is `IN_SYNC`.
pub fn enum_name(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix).unwrap_or(full).to_owned()
}

/// Conditions as one line each: `Type=Status Reason: message`.
pub fn condition_line(condition: &Condition) -> String {
    let mut line = format!("{}={}", condition.r#type, condition.status);
    if !condition.reason.is_empty() {
        let _ = write!(line, " {}", condition.reason);
    }
    if !condition.message.is_empty() {
        let _ = write!(line, ": {}", condition.message);
    }
    line
}

pub fn timestamp_json(time: Option<&prost_types::Timestamp>) -> Value {
    time.map_or(Value::Null, |time| Value::String(time.to_string()))
}

pub fn source_json(source: Option<&SourceRef>) -> Value {
    source.map_or(Value::Null, |source| {
        json!({
            "kind": enum_name(source.kind().as_str_name(), "SOURCE_KIND_"),
            "namespace": source.namespace,
            "name": source.name,
            "ref": source_name(source),
        })
    })
}

pub fn object_json(object: Option<&ObjectRef>) -> Value {
    object.map_or(Value::Null, |object| {
        json!({
            "group": object.group,
            "version": object.version,
            "kind": object.kind,
            "namespace": object.namespace,
            "name": object.name,
        })
    })
}

pub fn condition_json(condition: &Condition) -> Value {
    json!({
        "type": condition.r#type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": timestamp_json(condition.last_transition_time.as_ref()),
        "observedGeneration": condition.observed_generation,
    })
}

pub fn conditions_json(conditions: &[Condition]) -> Value {
    Value::Array(conditions.iter().map(condition_json).collect())
}

pub fn decision_json(decision: Option<&Decision>) -> Value {
    decision.map_or(Value::Null, |decision| {
        json!({
            "allowed": decision.allowed,
            "action": enum_name(decision.action().as_str_name(), "ACTION_"),
            "rule": decision.rule,
            "reason": decision.reason,
        })
    })
}

/// `UPDATE (seeds/000 row 2): reason`, the one-line form of a decision.
pub fn decision_line(decision: &Decision) -> String {
    format!(
        "{} ({}): {}",
        enum_name(decision.action().as_str_name(), "ACTION_"),
        decision.rule,
        decision.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_align_to_the_widest_cell() {
        let mut table = Table::new(&["NAME", "COUNT"]);
        table.row(vec!["a-long-name".into(), "1".into()]);
        table.row(vec!["b".into(), "22".into()]);
        assert_eq!(
            table.render(),
            "NAME         COUNT\na-long-name  1\nb            22\n"
        );
    }

    #[test]
    fn objects_are_named_with_group_and_namespace() {
        let object = ObjectRef {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: "team-a".into(),
            name: "web".into(),
        };
        assert_eq!(object_name(&object), "Deployment.apps/team-a/web");
        let namespace = ObjectRef {
            kind: "Namespace".into(),
            name: "team-a".into(),
            ..ObjectRef::default()
        };
        assert_eq!(object_name(&namespace), "Namespace/team-a");
    }
}
