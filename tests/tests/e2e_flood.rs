//! issue #23 item 5: connection floods against every listener of the running controllers.
//!
//! Each listener gets 2,000 loopback connections of the kind that used to exhaust it: TCP
//! connections that never send a TLS ClientHello (the gRPC ports), TLS connections that send
//! the HTTP/2 preface and SETTINGS and then nothing (the webhook's admission endpoint), and
//! idle TCP connections (the admin servers). During the flood a legitimate client is still
//! served, and the process's descriptors stay within the listener's bound
//! (`--max-connections`, 256 by default). The figures (descriptors and RSS of the flooded
//! process before, during and after) are printed for the note.

use arbor_e2e::source::{Need, skip};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use arbor_e2e::eventually;
use arbor_e2e::system::{TestSystem, WAIT, client_tls, start};
use arbor_proto::v1::hierarchy_service_client::HierarchyServiceClient;
use arbor_proto::v1::observer_service_client::ObserverServiceClient;
use arbor_proto::v1::policy_service_client::PolicyServiceClient;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{
    CheckOwnershipRequest, GetStatusRequest, GetTreeRequest, ListApplicationsRequest,
};
use arbor_runtime::grpc::connect;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections per flood.
const FLOOD: usize = 2_000;
/// `--max-connections`' default.
const MAX_CONNECTIONS: usize = 256;
/// Descriptors a process may open besides a flooded listener's connections (watches, the
/// other listeners, the test's own probes).
const SLACK: usize = 48;

#[derive(Debug, Clone, Copy)]
enum Flood {
    /// TCP connections that send nothing (no ClientHello, no request).
    Silent,
    /// TLS, then the HTTP/2 preface and an empty SETTINGS frame, then nothing.
    Http2Preface,
}

/// Descriptors and resident memory of a process.
#[derive(Debug, Clone, Copy)]
struct Usage {
    fds: usize,
    rss_kib: u64,
}

fn usage(pid: u32) -> anyhow::Result<Usage> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("no VmRSS")?;
    Ok(Usage { fds, rss_kib })
}

fn tls_connector(system: &TestSystem) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut system.tls.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One flood connection, held open by the caller. A connection the server already closed
/// (it sheds the oldest) counts too: it was accepted and had to be dealt with.
async fn flood_connection(
    address: SocketAddr,
    flood: Flood,
    tls: &tokio_rustls::TlsConnector,
) -> Option<Box<dyn std::any::Any + Send>> {
    let tcp = TcpStream::connect(address).await.ok()?;
    match flood {
        Flood::Silent => Some(Box::new(tcp)),
        Flood::Http2Preface => {
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let mut stream = tls.connect(name, tcp).await.ok()?;
            let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
            preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            stream.write_all(&preface).await.ok()?;
            Some(Box::new(stream))
        }
    }
}

/// Opens `count` flood connections, 32 at a time.
async fn open_flood(
    address: SocketAddr,
    flood: Flood,
    tls: &tokio_rustls::TlsConnector,
    count: usize,
    held: &mut Vec<Box<dyn std::any::Any + Send>>,
) {
    let mut opened = 0;
    while opened < count {
        let batch = (count - opened).min(32);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..batch {
            let tls = tls.clone();
            tasks.spawn(async move { flood_connection(address, flood, &tls).await });
        }
        while let Some(connection) = tasks.join_next().await {
            if let Some(connection) = connection.unwrap() {
                held.push(connection);
            }
        }
        opened += batch;
    }
}

/// Floods `address` of process `pid`, calling `probe` (a legitimate client) half-way and at
/// the end; returns the usage before, at the end of the flood and after it.
async fn flood<F, Fut>(
    system: &TestSystem,
    what: &str,
    pid: u32,
    address: SocketAddr,
    kind: Flood,
    probe: F,
) -> anyhow::Result<(Usage, Usage, Usage)>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let tls = tls_connector(system);
    let before = usage(pid)?;
    let mut held = Vec::new();
    open_flood(address, kind, &tls, FLOOD / 2, &mut held).await;
    probe()
        .await
        .with_context(|| format!("{what}: a legitimate call half-way through the flood"))?;
    open_flood(address, kind, &tls, FLOOD - FLOOD / 2, &mut held).await;
    probe()
        .await
        .with_context(|| format!("{what}: a legitimate call with the flood open"))?;
    ensure!(
        held.len() >= FLOOD / 2,
        "{what}: only {} flood connections opened",
        held.len()
    );
    let bound = before.fds + MAX_CONNECTIONS + SLACK;
    // The server closes what it sheds as it accepts; wait (bounded) for the last ones.
    let during = eventually(
        &format!("{what}: descriptors within {bound}"),
        WAIT,
        || async {
            let now = usage(pid).expect("the flooded process's /proc entry");
            Ok((now.fds <= bound).then_some(now))
        },
    )
    .await;
    let during = match during {
        Ok(during) => during,
        Err(_) => {
            let now = usage(pid)?;
            bail!(
                "{what}: {} descriptors with {} flood connections open (before: {}, bound {bound})",
                now.fds,
                held.len(),
                before.fds
            );
        }
    };
    drop(held);
    probe()
        .await
        .with_context(|| format!("{what}: a legitimate call after the flood"))?;
    let after = usage(pid)?;
    eprintln!(
        "flood {what}: {FLOOD} connections ({kind:?}); fds before {} / during {} / after {}; RSS before {} KiB / during {} KiB / after {} KiB",
        before.fds, during.fds, after.fds, before.rss_kib, during.rss_kib, after.rss_kib
    );
    ensure!(
        during.rss_kib < before.rss_kib + 128 * 1024,
        "{what}: RSS grew from {} KiB to {} KiB",
        before.rss_kib,
        during.rss_kib
    );
    Ok((before, during, after))
}

