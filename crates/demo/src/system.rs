//! The whole system as processes: `arbor-kube-emu` serving TLS, Arbor's CRDs and the
//! `arbor-system` namespace installed, and the four controllers started against it, each with
//! its own admin and gRPC ports on loopback and a mutual-TLS identity from one CA.
//!
//! The API server can also be an existing cluster ([`ClusterSource::Existing`]): the
//! controllers are the same local processes with the cluster's kubeconfig; the cluster serves
//! Arbor's CRDs already (see [`crate::source`]).
//!
//! The controllers find each other the way they do on a cluster: arbor-observer and
//! arbor-webhook call arbor-gitsync's gRPC address over mutual TLS; arbor-webhook is
//! registered with a ValidatingWebhookConfiguration whose `url` is its loopback endpoint and
//! whose `caBundle` is the CA. Everything a run writes (kubeconfig, certificates, logs, caches)
//! goes below [`SystemConfig::workdir`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use kube::Client;
use serde_json::json;

use crate::Error;
use crate::binaries::binary_in;
use crate::cluster::{apply, client_for, ensure_namespace, install_crds_for_domain};
use crate::ports::{free_addr, free_addr_on};
use crate::process::{Process, ProcessSpec};
use crate::source::ClusterSource;
use crate::tls::{Identity, TlsFiles};

/// The namespace Arbor's own objects (Leases) live in.
pub const SYSTEM_NAMESPACE: &str = "arbor-system";

/// The Helm release name the system stands in for: its components' Services are named after it.
pub const RELEASE: &str = "arbor";

/// The DNS names of component `name`'s Service, as the chart's certificates carry them.
pub fn service_dns_names(name: &str) -> Vec<String> {
    let service = format!("{RELEASE}-{name}");
    vec![
        service.clone(),
        format!("{service}.{SYSTEM_NAMESPACE}"),
        format!("{service}.{SYSTEM_NAMESPACE}.svc"),
        format!("{service}.{SYSTEM_NAMESPACE}.svc.cluster.local"),
    ]
}
/// The name of the webhook registration.
pub const WEBHOOK_CONFIGURATION: &str = "arbor-webhook";

/// Which controllers to start, and how.
#[derive(Debug, Clone)]
pub struct SystemConfig {
    /// Where the kubeconfig, `tls/`, `logs/` and `cache/` go.
    pub workdir: PathBuf,
    /// Where the binaries are: `target/<profile>/`.
    pub bin_dir: PathBuf,
    /// arbor-hierarchy's configuration file (Accurate's format), if any.
    pub hierarchy_config: Option<PathBuf>,
    pub gitsync: bool,
    pub hierarchy: bool,
    pub observer: bool,
    pub webhook: bool,
    /// arbor-gitsync's `--resync-period`.
    pub resync_period: String,
    /// The limit for each start-up step.
    pub startup_timeout: Duration,
    /// The controllers' `--log-level`.
    pub log_level: String,
    /// `--domain` of arbor-hierarchy and arbor-webhook (their default, `arbor.dev`, when
    /// `None`); the SubNamespace CRD of that domain is installed too.
    pub domain: Option<String>,
    /// The API server: an emulator started for the system (the default), or a cluster.
    pub cluster: ClusterSource,
    /// Whether the controllers campaign for their Leases (in [`SYSTEM_NAMESPACE`], with a
    /// short lease duration), as in a cluster; off by default, since one replica of each runs.
    pub leader_election: bool,
}

impl SystemConfig {
    /// All four controllers, with binaries from the running executable's `target/<profile>/`.
    pub fn new(workdir: impl Into<PathBuf>) -> Result<Self, Error> {
        Ok(Self {
            workdir: workdir.into(),
            bin_dir: crate::binaries::target_dir()?,
            hierarchy_config: None,
            gitsync: true,
            hierarchy: true,
            observer: true,
            webhook: true,
            resync_period: "30s".to_owned(),
            startup_timeout: Duration::from_secs(60),
            log_level: "info".to_owned(),
            domain: None,
            cluster: ClusterSource::default(),
            leader_election: false,
        })
    }

    /// Only the controllers named (`gitsync`, `hierarchy`, `observer`, `webhook`).
    pub fn only(mut self, names: &[&str]) -> Self {
        self.gitsync = names.contains(&"gitsync");
        self.hierarchy = names.contains(&"hierarchy");
        self.observer = names.contains(&"observer");
        self.webhook = names.contains(&"webhook");
        self
    }
}

