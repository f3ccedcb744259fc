//! `arborctl diff SOURCE [--revision REV | --dir PATH]`: what syncing a revision or a local
//! directory would do, before it is merged.
//!
//! arbor-gitsync's `SyncService.Preview` fetches the revision (into its cache, never over the
//! commit the source applies) or parses the files sent (the source's directory, what its
//! subPath names; bounded in size, same parser and validation as a fetch), and plans the round
//! with the round's own plan. Nothing is written to the cluster. The answer lists each object
//! that would be created, updated (with the fields that change: only fields Arbor sets, as
//! server-side apply does), deleted, left alone without the management label, or ignored, with
//! the seeds/000 row, and the prune guards that would stop the round.
//!
//! As with `kubectl diff`, the exit code is the answer: 0 no changes, 1 changes, 2 when the
//! preview could not be made (including a revision or directory that does not parse), so a
//! CI step can gate a merge on it.

use std::path::PathBuf;

use arbor_api::SourceRef;
use arbor_proto::preview::{MAX_BYTES, MAX_FILES};
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{
    FieldDiff, PlannedObject, PreviewChange, PreviewFile, PreviewFiles, PreviewRequest,
    PreviewResponse, preview_request,
};
use clap::Args;
use serde_json::{Value, json};

use crate::connect::{ConnectionArgs, Service};
use crate::output::{
    Format, OutputArgs, Table, enum_name, object_json, object_name, print_structured,
};
use crate::status::{error_line, proto_source};

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The source: GitTrack/<namespace>/<name> or ClusterGitTrack/<name>.
    pub source: SourceRef,

    /// The revision to preview: a branch, tag or commit of the source's repository
    /// (`main`, `v1.2`, a full commit id, or `branch:main`, `tag:v1`, `commit:<id>`). Without it
    /// and without --dir, the source's configured reference as it is now.
    #[arg(long, conflicts_with = "dir")]
    pub revision: Option<String>,

    /// A local directory to preview instead: the source's directory (what its subPath names),
    /// sent to arbor-gitsync.
    #[arg(long)]
    pub dir: Option<PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

/// The preview was made and syncing would change the cluster (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0} change(s)")]
pub struct Changes(pub usize);

pub async fn run(args: &DiffArgs) -> anyhow::Result<()> {
    let target = match &args.dir {
        Some(dir) => preview_request::Target::Files(read_dir(dir)?),
        None => preview_request::Target::Revision(args.revision.clone().unwrap_or_default()),
    };
    let request = PreviewRequest {
        source: Some(proto_source(&args.source)),
        target: Some(target),
    };
    let remote = args.connection.connect(Service::Sync).await?;
    let response = SyncServiceClient::new(remote.channel())
        .preview(request)
        .await
        .map_err(|status| remote.call_failed("Preview", status))?
        .into_inner();
    let what = match &args.dir {
        Some(dir) => format!("directory {}", dir.display()),
        None if response.commit.is_empty() => "its reference".to_owned(),
        None => format!("commit {}", response.commit),
    };
    match args.output.format {
        Format::Table => print!("{}", render(&args.source, &what, &response)),
        format => print_structured(format, &preview_json(&args.source, &response))?,
    }
    if !response.errors.is_empty() {
        anyhow::bail!(
            "{what} does not parse ({} error(s)): a sync would apply nothing of it",
            response.errors.len()
        );
    }
    match changes(&response) {
        0 => Ok(()),
        count => Err(Changes(count).into()),
    }
}

/// The source's files under `dir`, by the rules a checkout is read with.
fn read_dir(dir: &std::path::Path) -> anyhow::Result<PreviewFiles> {
    let tree = arbor_source::files::read_tree(dir)
        .map_err(|error| anyhow::anyhow!("reading {}: {error}", dir.display()))?;
    let bytes: usize = tree.files.iter().map(|file| file.bytes.len()).sum();
    if tree.files.len() > MAX_FILES || bytes > MAX_BYTES {
        anyhow::bail!(
            "{} holds {} source files of {bytes} bytes; a preview takes at most {MAX_FILES} \
             files and {MAX_BYTES} bytes (preview a pushed revision with --revision instead)",
            dir.display(),
            tree.files.len()
        );
    }
    Ok(PreviewFiles {
        files: tree
            .files
            .into_iter()
            .map(|file| PreviewFile {
                path: file.path,
                content: file.bytes,
            })
            .collect(),
    })
}

fn is_change(change: PreviewChange) -> bool {
    matches!(
        change,
        PreviewChange::Create | PreviewChange::Update | PreviewChange::Delete
    )
}

/// How many objects would be created, updated or deleted.
pub fn changes(response: &PreviewResponse) -> usize {
    response
        .objects
        .iter()
        .filter(|object| is_change(object.change()))
        .count()
}

