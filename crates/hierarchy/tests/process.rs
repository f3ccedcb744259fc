//! `run`: the whole process against arbor-kube-emu — leader election, the admin server whose
//! readiness opens once the caches synced, metrics under `arbor_hierarchy_`, propagation, and
//! a graceful stop on SIGTERM. In its own test binary because it installs signal handlers.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use clap::Parser;
use common::{Cluster, free_port, process_args, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET path` over plain HTTP/1.0: the status line's code and the body.
async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response
        .split_whitespace()
        .nth(1)
        .context("no status line")?
        .parse()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// A configuration file the shared loader refuses stops the process before it starts anything,
/// naming the flag, the file and the field.
#[tokio::test]
async fn run_refuses_a_bad_configuration_naming_the_flag_the_file_and_the_field() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("hierarchy.yaml");
    std::fs::write(
        &config,
        "watches:\n  - version: v1\n    kind: Secret\n    grup: x\n",
    )?;
    let args = arbor_hierarchy::Args::try_parse_from([
        "arbor-hierarchy".to_owned(),
        format!("--config={}", config.display()),
    ])?;
    let error = match arbor_hierarchy::run(args).await {
        Ok(()) => anyhow::bail!("run started with a configuration it cannot read"),
        Err(error) => error.to_string(),
    };
    for named in ["--config", &config.display().to_string(), "watches[0].grup"] {
        ensure!(error.contains(named), "{named}: {error}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_becomes_ready_after_sync_propagates_and_stops_on_sigterm() -> Result<()> {
    let cluster = Cluster::without_controller(common::ARBOR).await?;
    let dir = tempfile::tempdir()?;
    let admin = free_port()?;
    let args = process_args(&cluster, dir.path(), admin, "5s")?;
    let process = tokio::spawn(arbor_hierarchy::run(args));

    wait_for("/readyz to answer 200", || async {
        Ok(matches!(get(admin, "/readyz").await, Ok((200, _))))
    })
    .await?;
    cluster.root_with_child().await?;
    cluster
        .create_secret("root", "s", "v", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("child", "s", "v").await?;
    cluster
        .wait_namespace_label("child", "team", Some("x"))
        .await?;
    let (code, metrics) = get(admin, "/metrics").await?;
    ensure!(code == 200, "/metrics answered {code}");
    ensure!(
        metrics.contains("arbor_hierarchy_propagated_objects_total{action=\"create\"} 1"),
        "{metrics}"
    );

    let pid = std::process::id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()?;
    tokio::time::timeout(Duration::from_secs(30), process)
        .await
        .context("run did not stop after SIGTERM")???;
    cluster.shutdown().await;
    Ok(())
}
