//! Sync objects: which kinds a hierarchical repository declares, and how they are inherited.
//!
//! A Sync (`nomos.dev/v1alpha1` as Nomos wrote them, or Arbor's `arbor.dev/v1alpha1`) lists
//! `spec.groups[].group` (empty or absent for the core group), `kinds[].kind`,
//! `kinds[].hierarchyMode` and `kinds[].versions[].version` (at least one), the same rules as
//! the Sync CRD's validation in `arbor-api`. Fields to compare when deciding
//! whether a cluster object matches git may be given per version (`versions[].compareFields`, as
//! Nomos did) or per kind (`kinds[].compareFields`); the kind's list is their union.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::SourceError;
use super::input::Identified;
use crate::code::ErrorCode;
use crate::object::GroupKind;

/// How objects of a kind declared in an abstract namespace reach the namespaces below it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HierarchyMode {
    /// Copied into every descendant namespace (that its selector admits). A namespace that
    /// receives two objects of the same kind and name from its ancestry is an error.
    #[default]
    Inherit,
    /// Not allowed in abstract namespaces at all; objects live only in namespace directories.
    None,
    /// For the core ResourceQuota kind only (as in Nomos, and as the Sync CRD's validation in
    /// `arbor-api` says). Inherited like `Inherit`, but the declaration nearest to the namespace
    /// wins: the namespace's own quota shadows its ancestors', and a nearer abstract namespace
    /// shadows a farther one. Two declarations in the same directory are still an error.
    HierarchicalQuota,
}

impl FromStr for HierarchyMode {
    type Err = String;

    /// The spellings of Nomos' Sync: `inherit`, `none`, `hierarchicalQuota`; `default` is
    /// `inherit`.
    fn from_str(mode: &str) -> Result<Self, String> {
        match mode {
            "inherit" | "default" => Ok(Self::Inherit),
            "none" => Ok(Self::None),
            "hierarchicalQuota" => Ok(Self::HierarchicalQuota),
            other => Err(format!(
                "hierarchyMode must be inherit, none or hierarchicalQuota, not {other:?}"
            )),
        }
    }
}

/// A kind the source declares (seeds/000 "Sync Declared"), with how it is handled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredKind {
    pub group_kind: GroupKind,
    /// The versions the Sync lists (empty in flat repositories, where no Sync exists).
    pub versions: Vec<String>,
    pub hierarchy_mode: HierarchyMode,
    /// The fields compared to decide "resource matches"; empty means the whole object.
    pub compare_fields: Vec<String>,
    /// The file of the Sync that declares the kind (`None` when implied by an object).
    pub declared_in: Option<String>,
}

impl DeclaredKind {
    /// A kind that a flat repository declares just by containing an object of it.
    pub fn implied(group_kind: GroupKind) -> Self {
        Self {
            group_kind,
            versions: Vec::new(),
            hierarchy_mode: HierarchyMode::Inherit,
            compare_fields: Vec::new(),
            declared_in: None,
        }
    }
}

/// The API groups whose Repo, Sync and NamespaceSelector kinds configure a hierarchical repo.
pub const CONFIG_GROUPS: [&str; 2] = ["nomos.dev", "arbor.dev"];

/// The configuration kinds of a hierarchical repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigKind {
    Repo,
    Sync,
    NamespaceSelector,
}

impl ConfigKind {
    pub fn of(object: &Identified<'_>) -> Option<Self> {
        if !CONFIG_GROUPS.contains(&object.gvk.group.as_str()) {
            return None;
        }
        match object.gvk.kind.as_str() {
            "Repo" => Some(Self::Repo),
            "Sync" => Some(Self::Sync),
            "NamespaceSelector" => Some(Self::NamespaceSelector),
            _ => None,
        }
    }
}

