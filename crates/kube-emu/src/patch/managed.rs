//! `metadata.managedFields`: who owns which fields, read from and written back to an object.
//!
//! An entry is identified like kube-apiserver identifies managers: by manager name, operation,
//! subresource, and, for `Update` only, the API version (an applier keeps one entry whatever
//! version it applies with). Entries are written sorted as kube sorts them — operation, time,
//! manager, API version, subresource — and entries owning nothing are dropped.

use std::collections::BTreeMap;

use chrono::DateTime;
use serde_json::{Map, Value, json};

use super::fieldset::FieldSet;

/// The operation of a managedFields entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update, or a non-apply patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// The identity of a manager.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManagerId {
    /// The field manager name.
    pub manager: String,
    /// How it wrote.
    pub operation: Operation,
    /// The API version, for `Update` entries only.
    pub api_version: Option<String>,
    /// The subresource written through (`status`), if any.
    pub subresource: Option<String>,
}

impl ManagerId {
    /// Identity of `manager` writing with `operation` through `subresource`.
    pub fn new(
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: Option<&str>,
    ) -> ManagerId {
        ManagerId {
            manager: manager.to_owned(),
            operation,
            api_version: (operation == Operation::Update).then(|| api_version.to_owned()),
            subresource: subresource.filter(|s| !s.is_empty()).map(str::to_owned),
        }
    }

    /// How kube-apiserver names this manager in a conflict message:
    /// `"name"`, `"name" with subresource "status"`, `"name" using apps/v1`.
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if let Some(subresource) = &self.subresource {
            out.push_str(&format!(" with subresource {subresource:?}"));
        }
        if let Some(api_version) = &self.api_version {
            out.push_str(&format!(" using {api_version}"));
        }
        out
    }
}

/// What one manager owns.
#[derive(Debug, Clone)]
pub struct Ownership {
    /// The API version it last wrote with.
    pub api_version: String,
    /// When it last changed something (RFC 3339).
    pub time: Option<String>,
    /// The fields it owns.
    pub fields: FieldSet,
}

/// All managers of an object.
#[derive(Debug, Clone, Default)]
pub struct ManagedFields {
    /// Ownership by manager.
    pub managers: BTreeMap<ManagerId, Ownership>,
}

impl ManagedFields {
    /// Reads `metadata.managedFields`. An unreadable list is dropped as a whole, as kube-apiserver
    /// does: ownership that cannot be read cannot be enforced.
    pub fn read(object: &Value) -> ManagedFields {
        object
            .pointer("/metadata/managedFields")
            .and_then(|entries| Self::parse(entries).ok())
            .unwrap_or_default()
    }

    /// Parses a managedFields list; several entries of one manager are united.
    pub fn parse(entries: &Value) -> Result<ManagedFields, String> {
        let list = entries
            .as_array()
            .ok_or("metadata.managedFields must be a list")?;
        let mut out = ManagedFields::default();
        for (index, entry) in list.iter().enumerate() {
            let text = |name: &str| entry.get(name).and_then(Value::as_str);
            let operation = match text("operation") {
                Some("Apply") => Operation::Apply,
                Some("Update") => Operation::Update,
                other => {
                    return Err(format!(
                        "metadata.managedFields[{index}].operation: unknown operation {other:?}"
                    ));
                }
            };
            let api_version = text("apiVersion").unwrap_or_default();
            let id = ManagerId::new(
                text("manager").unwrap_or_default(),
                operation,
                api_version,
                text("subresource"),
            );
            let fields = match entry.get("fieldsV1") {
                Some(encoded) => FieldSet::from_fields_v1(encoded)
                    .map_err(|error| format!("metadata.managedFields[{index}]: {error}"))?,
                None => FieldSet::new(),
            };
            let ownership = out.managers.entry(id).or_insert_with(|| Ownership {
                api_version: api_version.to_owned(),
                time: None,
                fields: FieldSet::new(),
            });
            ownership.fields = ownership.fields.union(&fields);
            ownership.time = text("time").map(str::to_owned).or(ownership.time.take());
        }
        Ok(out)
    }

