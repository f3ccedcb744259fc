//! `arborctl drift`: drift as arbor-observer sees it, one line per event, until Ctrl-C.
//!
//! WatchDrift is a live stream with no backlog, so there is no "print what is pending" mode;
//! `--timeout` ends the watch after a while instead (for scripts and demos). The command also
//! ends, successfully, when the server closes the stream. With `-o json` every event is one
//! JSON object per line; with `-o yaml` one YAML document per event.

use std::time::Duration;

use arbor_proto::v1::observer_service_client::ObserverServiceClient;
use arbor_proto::v1::{DriftEvent, WatchDriftRequest};
use arbor_runtime::flags::parse_duration;
use clap::Args;
use serde_json::{Value, json};

use crate::connect::{ConnectionArgs, Service};
use crate::output::{
    Format, OutputArgs, enum_name, object_json, optional_object_name, optional_source_name,
    source_json, timestamp, timestamp_json,
};

#[derive(Debug, Args)]
pub struct DriftArgs {
    /// Only this namespace; default: every namespace.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,

    /// Only this Application; default: all.
    #[arg(long)]
    pub application: Option<String>,

    /// Also report drift of git-managed objects (those carrying the management label).
    #[arg(long)]
    pub include_managed: bool,

    /// Stop watching after this long (like 30s or 5m); default: until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

pub async fn run(args: &DriftArgs) -> anyhow::Result<()> {
    let remote = args.connection.connect(Service::Observer).await?;
    let request = WatchDriftRequest {
        namespace: args.namespace.clone().unwrap_or_default(),
        application: args.application.clone().unwrap_or_default(),
        include_managed: args.include_managed,
    };
    let mut stream = ObserverServiceClient::new(remote.channel())
        .watch_drift(request)
        .await
        .map_err(|status| remote.call_failed("WatchDrift", status))?
        .into_inner();
    let deadline = async {
        match args.timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            message = stream.message() => {
                match message.map_err(|status| remote.call_failed("WatchDrift", status))? {
                    Some(event) => print_event(args.output.format, &event)?,
                    None => return Ok(()),
                }
            }
            () = &mut deadline => return Ok(()),
            interrupted = tokio::signal::ctrl_c() => return Ok(interrupted?),
        }
    }
}

fn print_event(format: Format, event: &DriftEvent) -> anyhow::Result<()> {
    match format {
        Format::Table => println!("{}", event_line(event)),
        Format::Json => println!("{}", serde_json::to_string(&event_json(event))?),
        Format::Yaml => print!("---\n{}", serde_saphyr::to_string(&event_json(event))?),
    }
    Ok(())
}

/// `TIME KIND OBJECT fields=... reporter=... [source=...] [application=...]`.
pub fn event_line(event: &DriftEvent) -> String {
    let mut line = format!(
        "{} {} {}",
        timestamp(event.observed_at.as_ref()),
        enum_name(event.kind().as_str_name(), "DRIFT_KIND_"),
        optional_object_name(event.object.as_ref()),
    );
    if !event.changed_fields.is_empty() {
        line.push_str(&format!(" fields={}", event.changed_fields.join(",")));
    }
    if !event.reporter.is_empty() {
        line.push_str(&format!(" reporter={}", event.reporter));
    }
    if event.source.is_some() {
        line.push_str(&format!(
            " source={}",
            optional_source_name(event.source.as_ref())
        ));
    }
    if event.application.is_some() {
        line.push_str(&format!(
            " application={}",
            optional_object_name(event.application.as_ref())
        ));
    }
    line
}

pub fn event_json(event: &DriftEvent) -> Value {
    json!({
        "object": object_json(event.object.as_ref()),
        "kind": enum_name(event.kind().as_str_name(), "DRIFT_KIND_"),
        "observedAt": timestamp_json(event.observed_at.as_ref()),
        "changedFields": event.changed_fields,
        "observedJson": event.observed_json,
        "reporter": event.reporter,
        "source": source_json(event.source.as_ref()),
        "application": object_json(event.application.as_ref()),
    })
}