/// Collects the kinds that the Syncs declare. Every problem is reported; the kinds of valid
/// entries are returned either way so that later rules can still run.
pub(crate) fn declared_kinds(
    syncs: &[&Identified<'_>],
) -> (BTreeMap<GroupKind, DeclaredKind>, Vec<SourceError>) {
    let mut kinds = BTreeMap::new();
    let mut errors = Vec::new();
    for sync in syncs {
        match sync_entries(sync) {
            Ok(entries) => {
                for entry in entries {
                    if let Some(first) = kinds.get(&entry.group_kind) {
                        errors.push(conflict(sync, first, &entry.group_kind));
                    } else {
                        kinds.insert(entry.group_kind.clone(), entry);
                    }
                }
            }
            Err(message) => errors.push(SourceError::at_object(
                ErrorCode::InvalidSync,
                &sync.location,
                sync.display(),
                message,
            )),
        }
    }
    (kinds, errors)
}

fn conflict(sync: &Identified<'_>, first: &DeclaredKind, group_kind: &GroupKind) -> SourceError {
    SourceError::at_object(
        ErrorCode::ConflictingSync,
        &sync.location,
        sync.display(),
        format!(
            "kind {group_kind} is already declared by the Sync in {}",
            first.declared_in.as_deref().unwrap_or("?")
        ),
    )
}

fn sync_entries(sync: &Identified<'_>) -> Result<Vec<DeclaredKind>, String> {
    let groups = sync
        .value
        .pointer("/spec/groups")
        .and_then(Value::as_array)
        .ok_or("spec.groups must be a list")?;
    let mut entries = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let group_name = optional_str(group, "group", &format!("spec.groups[{g}].group"))?;
        let kinds = group
            .get("kinds")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("spec.groups[{g}].kinds must be a list"))?;
        for (k, kind) in kinds.iter().enumerate() {
            let at = format!("spec.groups[{g}].kinds[{k}]");
            entries.push(kind_entry(kind, group_name, &at, &sync.location.path)?);
        }
    }
    Ok(entries)
}

fn kind_entry(kind: &Value, group: &str, at: &str, path: &str) -> Result<DeclaredKind, String> {
    let name = optional_str(kind, "kind", &format!("{at}.kind"))?;
    if name.is_empty() {
        return Err(format!("{at}.kind is missing"));
    }
    let hierarchy_mode = match optional_str(kind, "hierarchyMode", &format!("{at}.hierarchyMode"))?
    {
        "" => HierarchyMode::default(),
        mode => mode.parse().map_err(|e| format!("{at}: {e}"))?,
    };
    if hierarchy_mode == HierarchyMode::HierarchicalQuota && (group, name) != ("", "ResourceQuota")
    {
        return Err(format!(
            "{at}: hierarchyMode hierarchicalQuota applies to the core ResourceQuota kind only"
        ));
    }
    let mut compare_fields =
        string_list(kind.get("compareFields"), &format!("{at}.compareFields"))?;
    let listed = kind
        .get("versions")
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty())
        .ok_or_else(|| format!("{at}.versions must list at least one version"))?;
    let mut versions = Vec::new();
    for (v, version) in listed.iter().enumerate() {
        let at = format!("{at}.versions[{v}]");
        let number = optional_str(version, "version", &format!("{at}.version"))?;
        if number.is_empty() {
            return Err(format!("{at}.version is missing"));
        }
        versions.push(number.to_owned());
        for field in string_list(version.get("compareFields"), &format!("{at}.compareFields"))? {
            if !compare_fields.contains(&field) {
                compare_fields.push(field);
            }
        }
    }
    Ok(DeclaredKind {
        group_kind: GroupKind::new(group, name),
        versions,
        hierarchy_mode,
        compare_fields,
        declared_in: Some(path.to_owned()),
    })
}

/// A string field that may be absent (read as empty) but must be a string when present.
fn optional_str<'v>(value: &'v Value, field: &str, at: &str) -> Result<&'v str, String> {
    match value.get(field) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("{at} must be a string")),
    }
}

