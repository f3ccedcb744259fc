//! A cluster with Arbor's admission webhook, for the admission end-to-end tests: the real
//! `arbor-kube-emu` serving TLS with a static token file, Arbor's CRDs, the real
//! `arbor-webhook` (optionally the real `arbor-gitsync`) as processes, and kubectl as the
//! client.
//!
//! The token file names three users, so a test can act as any of them with kubectl:
//!
//! | user | kubeconfig | used for |
//! |---|---|---|
//! | `arbor-admin` (`system:masters`) | [`User::Admin`] | setup, the webhook's and emulator's own client |
//! | `alice` (`developers`) | [`User::Alice`] | the changes under test: a person with kubectl |
//! | `system:serviceaccount:arbor-system:arbor-gitsync` | [`User::Gitsync`] | arbor-gitsync and changes Arbor makes |
//!
//! arbor-webhook is registered the way the Helm chart registers it, except that the
//! ValidatingWebhookConfiguration uses a `url` (the webhook runs outside any cluster) and the
//! `caBundle` of a CA made for the test. Every wait is bounded by [`WAIT`].
//!
//! On the cluster of `ARBOR_E2E_KUBECONFIG` (see [`crate::source`]) there is no token file:
//! the kubeconfig's own user is the admin, and `alice` and arbor-gitsync are the admin
//! impersonating them (kubeconfig `as` / `as-groups`, which kubectl and kube-rs both send),
//! bound to `cluster-admin` by a ClusterRoleBinding for the test, as the emulator without
//! RBAC lets every user do everything. The webhook listens on `ARBOR_E2E_WEBHOOK_HOST`.
//!
//! The binaries are the ones built in `target/<profile>/` (see `bin`); unlike
//! [`crate::binary`], nothing here runs cargo, so a test never waits for a build that other
//! work in the same target directory holds the lock of.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use arbor_testkit::cluster::{ensure_namespace, install_crds, parse_documents};
use arbor_testkit::ports::{free_addr, free_addr_on};
use arbor_testkit::shared::ClusterLease;
use arbor_testkit::source::{KUBECONFIG_ENV, SharedCluster, WEBHOOK_HOST_ENV};
use arbor_testkit::tls::TlsFiles;
use arbor_testkit::{Process, ProcessSpec};
use base64::Engine as _;
use kube::Client;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::Run;
use crate::source::Need;

/// What the environment needs of the API server, so that its tests skip, saying why, when
/// `ARBOR_E2E_KUBECONFIG` names a cluster that cannot call a webhook running here.
pub const NEEDS: &[Need] = &[Need::ReachableWebhook];

/// The limit of every wait: generous, since the suite shares two cores with other tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// The name of the webhook registration and of its one webhook.
pub const CONFIGURATION: &str = "arbor-webhook";
pub const WEBHOOK: &str = "validate.arbor.dev";

/// The namespace of Arbor's service accounts.
pub const SYSTEM_NAMESPACE: &str = "arbor-system";

/// arbor-gitsync's username, as the emulator authenticates its token.
pub const GITSYNC_ACCOUNT: &str = "system:serviceaccount:arbor-system:arbor-gitsync";

/// Who runs a kubectl command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Admin,
    Alice,
    Gitsync,
}

impl User {
    const ALL: [User; 3] = [User::Admin, User::Alice, User::Gitsync];

    fn name(self) -> &'static str {
        match self {
            User::Admin => "arbor-admin",
            User::Alice => "alice",
            User::Gitsync => GITSYNC_ACCOUNT,
        }
    }

    fn groups(self) -> &'static str {
        match self {
            User::Admin => "system:masters",
            User::Alice => "developers",
            User::Gitsync => "",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            User::Admin => "admin.kubeconfig",
            User::Alice => "alice.kubeconfig",
            User::Gitsync => "gitsync.kubeconfig",
        }
    }
}