/// One controller process and its addresses.
#[derive(Debug)]
pub struct Controller {
    pub process: Process,
    pub admin: SocketAddr,
    pub grpc: SocketAddr,
    /// A listener of its own beside the admin and gRPC ones (arbor-webhook's admission port).
    pub serving: Option<SocketAddr>,
    timeout: Duration,
}

impl Controller {
    /// `https://127.0.0.1:<grpc port>`, the address clients dial.
    pub fn grpc_url(&self) -> String {
        format!("https://{}", self.grpc)
    }

    /// Waits until the admin and the gRPC port (and the serving one, if any) accept
    /// connections.
    pub async fn wait_ready(&mut self) -> Result<(), Error> {
        for addr in [Some(self.admin), Some(self.grpc), self.serving]
            .into_iter()
            .flatten()
        {
            self.process.wait_for_port(addr, self.timeout).await?;
        }
        Ok(())
    }

    /// Starts the controller again with the same flags (after a kill) and waits for it.
    pub async fn restart(&mut self) -> Result<(), Error> {
        self.process.restart()?;
        self.wait_ready().await
    }
}

/// How many times a controller is started on newly chosen ports when one it was given was
/// taken before it bound it.
const PORT_ATTEMPTS: usize = 3;

/// Whether `error` is a process that exited because an address it was to listen on was in use.
fn lost_a_port(error: &Error) -> bool {
    matches!(error, Error::Exited { tail, .. } if tail.contains("Address already in use"))
}

/// The `--grpc-allow` rules of controller `name`, as the chart gives them, for the identities
/// this system issues (common names `observer`, `webhook`, `arborctl`, ...): the observer may
/// report drift and the webhook read declared state on gitsync; arborctl (the operator) may
/// call everything else, on every controller; gitsync's replicas may call each other.
pub fn grpc_allow(name: &str) -> Vec<String> {
    let mut rules = Vec::new();
    if name == "gitsync" {
        rules.push("SyncService/ReportDrift=observer,gitsync".to_owned());
        rules.push("SyncService/GetDeclared=webhook,gitsync".to_owned());
        rules.push(format!("*={CLIENT_IDENTITY},gitsync"));
    } else {
        rules.push(format!("*={CLIENT_IDENTITY}"));
    }
    rules
        .into_iter()
        .flat_map(|rule| ["--grpc-allow".to_owned(), rule])
        .collect()
}

/// The common name of the client certificate arborctl and the tests use.
pub const CLIENT_IDENTITY: &str = "arborctl";

/// The running system; every process stops when it is dropped.
pub struct System {
    pub config: SystemConfig,
    pub kubeconfig: PathBuf,
    pub client: Client,
    pub tls: TlsFiles,
    /// The identity arborctl and tests use as a gRPC client.
    pub client_identity: Identity,
    pub gitsync: Option<Controller>,
    pub hierarchy: Option<Controller>,
    pub observer: Option<Controller>,
    pub webhook: Option<Controller>,
    /// The admission endpoint of arbor-webhook.
    pub webhook_url: Option<String>,
    // Last, so that the controllers stop before the API server they talk to. `None` on an
    // existing cluster.
    pub emulator: Option<Process>,
}

impl std::fmt::Debug for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("System")
            .field("workdir", &self.config.workdir)
            .field("emulator", &self.emulator.as_ref().and_then(Process::pid))
            .field("cluster", &self.config.cluster)
            .finish_non_exhaustive()
    }
}

impl System {
    /// Starts the emulator and installs the CRDs (or connects to the existing cluster), and
    /// starts the configured controllers.
    pub async fn start(config: SystemConfig) -> Result<System, Error> {
        let workdir = config.workdir.clone();
        std::fs::create_dir_all(&workdir)
            .map_err(Error::io(format!("creating {}", workdir.display())))?;
        let domain = config
            .domain
            .clone()
            .unwrap_or_else(|| arbor_api::keys::DEFAULT_DOMAIN.to_owned());
        let (kubeconfig, emulator, client) = match &config.cluster {
            ClusterSource::Emulator { flags } => {
                let (kubeconfig, emulator, client) = start_emulator(&config, flags).await?;
                install_crds_for_domain(&client, &domain, config.startup_timeout).await?;
                ensure_namespace(&client, SYSTEM_NAMESPACE).await?;
                (kubeconfig, Some(emulator), client)
            }
            ClusterSource::Existing(cluster) => {
                let client = client_for(&cluster.kubeconfig).await?;
                (cluster.kubeconfig.clone(), None, client)
            }
        };

        let tls = TlsFiles::create(&workdir.join("tls"))?;
        let client_identity = tls.issue(CLIENT_IDENTITY)?;
        let mut system = System {
            kubeconfig,
            client,
            client_identity,
            gitsync: None,
            hierarchy: None,
            observer: None,
            webhook: None,
            webhook_url: None,
            emulator,
            tls,
            config,
        };
        system.start_controllers().await?;
        Ok(system)
    }

