//! `arborctl status [SOURCE]`: what arbor-gitsync knows about every source it watches.
//!
//! One table row per source (commit and the discovered/applied/ignored/in-sync counters), then
//! a block per source: repository and revision, conditions, errors with their codes and the
//! files whose objects were not applied. `-o json|yaml` prints the full status of every source.

use std::fmt::Write as _;

use arbor_api::SourceRef;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{self, GetStatusRequest, SourceError, SourceKind, SourceStatus};
use clap::Args;
use serde_json::{Value, json};

use crate::connect::{ConnectionArgs, Service};
use crate::output::{
    Format, OutputArgs, Table, condition_line, conditions_json, optional_source_name,
    print_structured, source_json, timestamp, timestamp_json,
};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this source: GitTrack/<namespace>/<name> or ClusterGitTrack/<name>.
    pub source: Option<SourceRef>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

pub async fn run(args: &StatusArgs) -> anyhow::Result<()> {
    let remote = args.connection.connect(Service::Sync).await?;
    let request = GetStatusRequest {
        source: args.source.as_ref().map(proto_source),
    };
    let response = SyncServiceClient::new(remote.channel())
        .get_status(request)
        .await
        .map_err(|status| remote.call_failed("GetStatus", status))?
        .into_inner();
    match args.output.format {
        Format::Table => print!(
            "{}",
            render_table_coloured(&response.sources, crate::output::colour_stdout())
        ),
        format => {
            let sources = by_state(&response.sources)
                .into_iter()
                .map(source_status_json)
                .collect();
            print_structured(format, &json!({ "sources": Value::Array(sources) }))?;
        }
    }
    Ok(())
}

/// The proto form of a source reference.
pub fn proto_source(source: &SourceRef) -> v1::SourceRef {
    match source {
        SourceRef::GitTrack { namespace, name } => v1::SourceRef {
            kind: SourceKind::GitTrack.into(),
            namespace: namespace.clone(),
            name: name.clone(),
        },
        SourceRef::ClusterGitTrack { name } => v1::SourceRef {
            kind: SourceKind::ClusterGitTrack.into(),
            namespace: String::new(),
            name: name.clone(),
        },
    }
}

/// How a source is doing, as its kstatus conditions say; the order is the table's, so the
/// sources that need an operator come first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SourceState {
    /// Ready=False or Stalled=True: the last round failed or cannot go on.
    Failing,
    /// A round is under way or no round has finished yet.
    Reconciling,
    /// Syncing is paused.
    Suspended,
    /// Ready=True.
    Ready,
}