/// A binary the environment starts, from `target/<profile>/` next to the test executable:
/// build them first (`cargo build --bins -p arbor-kube-emu -p arbor-webhook -p arbor-gitsync`).
fn bin(name: &str) -> anyhow::Result<PathBuf> {
    Ok(arbor_testkit::binaries::workspace_binary(name)?)
}

/// The emulator with the CRDs installed, and a place for the Arbor processes it talks to.
pub struct WebhookEnv {
    /// The admin's client, for setup and for reading what was stored.
    pub client: Client,
    tls: TlsFiles,
    webhook: Option<Process>,
    /// The webhook's PolicyService, `http://` on loopback, once it runs.
    policy_addr: Option<String>,
    gitsync: Option<Process>,
    /// Where arbor-webhook listens: loopback, or `ARBOR_E2E_WEBHOOK_HOST`.
    webhook_host: IpAddr,
    /// The turn on an existing cluster; `None` on the emulator.
    lease: Option<ClusterLease>,
    emulator: Option<Process>,
    // Last: the processes above stop (on drop) before their files go.
    dir: TempDir,
}

impl WebhookEnv {
    /// Starts the emulator with the three users' tokens (or takes the cluster of
    /// `ARBOR_E2E_KUBECONFIG`) and installs Arbor's CRDs and the `arbor-system` namespace.
    pub async fn start() -> anyhow::Result<WebhookEnv> {
        let dir = tempfile::tempdir()?;
        if let Some(shared) = crate::source::shared_cluster() {
            return Self::take(shared, dir).await;
        }
        let tokens = write_token_file(dir.path())?;
        let admin_kubeconfig = dir.path().join(User::Admin.file_name());
        let mut emulator = ProcessSpec::new(
            "arbor-kube-emu",
            bin("arbor-kube-emu")?,
            dir.path().join("logs/kube-emu.log"),
        )
        .args(["--listen", "127.0.0.1:0", "--tls", "--kubeconfig-out"])
        .arg(&admin_kubeconfig)
        .arg("--token-file")
        .arg(&tokens.path)
        .start()?;
        emulator.wait_for_line("listening on", WAIT).await?;
        let admin_yaml = std::fs::read_to_string(&admin_kubeconfig)
            .with_context(|| format!("reading {}", admin_kubeconfig.display()))?;
        for user in [User::Alice, User::Gitsync] {
            let path = dir.path().join(user.file_name());
            write_kubeconfig_for(&admin_yaml, &tokens.token(user), &path)?;
        }
        let client = arbor_runtime::client::from_kubeconfig_yaml(&admin_yaml).await?;
        install_crds(&client, WAIT).await?;
        ensure_namespace(&client, SYSTEM_NAMESPACE).await?;
        let tls = TlsFiles::create(&dir.path().join("tls"))?;
        Ok(WebhookEnv {
            client,
            tls,
            webhook: None,
            policy_addr: None,
            gitsync: None,
            webhook_host: Ipv4Addr::LOCALHOST.into(),
            lease: None,
            emulator: Some(emulator),
            dir,
        })
    }