    async fn start_controllers(&mut self) -> Result<(), Error> {
        if self.config.gitsync {
            let cache = self.config.workdir.join("cache/gitsync");
            let resync = self.config.resync_period.clone();
            let extra: Vec<std::ffi::OsString> = vec![
                "--gittrack-mode".into(),
                "Enabled".into(),
                "--clustergittrack-mode".into(),
                "IncludeNamespaced".into(),
                "--resync-period".into(),
                resync.into(),
                "--cache-dir".into(),
                cache.into(),
                // The demo's and the tests' repositories are local directories.
                "--allow-file-repositories".into(),
            ];
            self.gitsync = Some(
                self.start_controller("gitsync", &|| Ok((extra.clone(), None)))
                    .await?,
            );
        }
        let gitsync_url = self.gitsync.as_ref().map(Controller::grpc_url);
        if self.config.hierarchy {
            let mut extra: Vec<std::ffi::OsString> = Vec::new();
            if let Some(config) = &self.config.hierarchy_config {
                extra.push("--config".into());
                extra.push(config.into());
            }
            if let Some(domain) = &self.config.domain {
                extra.push("--domain".into());
                extra.push(domain.into());
            }
            self.hierarchy = Some(
                self.start_controller("hierarchy", &|| Ok((extra.clone(), None)))
                    .await?,
            );
        }
        if self.config.observer {
            let mut extra: Vec<std::ffi::OsString> = Vec::new();
            if let Some(url) = &gitsync_url {
                extra.push("--gitsync-addr".into());
                extra.push(url.into());
            }
            self.observer = Some(
                self.start_controller("observer", &|| Ok((extra.clone(), None)))
                    .await?,
            );
        }
        if self.config.webhook {
            let host = self.webhook_host()?;
            let serving = self
                .tls
                .issue_for("webhook-serving", &[&host.to_string()])?;
            // Its admission port is chosen again with the others when one was taken meanwhile.
            let webhook_flags = || {
                let addr = free_addr_on(host)?;
                let mut extra: Vec<std::ffi::OsString> = vec![
                    "--webhook-addr".into(),
                    addr.to_string().into(),
                    "--webhook-cert".into(),
                    serving.cert.clone().into(),
                    "--webhook-key".into(),
                    serving.key.clone().into(),
                    "--gittrack-mode".into(),
                    "Enabled".into(),
                ];
                if let Some(domain) = &self.config.domain {
                    extra.push("--domain".into());
                    extra.push(domain.into());
                }
                if let Some(url) = &gitsync_url {
                    extra.push("--gitsync-addr".into());
                    extra.push(url.into());
                }
                Ok((extra, Some(addr)))
            };
            let webhook = self.start_controller("webhook", &webhook_flags).await?;
            let addr = webhook.serving.ok_or_else(|| Error::Invalid {
                what: "starting arbor-webhook".to_owned(),
                message: "its flags named no admission address".to_owned(),
            })?;
            self.webhook = Some(webhook);
            let url = format!("https://{addr}/validate");
            self.register_webhook(&url).await?;
            self.webhook_url = Some(url);
        }
        Ok(())
    }

    /// The address arbor-webhook listens on: loopback for the emulator; for an existing
    /// cluster, its [`webhook_host`](crate::source::ExistingCluster::webhook_host), since its
    /// API server calls the webhook.
    fn webhook_host(&self) -> Result<std::net::IpAddr, Error> {
        match &self.config.cluster {
            ClusterSource::Emulator { .. } => Ok(std::net::Ipv4Addr::LOCALHOST.into()),
            ClusterSource::Existing(cluster) => {
                cluster.webhook_host.ok_or_else(|| Error::Invalid {
                    what: format!(
                        "starting arbor-webhook for the cluster of {}",
                        cluster.kubeconfig.display()
                    ),
                    message:
                        "its API server must call the webhook: give an address of this machine \
                          that the API server reaches (the cluster's webhook host)"
                            .to_owned(),
                })
            }
        }
    }