impl SourceState {
    pub fn of(status: &SourceStatus) -> Self {
        let condition = |kind: &str| {
            status
                .conditions
                .iter()
                .find(|condition| condition.r#type == kind)
                .map(|condition| condition.status.as_str())
        };
        if condition("Stalled") == Some("True") || condition("Ready") == Some("False") {
            Self::Failing
        } else if status.suspended {
            Self::Suspended
        } else if condition("Ready") == Some("True") && condition("Reconciling") != Some("True") {
            Self::Ready
        } else {
            Self::Reconciling
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Failing => "Failing",
            Self::Reconciling => "Reconciling",
            Self::Suspended => "Suspended",
            Self::Ready => "Ready",
        }
    }

    /// The word, coloured when `colour` (red failing, yellow in progress, green ready).
    fn cell(self, colour: bool) -> String {
        if !colour {
            return self.word().to_owned();
        }
        let code = match self {
            Self::Failing => "31",
            Self::Reconciling | Self::Suspended => "33",
            Self::Ready => "32",
        };
        format!("\u{1b}[{code}m{}\u{1b}[0m", self.word())
    }
}

/// The sources in the table's order: failing first, then by name.
fn by_state(sources: &[SourceStatus]) -> Vec<&SourceStatus> {
    let mut sorted: Vec<&SourceStatus> = sources.iter().collect();
    sorted.sort_by_cached_key(|status| {
        (
            SourceState::of(status),
            optional_source_name(status.source.as_ref()),
        )
    });
    sorted
}

/// The summary table, then one detail block per source that has conditions, errors or
/// ignored files. Failing sources come first.
pub fn render_table(sources: &[SourceStatus]) -> String {
    render_table_coloured(sources, false)
}

/// [`render_table`], with the state coloured when `colour`.
pub fn render_table_coloured(sources: &[SourceStatus], colour: bool) -> String {
    if sources.is_empty() {
        return "No sources.\n".to_owned();
    }
    let sources = by_state(sources);
    let mut table = Table::new(&[
        "SOURCE",
        "STATE",
        "COMMIT",
        "DISCOVERED",
        "APPLIED",
        "IGNORED",
        "IN-SYNC",
        "ERRORS",
        "LAST SYNC",
    ]);
    for status in &sources {
        let counters = status.counters.unwrap_or_default();
        table.row(vec![
            optional_source_name(status.source.as_ref()),
            SourceState::of(status).cell(colour),
            short_commit(&status.observed_commit),
            counters.discovered.to_string(),
            counters.applied.to_string(),
            counters.ignored.to_string(),
            counters.in_sync.to_string(),
            status.errors.len().to_string(),
            timestamp(status.last_sync_time.as_ref()),
        ]);
    }
    let mut out = table.render();
    for status in sources {
        out.push_str(&render_details(status));
    }
    out
}

fn render_details(status: &SourceStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{}", optional_source_name(status.source.as_ref()));
    let _ = writeln!(
        out,
        "  repository: {} ({})",
        status.repository, status.reference
    );
    let _ = writeln!(out, "  commit: {}", or_dash(&status.observed_commit));
    if status.suspended {
        out.push_str("  suspended: syncing is paused\n");
    }
    if let Some(line) = handled_by_line(status) {
        let _ = writeln!(out, "  {line}");
    }
    if !status.conditions.is_empty() {
        out.push_str("  conditions:\n");
        for condition in &status.conditions {
            let _ = writeln!(out, "    {}", condition_line(condition));
        }
    }
    if !status.errors.is_empty() {
        out.push_str("  errors:\n");
        for error in &status.errors {
            let _ = writeln!(out, "    {}", error_line(error));
        }
    }
    if !status.ignored_files.is_empty() {
        out.push_str("  ignored files:\n");
        let mut files: Vec<_> = status.ignored_files.iter().collect();
        files.sort();
        for (file, reason) in files {
            let _ = writeln!(out, "    {file}: {reason}");
        }
    }
    out
}

/// `shard 3, handled by arbor-gitsync-7d9f-x2` when gitsync shares its sources by shard (or
/// only the replica, or nothing, as far as the status tells).
fn handled_by_line(status: &SourceStatus) -> Option<String> {
    let replica = (!status.handled_by.is_empty()).then_some(status.handled_by.as_str());
    match (status.shard, replica) {
        (Some(shard), Some(replica)) => Some(format!("shard {shard}, handled by {replica}")),
        (Some(shard), None) => Some(format!("shard {shard}")),
        (None, Some(replica)) => Some(format!("handled by {replica}")),
        (None, None) => None,
    }
}

/// `CODE file object: message`, leaving out the location parts that are not known.
pub fn error_line(error: &SourceError) -> String {
    let mut line = error.code.clone();
    for part in [&error.file, &error.object] {
        if !part.is_empty() {
            line.push(' ');
            line.push_str(part);
        }
    }
    format!("{line}: {}", error.message)
}

fn short_commit(commit: &str) -> String {
    if commit.is_empty() {
        "-".to_owned()
    } else {
        commit.chars().take(12).collect()
    }
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

pub fn source_status_json(status: &SourceStatus) -> Value {
    let counters = status.counters.unwrap_or_default();
    let mut ignored: Vec<_> = status.ignored_files.iter().collect();
    ignored.sort();
    json!({
        "source": source_json(status.source.as_ref()),
        "repository": status.repository,
        "reference": status.reference,
        "observedCommit": status.observed_commit,
        "lastSyncTime": timestamp_json(status.last_sync_time.as_ref()),
        "counters": {
            "discovered": counters.discovered,
            "applied": counters.applied,
            "ignored": counters.ignored,
            "inSync": counters.in_sync,
        },
        "ignoredFiles": ignored
            .into_iter()
            .map(|(file, reason)| (file.clone(), Value::String(reason.clone())))
            .collect::<serde_json::Map<_, _>>(),
        "errors": status.errors.iter().map(|error| json!({
            "code": error.code,
            "file": error.file,
            "object": error.object,
            "message": error.message,
        })).collect::<Vec<_>>(),
        "conditions": conditions_json(&status.conditions),
        "suspended": status.suspended,
        "shard": status.shard,
        "handledBy": (!status.handled_by.is_empty()).then_some(&status.handled_by),
        "state": SourceState::of(status).word(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_proto::v1::Condition;

    fn source(name: &str, conditions: &[(&str, &str)]) -> SourceStatus {
        SourceStatus {
            source: Some(v1::SourceRef {
                kind: SourceKind::ClusterGitTrack.into(),
                namespace: String::new(),
                name: name.to_owned(),
            }),
            conditions: conditions
                .iter()
                .map(|(kind, status)| Condition {
                    r#type: (*kind).to_owned(),
                    status: (*status).to_owned(),
                    ..Condition::default()
                })
                .collect(),
            ..SourceStatus::default()
        }
    }

    #[test]
    fn failing_sources_come_first_then_by_name() {
        let sources = [
            source("a-ready", &[("Ready", "True")]),
            source("b-failing", &[("Ready", "False")]),
            source("c-busy", &[("Ready", "True"), ("Reconciling", "True")]),
            source("d-stalled", &[("Stalled", "True")]),
        ];
        let table = render_table(&sources);
        let order: Vec<&str> = table
            .lines()
            .skip(1)
            .take(4)
            .map(|line| line.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(
            order,
            [
                "ClusterGitTrack/b-failing",
                "ClusterGitTrack/d-stalled",
                "ClusterGitTrack/c-busy",
                "ClusterGitTrack/a-ready"
            ],
            "{table}"
        );
        assert!(table.lines().nth(1).unwrap().contains("Failing"), "{table}");
    }

    #[test]
    fn the_shard_and_the_replica_that_handles_a_source_are_shown() {
        let mut sharded = source("a", &[("Ready", "True")]);
        sharded.shard = Some(4);
        sharded.handled_by = "arbor-gitsync-0".to_owned();
        assert!(
            render_table(std::slice::from_ref(&sharded))
                .contains("  shard 4, handled by arbor-gitsync-0\n")
        );
        let json = source_status_json(&sharded);
        assert_eq!(json["shard"], 4);
        assert_eq!(json["handledBy"], "arbor-gitsync-0");
        let single = source("b", &[("Ready", "True")]);
        assert!(!render_table(std::slice::from_ref(&single)).contains("handled by"));
        assert_eq!(source_status_json(&single)["handledBy"], Value::Null);
    }

    #[test]
    fn colour_only_when_asked() {
        let sources = [source("a", &[("Ready", "True")])];
        assert!(!render_table(&sources).contains('\u{1b}'));
        assert!(render_table_coloured(&sources, true).contains("\u{1b}[32mReady"));
    }
}
