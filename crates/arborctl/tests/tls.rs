//! arborctl over mutual TLS, with certificates from `arbor_demo::pki::Authority`, and the
//! clear errors for the usual TLS mistakes.

mod fakes;

use std::path::PathBuf;

use arbor_demo::pki::{Authority, CertifiedKey};
use arbor_runtime::grpc::TlsMaterial;
use fakes::{FakeServer, Options, arborctl, stderr, stdout};

/// PEM files on disk for the client side.
struct ClientFiles {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

fn write_client_files(client: &CertifiedKey, trusted_ca: &str) -> ClientFiles {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, contents: &str| -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    };
    let cert = write("client.crt", &client.cert_pem);
    let key = write("client.key", &client.key_pem);
    let ca = write("ca.crt", trusted_ca);
    ClientFiles {
        _dir: dir,
        cert,
        key,
        ca,
    }
}

/// A server requiring client certificates from `ca`, presenting a certificate for `names`.
async fn mutual_tls_server(ca: &Authority, names: &[&str]) -> FakeServer {
    let server_key = ca.issue("arbor-gitsync", names).unwrap();
    FakeServer::start(Options {
        tls: Some(TlsMaterial {
            cert_pem: Some(server_key.cert_pem),
            key_pem: Some(server_key.key_pem),
            ca_pem: Some(ca.cert_pem().to_owned()),
        }),
        ..Options::default()
    })
    .await
}

impl ClientFiles {
    /// `--tls-cert`, `--tls-key` and `--tls-ca` naming these files.
    fn flags(&self) -> Vec<String> {
        [
            ("--tls-cert", &self.cert),
            ("--tls-key", &self.key),
            ("--tls-ca", &self.ca),
        ]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_owned(), path.display().to_string()])
        .collect()
    }
}

/// Runs arborctl with `command`, the service address flag `address_flag` set to `address`,
/// and all of the client's TLS flags.
async fn arborctl_over_tls(
    command: &[&str],
    address_flag: &str,
    address: &str,
    files: &ClientFiles,
) -> std::process::Output {
    let mut args: Vec<String> = command.iter().map(|arg| (*arg).to_owned()).collect();
    args.extend([address_flag.to_owned(), address.to_owned()]);
    args.extend(files.flags());
    arborctl(&args).await
}

#[tokio::test]
async fn sync_works_over_mutual_tls() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let server = mutual_tls_server(&ca, &["localhost", "127.0.0.1"]).await;
    let files = write_client_files(&ca.issue("arborctl", &["arborctl"]).unwrap(), ca.cert_pem());
    let address = server.tls_address();
    let output = arborctl_over_tls(
        &["sync", "GitTrack/team-a/apps"],
        "--gitsync-addr",
        &address,
        &files,
    )
    .await;
    server.stop().await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("GitTrack/team-a/apps synced commit "),
        "{}",
        stdout(&output)
    );
}

#[tokio::test]
async fn a_missing_client_certificate_is_reported_as_such() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let server = mutual_tls_server(&ca, &["127.0.0.1"]).await;
    let files = write_client_files(&ca.issue("arborctl", &["arborctl"]).unwrap(), ca.cert_pem());
    let address = server.tls_address();
    let output = arborctl(&[
        "status",
        "--gitsync-addr",
        &address,
        "--tls-ca",
        files.ca.to_str().unwrap(),
    ])
    .await;
    server.stop().await;

    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("SyncService (arbor-gitsync)"), "{message}");
    assert!(message.contains(&address), "{message}");
    assert!(message.contains("missing client certificate"), "{message}");
    assert!(
        message.contains("pass --tls-cert and --tls-key"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_an_unknown_ca() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let other = Authority::generate("someone else's CA").unwrap();
    let server = mutual_tls_server(&ca, &["127.0.0.1"]).await;
    let files = write_client_files(
        &ca.issue("arborctl", &["arborctl"]).unwrap(),
        other.cert_pem(),
    );
    let address = server.tls_address();
    let output = arborctl_over_tls(&["tree"], "--hierarchy-addr", &address, &files).await;
    server.stop().await;

    assert!(!output.status.success());
    assert_eq!(
        stderr(&output),
        format!(
            "error: cannot reach HierarchyService (arbor-hierarchy) at {address}: TLS: unknown CA: the server's certificate is not signed by a trusted CA; pass the CA that issued it with --tls-ca\n"
        )
    );
}

#[tokio::test]
async fn a_server_certificate_for_another_name_is_a_name_mismatch() {
    let ca = Authority::generate("arbor test CA").unwrap();
    let server = mutual_tls_server(&ca, &["gitsync.arbor-system.svc"]).await;
    let files = write_client_files(&ca.issue("arborctl", &["arborctl"]).unwrap(), ca.cert_pem());
    let address = server.tls_address();
    let output = arborctl_over_tls(&["drift"], "--observer-addr", &address, &files).await;
    server.stop().await;

    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!(
            "error: cannot reach ObserverService (arbor-observer) at {address}: TLS: server name mismatch"
        )),
        "{message}"
    );
}