    /// Starts `arbor-<name>` with the flags every controller takes plus those `extra` makes
    /// (and the serving address among them, if any), and waits until it listens.
    ///
    /// Its ports were free a moment before it starts ([`free_addr`]); when it exits because one
    /// was taken in between (another test's process), it is started again on ports chosen
    /// anew, up to [`PORT_ATTEMPTS`] times.
    async fn start_controller(
        &self,
        name: &str,
        extra: &dyn Fn() -> Result<(Vec<std::ffi::OsString>, Option<SocketAddr>), Error>,
    ) -> Result<Controller, Error> {
        let identity = self.tls.issue_for(
            name,
            &service_dns_names(name)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )?;
        let binary = format!("arbor-{name}");
        let mut attempt = 1;
        loop {
            let (admin, grpc) = (free_addr()?, free_addr()?);
            let (extra, serving) = extra()?;
            let process = ProcessSpec::new(
                &binary,
                binary_in(&self.config.bin_dir, &binary)?,
                self.config.workdir.join(format!("logs/{name}.log")),
            )
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(self.leader_election_flags())
            .args(["--log-level", &self.config.log_level])
            .args([
                "--admin-addr",
                &admin.to_string(),
                "--grpc-addr",
                &grpc.to_string(),
            ])
            .arg("--tls-cert")
            .arg(&identity.cert)
            .arg("--tls-key")
            .arg(&identity.key)
            .arg("--tls-client-ca")
            .arg(self.tls.ca())
            .args(grpc_allow(name))
            .args(extra)
            // The kubeconfig flag wins anyway; this keeps a stray KUBECONFIG from confusing logs.
            .env("KUBECONFIG", &self.kubeconfig)
            // Every controller here is its own replica on this host: a POD_NAME inherited from
            // the caller (a CI pod) would give them all one Lease identity. Empty means unset.
            .env("POD_NAME", "")
            .start()?;
            let mut controller = Controller {
                process,
                admin,
                grpc,
                serving,
                timeout: self.config.startup_timeout,
            };
            match controller.wait_ready().await {
                Ok(()) => return Ok(controller),
                Err(error) if lost_a_port(&error) && attempt < PORT_ATTEMPTS => {
                    tracing::warn!(%error, attempt, "a port was taken before {binary} bound it: starting it again on others");
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// `--leader-election` and, when on, a Lease short enough for a test to see it change hands.
    fn leader_election_flags(&self) -> Vec<String> {
        let mut flags = vec![
            "--leader-election".to_owned(),
            self.config.leader_election.to_string(),
        ];
        if self.config.leader_election {
            flags.extend(
                [
                    "--lease-namespace",
                    SYSTEM_NAMESPACE,
                    "--lease-duration",
                    "4s",
                    "--lease-renew-interval",
                    "500ms",
                ]
                .map(str::to_owned),
            );
        }
        flags
    }

    /// Registers arbor-webhook for Arbor's kinds and namespaces, as the Helm chart does, with
    /// a `url` client config since the webhook runs outside any cluster.
    async fn register_webhook(&self, url: &str) -> Result<(), Error> {
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(self.tls.ca_pem());
        let sub_namespace_group = arbor_api::SubNamespaceApi::for_domain(
            self.config
                .domain
                .as_deref()
                .unwrap_or(arbor_api::keys::DEFAULT_DOMAIN),
        )
        .group;
        let configuration = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIGURATION},
            "webhooks": [{
                "name": "validate.arbor.dev",
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "rules": [
                    {"apiGroups": ["arbor.dev"], "apiVersions": ["*"],
                     "resources": ["gittracks", "clustergittracks", "gittrackobjects", "clustergittrackobjects"],
                     "operations": ["CREATE", "UPDATE"], "scope": "*"},
                    {"apiGroups": [sub_namespace_group], "apiVersions": ["*"], "resources": ["subnamespaces"],
                     "operations": ["CREATE", "UPDATE", "DELETE"], "scope": "Namespaced"},
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"],
                     "operations": ["CREATE", "UPDATE", "DELETE"], "scope": "Cluster"},
                ],
                "namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": ["kube-system", SYSTEM_NAMESPACE],
                }]},
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
            }],
        });
        apply(&self.client, &configuration, None).await.map(drop)
    }

    /// The gRPC flags for arborctl (`--gitsync-addr …`, `--tls-*`), for commands to print.
    pub fn arborctl_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        for (flag, controller) in [
            ("--gitsync-addr", &self.gitsync),
            ("--hierarchy-addr", &self.hierarchy),
            ("--observer-addr", &self.observer),
            ("--policy-addr", &self.webhook),
        ] {
            if let Some(controller) = controller {
                flags.push(format!("{flag}={}", controller.grpc_url()));
            }
        }
        flags.push(format!(
            "--tls-cert={}",
            self.client_identity.cert.display()
        ));
        flags.push(format!("--tls-key={}", self.client_identity.key.display()));
        flags.push(format!("--tls-ca={}", self.tls.ca().display()));
        flags
    }

    /// Stops the controllers, then the emulator (SIGTERM each, SIGKILL after `grace`).
    pub fn stop(&mut self, grace: Duration) {
        self.stop_controllers(grace);
        if let Some(emulator) = &mut self.emulator
            && let Err(error) = emulator.stop(grace)
        {
            tracing::debug!(%error, "already stopped");
        }
    }

    fn stop_controllers(&mut self, grace: Duration) {
        for controller in [
            &mut self.webhook,
            &mut self.observer,
            &mut self.hierarchy,
            &mut self.gitsync,
        ]
        .into_iter()
        .flatten()
        {
            if let Err(error) = controller.process.stop(grace) {
                tracing::debug!(%error, "already stopped");
            }
        }
    }

    pub fn workdir(&self) -> &Path {
        &self.config.workdir
    }
}