fn change_name(change: PreviewChange) -> String {
    enum_name(change.as_str_name(), "PREVIEW_CHANGE_").to_ascii_lowercase()
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

/// One line per changed field: `~ path: live -> declared`, `+ path: declared` when the live
/// object lacks it; a Secret's values are never sent.
fn field_line(field: &FieldDiff) -> String {
    match (field.live.is_empty(), field.declared.is_empty()) {
        (true, true) => format!("  ~ {} (values of a Secret are not shown)", field.path),
        (true, false) => format!("  + {}: {}", field.path, field.declared),
        _ => format!("  ~ {}: {} -> {}", field.path, field.live, field.declared),
    }
}

/// The table people read: one row per object (unchanged objects only counted), the fields an
/// update changes below its row, then the guards and a summary.
pub fn render(source: &SourceRef, what: &str, response: &PreviewResponse) -> String {
    let mut out = format!("{source} at {what}\n");
    if !response.errors.is_empty() {
        out.push_str("does not parse; a sync would apply nothing of it and delete nothing:\n");
        for error in &response.errors {
            out.push_str(&format!("  {}\n", error_line(error)));
        }
        return out;
    }
    let mut table = Table::new(&["CHANGE", "OBJECT", "RULE", "FILE", "REASON"]);
    let mut fields: Vec<(String, Vec<String>)> = Vec::new();
    let mut unchanged = 0;
    for object in &response.objects {
        if object.change() == PreviewChange::Unchanged {
            unchanged += 1;
            continue;
        }
        let name = object.object.as_ref().map(object_name).unwrap_or_default();
        let mut change = change_name(object.change());
        if object.held {
            change.push_str(" (held)");
        }
        table.row(vec![
            change,
            name.clone(),
            or_dash(&object.rule).to_owned(),
            or_dash(&object.file).to_owned(),
            object.reason.clone(),
        ]);
        if !object.fields.is_empty() {
            fields.push((name, object.fields.iter().map(field_line).collect()));
        }
    }
    if response.objects.len() > unchanged {
        out.push_str(&table.render());
    }
    for (name, lines) in &fields {
        out.push_str(&format!("{name}:\n"));
        for line in lines {
            out.push_str(&format!("{line}\n"));
        }
    }
    for guard in &response.blocked_by {
        out.push_str(&format!("stopped by a prune guard: {guard}\n"));
    }
    let count = |change| {
        response
            .objects
            .iter()
            .filter(|object| object.change() == change)
            .count()
    };
    out.push_str(&format!(
        "{} to create, {} to update, {} to delete, {unchanged} unchanged, {} left alone \
         (unmanaged), {} ignored\n",
        count(PreviewChange::Create),
        count(PreviewChange::Update),
        count(PreviewChange::Delete),
        count(PreviewChange::Unmanaged),
        count(PreviewChange::Ignored),
    ));
    out
}

fn object_entry(object: &PlannedObject) -> Value {
    json!({
        "object": object_json(object.object.as_ref()),
        "change": enum_name(object.change().as_str_name(), "PREVIEW_CHANGE_"),
        "rule": object.rule,
        "reason": object.reason,
        "file": object.file,
        "held": object.held,
        "fields": object.fields.iter().map(|field| json!({
            "path": field.path,
            "live": field.live,
            "declared": field.declared,
        })).collect::<Vec<_>>(),
    })
}

/// The answer for scripts (`-o json|yaml`).
pub fn preview_json(source: &SourceRef, response: &PreviewResponse) -> Value {
    json!({
        "source": source.to_string(),
        "commit": response.commit,
        "changes": changes(response),
        "objects": response.objects.iter().map(object_entry).collect::<Vec<_>>(),
        "blockedBy": response.blocked_by,
        "errors": response.errors.iter().map(error_line).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_proto::v1::ObjectRef;

    fn planned(name: &str, change: PreviewChange, fields: Vec<FieldDiff>) -> PlannedObject {
        PlannedObject {
            object: Some(ObjectRef {
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "team-a".into(),
                name: name.into(),
                ..ObjectRef::default()
            }),
            change: change.into(),
            rule: "seeds/000 row 2".into(),
            reason: "differs".into(),
            file: format!("{name}.yaml"),
            fields,
            held: false,
        }
    }

    #[test]
    fn only_creates_updates_and_deletes_count_as_changes() {
        let mut response = PreviewResponse {
            objects: vec![
                planned("same", PreviewChange::Unchanged, Vec::new()),
                planned("handmade", PreviewChange::Unmanaged, Vec::new()),
                planned("refused", PreviewChange::Ignored, Vec::new()),
            ],
            ..PreviewResponse::default()
        };
        assert_eq!(changes(&response), 0);
        response
            .objects
            .push(planned("old", PreviewChange::Delete, Vec::new()));
        assert_eq!(changes(&response), 1);
    }

    #[test]
    fn updates_show_each_changed_field_and_secrets_hide_values() {
        let response = PreviewResponse {
            objects: vec![planned(
                "settings",
                PreviewChange::Update,
                vec![
                    FieldDiff {
                        path: "data.color".into(),
                        live: "\"blue\"".into(),
                        declared: "\"green\"".into(),
                    },
                    FieldDiff {
                        path: "data.size".into(),
                        live: String::new(),
                        declared: "\"L\"".into(),
                    },
                    FieldDiff {
                        path: "data.password".into(),
                        live: String::new(),
                        declared: String::new(),
                    },
                ],
            )],
            ..PreviewResponse::default()
        };
        let source: SourceRef = "GitTrack/team-a/config".parse().unwrap();
        let out = render(&source, "commit abc", &response);
        assert!(out.contains("update"), "{out}");
        assert!(
            out.contains("  ~ data.color: \"blue\" -> \"green\""),
            "{out}"
        );
        assert!(out.contains("  + data.size: \"L\""), "{out}");
        assert!(
            out.contains("data.password (values of a Secret are not shown)"),
            "{out}"
        );
        assert!(
            out.contains("0 to create, 1 to update, 0 to delete"),
            "{out}"
        );
    }
}