    /// The environment on an existing cluster: its turn taken, the CRDs installed, the users
    /// impersonated and granted what the emulator grants them.
    async fn take(shared: SharedCluster, dir: TempDir) -> anyhow::Result<WebhookEnv> {
        let webhook_host = shared.cluster.webhook_host.with_context(|| {
            format!("{WEBHOOK_HOST_ENV} is needed on the cluster of {KUBECONFIG_ENV}")
        })?;
        let (client, lease) =
            ClusterLease::take(&shared, arbor_api::keys::DEFAULT_DOMAIN, WAIT).await?;
        let cluster = shared.cluster;
        let admin_yaml = std::fs::read_to_string(&cluster.kubeconfig)
            .with_context(|| format!("reading {}", cluster.kubeconfig.display()))?;
        let base = cluster.kubeconfig.parent().unwrap_or(Path::new("."));
        for user in User::ALL {
            let path = dir.path().join(user.file_name());
            write_impersonating_kubeconfig(&admin_yaml, base, user, &path)?;
        }
        let grant = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "arbor-e2e-webhook-users"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": User::Alice.name()},
                {"kind": "ServiceAccount", "name": "arbor-gitsync", "namespace": SYSTEM_NAMESPACE},
            ],
        });
        arbor_testkit::cluster::apply(&client, &grant, None).await?;
        let tls = TlsFiles::create(&dir.path().join("tls"))?;
        Ok(WebhookEnv {
            client,
            tls,
            webhook: None,
            policy_addr: None,
            gitsync: None,
            webhook_host,
            lease: Some(lease),
            emulator: None,
            dir,
        })
    }

    /// The kubeconfig of `user`.
    pub fn kubeconfig(&self, user: User) -> PathBuf {
        self.dir.path().join(user.file_name())
    }

    /// A directory the environment removes when it is dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts arbor-webhook with `flags` (beyond its addresses and serving certificate) and
    /// registers it, with failurePolicy Fail, for Arbor's kinds, Namespaces and the
    /// `extra_resources` of the core group (drift prevention judges any kind).
    pub async fn start_webhook(
        &mut self,
        flags: &[&str],
        extra_resources: &[&str],
    ) -> anyhow::Result<()> {
        let serving = self
            .tls
            .issue_for("webhook-serving", &[&self.webhook_host.to_string()])?;
        let (https, admin, grpc) = (free_addr_on(self.webhook_host)?, free_addr()?, free_addr()?);
        let mut webhook = ProcessSpec::new(
            "arbor-webhook",
            bin("arbor-webhook")?,
            self.dir.path().join("logs/webhook.log"),
        )
        .arg("--kubeconfig")
        .arg(self.kubeconfig(User::Admin))
        .args(addresses(admin, grpc))
        .args(["--webhook-addr", &https.to_string()])
        .arg("--webhook-cert")
        .arg(&serving.cert)
        .arg("--webhook-key")
        .arg(&serving.key)
        .args(flags)
        .env("KUBECONFIG", self.kubeconfig(User::Admin))
        .start()?;
        webhook.wait_for_port(https, WAIT).await?;
        webhook.wait_for_port(admin, WAIT).await?;
        self.webhook = Some(webhook);
        self.policy_addr = Some(format!("http://{grpc}"));
        let configuration = registration(
            &format!("https://{https}/validate"),
            self.tls.ca_pem(),
            extra_resources,
        );
        arbor_testkit::cluster::apply(&self.client, &configuration, None).await?;
        Ok(())
    }

    /// The address of the running webhook's PolicyService.
    pub fn policy_addr(&self) -> anyhow::Result<&str> {
        self.policy_addr
            .as_deref()
            .context("arbor-webhook was not started")
    }

    /// Kills arbor-webhook at once, as a crash would; its registration stays.
    pub fn kill_webhook(&mut self) -> anyhow::Result<()> {
        let webhook = self
            .webhook
            .as_mut()
            .context("arbor-webhook is not running")?;
        webhook.kill()?;
        Ok(())
    }

    /// Starts arbor-gitsync as its service account, managing GitTracks; returns the address
    /// of its gRPC server (plaintext: loopback only).
    pub async fn start_gitsync(&mut self) -> anyhow::Result<String> {
        let (admin, grpc) = (free_addr()?, free_addr()?);
        let cache = self.dir.path().join("cache/gitsync");
        let mut gitsync = ProcessSpec::new(
            "arbor-gitsync",
            bin("arbor-gitsync")?,
            self.dir.path().join("logs/gitsync.log"),
        )
        .arg("--kubeconfig")
        .arg(self.kubeconfig(User::Gitsync))
        .args(addresses(admin, grpc))
        .args(["--gittrack-mode", "Enabled", "--resync-period", "1h"])
        .arg("--cache-dir")
        .arg(cache)
        // The tests' repositories are local directories.
        .arg("--allow-file-repositories")
        .env("KUBECONFIG", self.kubeconfig(User::Gitsync))
        .start()?;
        gitsync.wait_for_port(grpc, WAIT).await?;
        self.gitsync = Some(gitsync);
        Ok(format!("http://{grpc}"))
    }

    /// Runs kubectl as `user`, with `stdin` piped in when given.
    pub fn kubectl(&self, user: User, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Run> {
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let mut child = Command::new("kubectl")
            .args(["--request-timeout", "30s"])
            .args(args)
            .env("KUBECONFIG", self.kubeconfig(user))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running kubectl (install it: make deps)")?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .context("writing kubectl's stdin")?;
        }
        Ok(child
            .wait_with_output()
            .context("waiting for kubectl")?
            .into())
    }

    /// Like [`WebhookEnv::kubectl`], failing with kubectl's stderr unless it succeeds.
    pub fn kubectl_ok(
        &self,
        user: User,
        args: &[&str],
        stdin: Option<&str>,
    ) -> anyhow::Result<String> {
        let run = self.kubectl(user, args, stdin)?;
        anyhow::ensure!(
            run.success,
            "kubectl {args:?} as {user:?} failed: {}{}",
            run.stderr,
            self.logs()
        );
        Ok(run.stdout)
    }

    /// Runs kubectl as `user` until it fails with stderr containing `needle`, for decisions
    /// that depend on what the webhook's reflectors have seen; dry-run commands keep the
    /// retries from changing anything. Returns the last stderr.
    pub async fn until_refused(
        &self,
        user: User,
        args: &[&str],
        needle: &str,
    ) -> anyhow::Result<String> {
        let start = std::time::Instant::now();
        loop {
            let run = self.kubectl(user, args, None)?;
            if !run.success && run.stderr.contains(needle) {
                return Ok(run.stderr);
            }
            anyhow::ensure!(
                start.elapsed() < WAIT,
                "kubectl {args:?} was not refused with {needle:?} within {WAIT:?}; last: {run:?}{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The last lines of every process's log, for failure messages.
    pub fn logs(&self) -> String {
        [
            self.emulator.as_ref(),
            self.webhook.as_ref(),
            self.gitsync.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|process| format!("\n--- {} ---\n{}", process.name(), process.log_tail()))
        .collect()
    }
}

impl std::fmt::Debug for WebhookEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookEnv")
            .field("dir", &self.dir.path())
            .field("emulator", &self.emulator.as_ref().and_then(Process::pid))
            .field("webhook", &self.webhook.as_ref().and_then(Process::pid))
            .field("gitsync", &self.gitsync.as_ref().and_then(Process::pid))
            .finish_non_exhaustive()
    }
}

