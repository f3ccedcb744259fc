//! Sync: which kinds gitsync manages, and how abstract namespaces pass them down (Nomos).
//!
//! seeds/000's first column, "Sync Declared", is answered from these objects: a kind without a
//! Sync is never touched. The Rust type is [`SyncResource`], because `Sync` is a std trait.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{Errors, FieldError};

arbor_kind! {
    /// The kinds to manage, grouped by API group.
    #[derive(Default)]
    pub struct SyncSpec for "Sync" {
        root: "SyncResource",
        status: "SyncStatus",
        shortname: "arbsync",
        doc: "Kinds that Arbor's gitsync manages, and how abstract namespaces pass them down.",
        columns: [
            (name = "Status", type_ = "string", json_path = ".status.status"),
            (name = "Message", type_ = "string", json_path = ".status.message", priority = 1),
            (name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
        ],
    }
    {
        #[serde(default)]
        pub groups: Vec<SyncGroup>,
    }
}

/// One API group; the empty string is the core group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SyncGroup {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kinds: Vec<SyncKind>,
}

/// One kind of the group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncKind {
    pub kind: String,
    /// How objects of this kind in an abstract namespace reach the namespaces below it.
    #[serde(default)]
    pub hierarchy_mode: HierarchyMode,
    #[serde(default)]
    pub versions: Vec<SyncVersion>,
}

/// One served version of the kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncVersion {
    pub version: String,
    /// Field paths (like `spec`, `rules`) compared to decide "Resource Matches"; the whole
    /// object minus server-managed fields when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_fields: Option<Vec<String>>,
}

/// How an object declared in an abstract namespace is inherited.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HierarchyMode {
    /// Copied into every namespace below.
    #[default]
    Inherit,
    /// Not inherited: objects of this kind are only allowed in namespace directories.
    None,
    /// ResourceQuota only: enforced over the sum of the namespaces below.
    HierarchicalQuota,
}

/// What gitsync made of this Sync.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SyncState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Whether the kinds of a Sync are being managed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SyncState {
    /// Not yet looked at.
    Pending,
    /// Every kind is served by the cluster and managed.
    Syncing,
    /// At least one kind cannot be managed; see the message.
    Error,
}

impl SyncSpec {
    /// Checks every kind entry; errors name `spec.groups[i].kinds[j]...`.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Errors::default();
        for (g, group) in self.groups.iter().enumerate() {
            let mut seen = std::collections::BTreeSet::new();
            for (k, kind) in group.kinds.iter().enumerate() {
                let path = format!("spec.groups[{g}].kinds[{k}]");
                if kind.kind.is_empty() {
                    errors.push(FieldError::required(
                        format!("{path}.kind"),
                        "a kind is required",
                    ));
                } else if !seen.insert(kind.kind.as_str()) {
                    errors.push(FieldError::invalid(
                        format!("{path}.kind"),
                        format!("{:?} is listed twice in group {:?}", kind.kind, group.group),
                    ));
                }
                if kind.hierarchy_mode == HierarchyMode::HierarchicalQuota
                    && !(group.group.is_empty() && kind.kind == "ResourceQuota")
                {
                    errors.push(FieldError::forbidden(
                        format!("{path}.hierarchyMode"),
                        "hierarchicalQuota applies to core ResourceQuota only",
                    ));
                }
                if kind.versions.is_empty() {
                    errors.push(FieldError::required(
                        format!("{path}.versions"),
                        "list at least one version",
                    ));
                }
                for (v, version) in kind.versions.iter().enumerate() {
                    if version.version.is_empty() {
                        errors.push(FieldError::required(
                            format!("{path}.versions[{v}].version"),
                            "a version is required",
                        ));
                    }
                }
            }
        }
        errors.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::refused_fields;

    fn kind(kind: &str, mode: HierarchyMode) -> SyncKind {
        SyncKind {
            kind: kind.into(),
            hierarchy_mode: mode,
            versions: vec![SyncVersion {
                version: "v1".into(),
                compare_fields: None,
            }],
        }
    }

    #[test]
    fn nomos_sync_reads_with_camel_case_modes() {
        let spec: SyncSpec = serde_json::from_value(serde_json::json!({
            "groups": [{"group": "", "kinds": [
                {"kind": "ResourceQuota", "hierarchyMode": "hierarchicalQuota", "versions": [{"version": "v1"}]},
            ]}],
        }))
        .unwrap();
        assert_eq!(
            spec.groups[0].kinds[0].hierarchy_mode,
            HierarchyMode::HierarchicalQuota
        );
        assert_eq!(spec.validate(), Ok(()));
    }

    #[test]
    fn hierarchy_mode_defaults_to_inherit() {
        let kind: SyncKind = serde_json::from_value(serde_json::json!({"kind": "Role"})).unwrap();
        assert_eq!(kind.hierarchy_mode, HierarchyMode::Inherit);
    }

    #[test]
    fn invalid_entries_are_named_by_index() {
        let spec = SyncSpec {
            groups: vec![SyncGroup {
                group: "rbac.authorization.k8s.io".into(),
                kinds: vec![
                    kind("Role", HierarchyMode::Inherit),
                    kind("Role", HierarchyMode::HierarchicalQuota),
                    SyncKind {
                        versions: vec![],
                        ..kind("RoleBinding", HierarchyMode::None)
                    },
                ],
            }],
        };
        let fields = refused_fields(spec.validate());
        assert_eq!(
            fields,
            [
                "spec.groups[0].kinds[1].kind",
                "spec.groups[0].kinds[1].hierarchyMode",
                "spec.groups[0].kinds[2].versions",
            ]
        );
    }
}