    /// Everything owned by anyone.
    pub fn all_owned(&self) -> FieldSet {
        self.managers
            .values()
            .fold(FieldSet::new(), |all, ownership| {
                all.union(&ownership.fields)
            })
    }

    /// Removes `fields` from every manager but `except`.
    pub fn release(&mut self, fields: &FieldSet, except: Option<&ManagerId>) {
        for (id, ownership) in &mut self.managers {
            if Some(id) != except {
                ownership.fields = ownership.fields.difference(fields);
            }
        }
    }

    /// The managedFields list, sorted like kube's, without entries that own nothing.
    pub fn to_value(&self) -> Value {
        let mut entries: Vec<(&ManagerId, &Ownership)> = self
            .managers
            .iter()
            .filter(|(_, ownership)| !ownership.fields.is_empty())
            .collect();
        let seconds = |ownership: &Ownership| {
            ownership
                .time
                .as_deref()
                .and_then(|time| DateTime::parse_from_rfc3339(time).ok())
                .map_or(0, |time| time.timestamp())
        };
        entries.sort_by(|(id_a, own_a), (id_b, own_b)| {
            id_a.operation
                .cmp(&id_b.operation)
                .then_with(|| seconds(own_a).cmp(&seconds(own_b)))
                .then_with(|| id_a.manager.cmp(&id_b.manager))
                .then_with(|| own_a.api_version.cmp(&own_b.api_version))
                .then_with(|| id_a.subresource.cmp(&id_b.subresource))
        });
        Value::Array(
            entries
                .into_iter()
                .map(|(id, ownership)| {
                    let mut entry = Map::new();
                    entry.insert("manager".into(), json!(id.manager));
                    entry.insert("operation".into(), json!(id.operation.as_str()));
                    entry.insert("apiVersion".into(), json!(ownership.api_version));
                    if let Some(time) = &ownership.time {
                        entry.insert("time".into(), json!(time));
                    }
                    entry.insert("fieldsType".into(), json!("FieldsV1"));
                    entry.insert("fieldsV1".into(), ownership.fields.to_fields_v1());
                    if let Some(subresource) = &id.subresource {
                        entry.insert("subresource".into(), json!(subresource));
                    }
                    Value::Object(entry)
                })
                .collect(),
        )
    }

    /// Writes the list into `object.metadata.managedFields` (removing it when empty).
    pub fn write(&self, object: &mut Value) {
        let entries = self.to_value();
        let Some(root) = object.as_object_mut() else {
            return;
        };
        let metadata = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(metadata) = metadata.as_object_mut() {
            if entries.as_array().is_some_and(Vec::is_empty) {
                metadata.shift_remove("managedFields");
            } else {
                metadata.insert("managedFields".into(), entries);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_sort_apply_first() {
        let entries = json!([
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
             "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "arbor", "operation": "Apply", "apiVersion": "v1",
             "time": "2024-02-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:a": {}}}}
        ]);
        let managed = ManagedFields::parse(&entries).unwrap();
        let written = managed.to_value();
        assert_eq!(written[0]["manager"], "arbor");
        assert_eq!(written[1], entries[0]);
    }

    #[test]
    fn update_managers_are_named_with_their_version() {
        let id = ManagerId::new("kubectl", Operation::Update, "apps/v1", Some("status"));
        assert_eq!(
            id.describe(),
            r#""kubectl" with subresource "status" using apps/v1"#
        );
        let applier = ManagerId::new("arbor", Operation::Apply, "v1", None);
        assert_eq!(applier.describe(), r#""arbor""#);
    }

    #[test]
    fn empty_entries_are_dropped() {
        let mut managed = ManagedFields::default();
        managed.managers.insert(
            ManagerId::new("gone", Operation::Update, "v1", None),
            Ownership {
                api_version: "v1".into(),
                time: None,
                fields: FieldSet::new(),
            },
        );
        let mut object = json!({"metadata": {"name": "x", "managedFields": []}});
        managed.write(&mut object);
        assert_eq!(object, json!({"metadata": {"name": "x"}}));
    }

    #[test]
    fn unknown_operation_is_an_error() {
        let error = ManagedFields::parse(&json!([{"manager": "m", "operation": "Patch"}]));
        assert!(error.unwrap_err().contains("operation"));
    }
}