impl Drop for WebhookEnv {
    /// On an existing cluster: the processes stop, then what the test made goes (see
    /// [`arbor_testkit::shared`]).
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        for process in [self.webhook.as_mut(), self.gitsync.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = process.stop(arbor_testkit::process::DROP_GRACE);
        }
        if let Err(error) = lease.clean_up() {
            eprintln!("cleaning up the cluster after the test: {error}");
        }
    }
}

/// The flags every Arbor controller takes here: loopback ports, no leader election.
fn addresses(admin: SocketAddr, grpc: SocketAddr) -> Vec<OsString> {
    [
        "--admin-addr".to_owned(),
        admin.to_string(),
        "--grpc-addr".to_owned(),
        grpc.to_string(),
        "--leader-election".to_owned(),
        "false".to_owned(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// The ValidatingWebhookConfiguration: Arbor's kinds (SubNamespaces and Namespaces also on
/// DELETE, for the tree rules) and `extra_resources` of the core group.
fn registration(url: &str, ca_pem: &str, extra_resources: &[&str]) -> Value {
    let write = ["CREATE", "UPDATE", "DELETE"];
    let mut rules = vec![
        json!({"apiGroups": ["arbor.dev"], "apiVersions": ["*"], "operations": write, "scope": "*",
               "resources": ["gittrackobjects", "clustergittrackobjects", "gittracks",
                             "clustergittracks", "subnamespaces"]}),
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": write, "scope": "*",
               "resources": ["namespaces"]}),
    ];
    if !extra_resources.is_empty() {
        rules.push(
            json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": write,
                          "scope": "*", "resources": extra_resources}),
        );
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [{
            "name": WEBHOOK,
            "clientConfig": {
                "url": url,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            },
            "rules": rules,
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "admissionReviewVersions": ["v1"],
        }],
    })
}