/// GET /healthz over plain HTTP/1.1 on a new connection.
async fn healthz(address: SocketAddr) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        stream.read_to_string(&mut response),
    )
    .await
    .context("no answer")??;
    ensure!(response.starts_with("HTTP/1.1 200"), "{response}");
    Ok(())
}

fn pid(controller: &arbor_testkit::system::Controller) -> u32 {
    controller.process.pid().expect("the controller runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_stays_bounded_and_serves_during_a_connection_flood() {
    if skip(&[Need::ReachableWebhook]) {
        return;
    }
    let limit = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open_files = limit
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap_or("Max open files: unknown");
    eprintln!("{open_files}");
    let soft: usize = open_files
        .split_whitespace()
        .nth(3)
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(usize::MAX);
    // The flood's client side lives in this process: it needs FLOOD descriptors at once.
    assert!(
        soft > FLOOD + 512,
        "this test needs `ulimit -n` above {}: {open_files}",
        FLOOD + 512
    );

    let system = start(&["gitsync", "hierarchy", "observer", "webhook"])
        .await
        .unwrap();
    let tls = client_tls(&system).unwrap();
    let gitsync = system.gitsync.as_ref().unwrap();
    let hierarchy = system.hierarchy.as_ref().unwrap();
    let observer = system.observer.as_ref().unwrap();
    let webhook = system.webhook.as_ref().unwrap();

    let url = gitsync.grpc_url();
    flood(
        &system,
        "gitsync gRPC",
        pid(gitsync),
        gitsync.grpc,
        Flood::Silent,
        || async {
            let channel = connect(&url, Some(&tls)).await?;
            SyncServiceClient::new(channel)
                .get_status(GetStatusRequest { source: None })
                .await?;
            Ok(())
        },
    )
    .await
    .unwrap();

    let url = hierarchy.grpc_url();
    flood(
        &system,
        "hierarchy gRPC",
        pid(hierarchy),
        hierarchy.grpc,
        Flood::Silent,
        || async {
            let channel = connect(&url, Some(&tls)).await?;
            HierarchyServiceClient::new(channel)
                .get_tree(GetTreeRequest::default())
                .await?;
            Ok(())
        },
    )
    .await
    .unwrap();

    let url = observer.grpc_url();
    flood(
        &system,
        "observer gRPC",
        pid(observer),
        observer.grpc,
        Flood::Silent,
        || async {
            let channel = connect(&url, Some(&tls)).await?;
            ObserverServiceClient::new(channel)
                .list_applications(ListApplicationsRequest::default())
                .await?;
            Ok(())
        },
    )
    .await
    .unwrap();

    let url = webhook.grpc_url();
    flood(
        &system,
        "webhook gRPC",
        pid(webhook),
        webhook.grpc,
        Flood::Silent,
        || async {
            let channel = connect(&url, Some(&tls)).await?;
            let answer = PolicyServiceClient::new(channel)
                .check_ownership(CheckOwnershipRequest::default())
                .await;
            match answer {
                Ok(_) => Ok(()),
                // Served: an empty request is a bad argument, not an outage.
                Err(status) if status.code() == tonic::Code::InvalidArgument => Ok(()),
                Err(status) => Err(status.into()),
            }
        },
    )
    .await
    .unwrap();

    // The admission endpoint, with a legitimate AdmissionReview sent by the API server: a
    // GitTrack created through the emulator is admitted by the webhook (failurePolicy Fail).
    let https: SocketAddr = system
        .webhook_url
        .as_deref()
        .and_then(|url| url.strip_prefix("https://"))
        .and_then(|rest| rest.split('/').next())
        .and_then(|address| address.parse().ok())
        .unwrap();
    arbor_testkit::cluster::apply(
        &system.client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flood"}}),
        None,
    )
    .await
    .unwrap();
    let created = std::sync::atomic::AtomicUsize::new(0);
    flood(&system, "webhook HTTPS", pid(webhook), https, Flood::Http2Preface, || async {
        let n = created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let gittrack = json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
            "metadata": {"name": format!("probe-{n}"), "namespace": "flood"},
            "spec": {"repository": "https://git.example.com/apps.git", "reference": {"branch": "main"}},
        });
        arbor_testkit::cluster::apply(&system.client, &gittrack, None).await?;
        Ok(())
    })
    .await
    .unwrap();

    for (name, controller) in [
        ("gitsync", gitsync),
        ("hierarchy", hierarchy),
        ("observer", observer),
        ("webhook", webhook),
    ] {
        let admin = controller.admin;
        flood(
            &system,
            &format!("{name} admin"),
            pid(controller),
            admin,
            Flood::Silent,
            || healthz(admin),
        )
        .await
        .unwrap();
    }
}