/// Starts `arbor-kube-emu` with `--tls`, an admin token and `flags`; returns the kubeconfig
/// it wrote, the process and an admin client.
async fn start_emulator(
    config: &SystemConfig,
    flags: &[String],
) -> Result<(PathBuf, Process, Client), Error> {
    let workdir = &config.workdir;
    let kubeconfig = workdir.join("kubeconfig");
    let token_file = write_token_file(workdir)?;
    let mut emulator = ProcessSpec::new(
        "arbor-kube-emu",
        binary_in(&config.bin_dir, "arbor-kube-emu")?,
        workdir.join("logs/kube-emu.log"),
    )
    .args(["--tls", "--kubeconfig-out"])
    .arg(&kubeconfig)
    .arg("--token-file")
    .arg(&token_file)
    .args(flags)
    .start()?;
    emulator
        .wait_for_line("listening on", config.startup_timeout)
        .await?;
    let client = client_for(&kubeconfig).await?;
    Ok((kubeconfig, emulator, client))
}

/// Writes `<workdir>/tokens.csv` with one administrator token. The kubeconfig the emulator
/// writes then carries it, which kubectl needs: with an empty user entry it asks for a user
/// name and password instead of connecting.
fn write_token_file(workdir: &Path) -> Result<PathBuf, Error> {
    use std::hash::{BuildHasher, Hasher};
    // Unguessable enough for a loopback server that lives as long as the demo or a test.
    let random = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.finish()
    };
    let token = format!("{:016x}{:016x}", random(1), random(2));
    let path = workdir.join("tokens.csv");
    std::fs::write(
        &path,
        format!("{token},arbor-admin,arbor-admin,\"system:masters\"\n"),
    )
    .map_err(Error::io(format!("writing {}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that exits as a controller does when its port is taken (`main` returning
    /// the listener's error), or for any other reason.
    async fn exit_while_waiting(dir: &Path, message: &str) -> Error {
        let script =
            format!("echo 'Error: binding the admin listener' >&2; echo '{message}' >&2; exit 1");
        let mut process = ProcessSpec::new("sh", "/bin/sh", dir.join("sh.log"))
            .args(["-c", &script])
            .start()
            .unwrap();
        let never = free_addr().unwrap();
        process
            .wait_for_port(never, Duration::from_secs(10))
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn only_a_port_in_use_makes_a_controller_start_again() {
        let dir = tempfile::tempdir().unwrap();
        // std's words for EADDRINUSE, as the controllers' `main` prints the error's causes.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let in_use = std::net::TcpListener::bind(taken.local_addr().unwrap()).unwrap_err();
        let error = exit_while_waiting(dir.path(), &format!("Caused by: {in_use}")).await;
        assert!(lost_a_port(&error), "{error}");
        let error = exit_while_waiting(dir.path(), "Caused by: no such file").await;
        assert!(!lost_a_port(&error), "{error}");
    }
}
