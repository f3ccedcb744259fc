//! Hydration: writing the exact objects a source would apply, one file per object.
//!
//! The output has the shape of Nomos' `nomos hydrate`: one directory per namespace holding the
//! Namespace and every object that lands in it (inherited ones included), `cluster/` for the
//! other cluster-scoped objects, and one file per object named `<kind>_<name>.yaml` in lower
//! case. When two objects of one directory would share a file name (same kind and name in
//! different API groups), both are named `<kind>.<group>_<name>`. Objects of a flat source that
//! leave their namespace to the source go to `_source-namespace/`, a name no namespace can have.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use arbor_policy::layout::{DeclaredObject, DeclaredState, Scope, builtin_scope};
use arbor_policy::object::ObjectKey;

use crate::error::HydrateError;

/// The directory of cluster-scoped objects.
pub const CLUSTER_DIR: &str = "cluster";
/// The directory of flat objects without a namespace of their own.
pub const SOURCE_NAMESPACE_DIR: &str = "_source-namespace";

/// How hydrated objects are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Yaml,
    Json,
}

impl OutputFormat {
    fn extension(self) -> &'static str {
        match self {
            Self::Yaml => "yaml",
            Self::Json => "json",
        }
    }
}

/// One output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HydratedFile {
    /// Relative to the output directory.
    pub path: PathBuf,
    pub contents: String,
}

/// Renders every declared object into its output file, in path order.
pub fn render(
    state: &DeclaredState,
    format: OutputFormat,
) -> Result<Vec<HydratedFile>, HydrateError> {
    let mut by_dir: BTreeMap<&str, Vec<(&ObjectKey, &DeclaredObject)>> = BTreeMap::new();
    for (key, declared) in &state.objects {
        by_dir
            .entry(directory_of(key)?)
            .or_default()
            .push((key, declared));
    }
    let mut files = Vec::with_capacity(state.objects.len());
    for (dir, objects) in by_dir {
        let mut name_count: BTreeMap<String, usize> = BTreeMap::new();
        for (key, _) in &objects {
            *name_count.entry(file_stem(key, false)).or_default() += 1;
        }
        for (key, declared) in objects {
            let qualified = name_count[&file_stem(key, false)] > 1;
            let stem = file_stem(key, qualified);
            files.push(HydratedFile {
                path: Path::new(dir).join(format!("{stem}.{}", format.extension())),
                contents: serialize(key, &declared.object, format)?,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Writes `files` under `out`, which must be absent or empty: hydrate never overwrites or mixes
/// with files it did not write.
pub fn write(out: &Path, files: &[HydratedFile]) -> Result<(), HydrateError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HydrateError::Io { path, source }
    };
    if out.exists() {
        let mut entries = fs::read_dir(out).map_err(io(out))?;
        if entries.next().is_some() {
            return Err(HydrateError::OutputNotEmpty(out.to_path_buf()));
        }
    }
    for file in files {
        let path = out.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::write(&path, &file.contents).map_err(io(&path))?;
    }
    Ok(())
}

fn directory_of(key: &ObjectKey) -> Result<&str, HydrateError> {
    let dir = match &key.namespace {
        Some(namespace) => namespace.as_str(),
        None if key.group_kind.group.is_empty() && key.group_kind.kind == "Namespace" => {
            key.name.as_str()
        }
        None if builtin_scope(&key.group_kind) == Some(Scope::Namespaced) => SOURCE_NAMESPACE_DIR,
        None => return Ok(CLUSTER_DIR),
    };
    if dir == CLUSTER_DIR {
        return Err(HydrateError::NamespaceNamedCluster);
    }
    Ok(dir)
}

fn file_stem(key: &ObjectKey, qualified: bool) -> String {
    let kind = &key.group_kind;
    let stem = if qualified && !kind.group.is_empty() {
        format!("{}.{}_{}", kind.kind, kind.group, key.name)
    } else {
        format!("{}_{}", kind.kind, key.name)
    };
    stem.to_lowercase()
}

fn serialize(
    key: &ObjectKey,
    object: &serde_json::Value,
    format: OutputFormat,
) -> Result<String, HydrateError> {
    let render_error = |message: String| HydrateError::Render {
        object: key.to_string(),
        message,
    };
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(object)
            .map(|text| text + "\n")
            .map_err(|e| render_error(e.to_string())),
        OutputFormat::Yaml => {
            serde_saphyr::to_string(object).map_err(|e| render_error(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_policy::layout::{SourceFile, parse_flat};
    use serde_json::json;

    fn flat(objects: Vec<serde_json::Value>) -> DeclaredState {
        parse_flat(&[SourceFile::new("all.yaml", objects)]).unwrap()
    }

    fn paths(files: &[HydratedFile]) -> Vec<String> {
        files.iter().map(|f| f.path.display().to_string()).collect()
    }

    #[test]
    fn objects_go_to_their_namespace_cluster_or_source_namespace_directory() {
        let state = flat(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
            // RBAC names may have capitals (the path-segment rule); file names are lower case.
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "Settings", "namespace": "team"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "loose"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"}}),
        ]);
        let files = render(&state, OutputFormat::Yaml).unwrap();
        assert_eq!(
            paths(&files),
            [
                "_source-namespace/configmap_loose.yaml",
                "cluster/clusterrole_reader.yaml",
                "team/namespace_team.yaml",
                "team/role_settings.yaml",
            ]
        );
        let reparsed: serde_json::Value = serde_saphyr::from_str(&files[3].contents).unwrap();
        assert_eq!(reparsed["metadata"]["name"], "Settings");
    }

    #[test]
    fn same_kind_and_name_in_two_groups_get_qualified_names() {
        let state = flat(vec![
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web", "namespace": "a"}}),
            json!({"apiVersion": "extensions/v1beta1", "kind": "Ingress", "metadata": {"name": "web", "namespace": "a"}}),
        ]);
        let files = render(&state, OutputFormat::Json).unwrap();
        assert_eq!(
            paths(&files),
            [
                "a/ingress.extensions_web.json",
                "a/ingress.networking.k8s.io_web.json"
            ]
        );
        assert!(files[0].contents.ends_with("}\n"));
    }

    #[test]
    fn a_namespace_named_cluster_cannot_be_hydrated() {
        let state = flat(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cluster"}}),
        ]);
        assert!(matches!(
            render(&state, OutputFormat::Yaml),
            Err(HydrateError::NamespaceNamedCluster)
        ));
    }

    #[test]
    fn write_refuses_a_non_empty_output_directory() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("mine.txt"), "keep").unwrap();
        let files = [HydratedFile {
            path: "a/b.yaml".into(),
            contents: "x: 1\n".into(),
        }];
        assert!(matches!(
            write(dir.path(), &files),
            Err(HydrateError::OutputNotEmpty(_))
        ));
        assert_eq!(
            fs::read_to_string(dir.path().join("mine.txt")).unwrap(),
            "keep"
        );
        let out = dir.path().join("out");
        write(&out, &files).unwrap();
        assert_eq!(fs::read_to_string(out.join("a/b.yaml")).unwrap(), "x: 1\n");
    }
}