fn string_list(value: Option<&Value>, at: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{at} must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(format!("{at} must be a list of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::input::{SourceFile, identify};
    use serde_json::json;

    fn kinds_of(syncs: Vec<Value>) -> (BTreeMap<GroupKind, DeclaredKind>, Vec<ErrorCode>) {
        let files = [SourceFile::new("system/sync.yaml", syncs)];
        let (objects, _) = identify(&files);
        let refs: Vec<_> = objects.iter().collect();
        let (kinds, errors) = declared_kinds(&refs);
        (kinds, errors.iter().map(|e| e.code).collect())
    }

    fn sync(spec: Value) -> Value {
        json!({"apiVersion": "nomos.dev/v1alpha1", "kind": "Sync",
               "metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn nomos_sync_declares_kinds_with_versions_and_compare_fields() {
        let (kinds, errors) = kinds_of(vec![sync(json!({"groups": [
            {"group": "rbac.authorization.k8s.io", "kinds": [
                {"kind": "Role", "versions": [{"version": "v1", "compareFields": ["rules"]}]}]},
            {"kinds": [{"kind": "ResourceQuota", "hierarchyMode": "hierarchicalQuota",
                        "versions": [{"version": "v1"}]}]}
        ]}))]);
        assert!(errors.is_empty());
        let role = &kinds[&GroupKind::new("rbac.authorization.k8s.io", "Role")];
        assert_eq!(role.compare_fields, ["rules"]);
        assert_eq!(role.versions, ["v1"]);
        assert_eq!(role.hierarchy_mode, HierarchyMode::Inherit);
        assert_eq!(role.declared_in.as_deref(), Some("system/sync.yaml"));
        let quota = &kinds[&GroupKind::new("", "ResourceQuota")];
        assert_eq!(quota.hierarchy_mode, HierarchyMode::HierarchicalQuota);
    }

    #[test]
    fn arbor_sync_accepts_kind_level_compare_fields() {
        let mut arbor = sync(json!({"groups": [{"group": "", "kinds": [
            {"kind": "ConfigMap", "hierarchyMode": "none", "compareFields": ["data"],
             "versions": [{"version": "v1", "compareFields": ["data", "binaryData"]}]}]}]}));
        arbor["apiVersion"] = json!("arbor.dev/v1alpha1");
        let (kinds, errors) = kinds_of(vec![arbor]);
        assert!(errors.is_empty());
        let cm = &kinds[&GroupKind::new("", "ConfigMap")];
        assert_eq!(cm.compare_fields, ["data", "binaryData"]);
        assert_eq!(cm.hierarchy_mode, HierarchyMode::None);
    }

    #[test]
    fn malformed_sync_is_invalid_sync() {
        for spec in [
            json!({}),
            json!({"groups": [{"kinds": [{"versions": []}]}]}),
            json!({"groups": [{"kinds": [{"kind": "X", "hierarchyMode": "sometimes",
                                          "versions": [{"version": "v1"}]}]}]}),
            json!({"groups": [{"kinds": [{"kind": "ConfigMap", "hierarchyMode": "hierarchicalQuota",
                                          "versions": [{"version": "v1"}]}]}]}),
            json!({"groups": [{"kinds": [{"kind": "ConfigMap"}]}]}),
            json!({"groups": [{"kinds": [{"kind": "ConfigMap", "versions": []}]}]}),
            json!({"groups": [{"group": 3, "kinds": []}]}),
        ] {
            assert_eq!(
                kinds_of(vec![sync(spec.clone())]).1,
                [ErrorCode::InvalidSync],
                "{spec}"
            );
        }
    }

    #[test]
    fn one_kind_in_two_sync_entries_is_conflicting_sync() {
        let entry = json!({"groups": [{"kinds": [{"kind": "ConfigMap", "versions": [{"version": "v1"}]}]}]});
        let (kinds, errors) = kinds_of(vec![sync(entry.clone()), sync(entry)]);
        assert_eq!(errors, [ErrorCode::ConflictingSync]);
        assert_eq!(kinds.len(), 1);
    }
}