/// The token of each user, as written to the emulator's token file.
struct Tokens {
    path: PathBuf,
    salt: String,
}

impl Tokens {
    fn token(&self, user: User) -> String {
        format!(
            "{}-{}",
            user.file_name().trim_end_matches(".kubeconfig"),
            self.salt
        )
    }
}

/// Writes `<dir>/tokens.csv`, the admin first: the emulator's own kubeconfig uses the first.
fn write_token_file(dir: &Path) -> anyhow::Result<Tokens> {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(dir.as_os_str().as_encoded_bytes());
    let tokens = Tokens {
        path: dir.join("tokens.csv"),
        salt: format!("{:016x}", hasher.finish()),
    };
    let lines: String = User::ALL
        .iter()
        .map(|user| {
            format!(
                "{},{},{},\"{}\"\n",
                tokens.token(*user),
                user.name(),
                user.name(),
                user.groups()
            )
        })
        .collect();
    std::fs::write(&tokens.path, lines)
        .with_context(|| format!("writing {}", tokens.path.display()))?;
    Ok(tokens)
}

/// Writes the admin's kubeconfig (of directory `base`) acting as `user`: `as` and
/// `as-groups` on every user entry (none for the admin), and the files it names made
/// absolute so that the copy works from another directory.
fn write_impersonating_kubeconfig(
    admin_yaml: &str,
    base: &Path,
    user: User,
    path: &Path,
) -> anyhow::Result<()> {
    let mut kubeconfig = parse_documents("the cluster's kubeconfig", admin_yaml)?
        .into_iter()
        .next()
        .context("the cluster's kubeconfig is empty")?;
    let absolute = |entry: &mut Value, keys: &[&str]| {
        for key in keys {
            if let Some(file) = entry[*key].as_str().filter(|file| !file.is_empty()) {
                entry[*key] = json!(base.join(file));
            }
        }
    };
    for cluster in kubeconfig["clusters"].as_array_mut().into_iter().flatten() {
        absolute(&mut cluster["cluster"], &["certificate-authority"]);
    }
    let users = kubeconfig["users"]
        .as_array_mut()
        .context("the cluster's kubeconfig has no users")?;
    for entry in users {
        let auth = &mut entry["user"];
        absolute(auth, &["client-certificate", "client-key", "tokenFile"]);
        if user != User::Admin {
            auth["as"] = json!(user.name());
            if !user.groups().is_empty() {
                auth["as-groups"] = json!([user.groups()]);
            }
        }
    }
    std::fs::write(path, serde_json::to_string_pretty(&kubeconfig)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes the admin's kubeconfig with `token` instead of the admin's, as JSON (which
/// kubectl reads like YAML).
fn write_kubeconfig_for(admin_yaml: &str, token: &str, path: &Path) -> anyhow::Result<()> {
    let mut kubeconfig = parse_documents("the emulator's kubeconfig", admin_yaml)?
        .into_iter()
        .next()
        .context("the emulator's kubeconfig is empty")?;
    let users = kubeconfig["users"]
        .as_array_mut()
        .context("the emulator's kubeconfig has no users")?;
    for user in users {
        user["user"] = json!({"token": token});
    }
    std::fs::write(path, serde_json::to_string_pretty(&kubeconfig)?)
        .with_context(|| format!("writing {}", path.display()))
}
