//! The Helm chart's RBAC against what the controllers really ask for.
//!
//! [`RenderedChart`] is `helm template` of `charts/arbor` (run with the chart tests' own helm
//! helpers): its (Cluster)Roles and (Cluster)RoleBindings become, per identity, a list of
//! [`Grant`]s, and its Deployments' container arguments are what [`RbacEnv`] starts each
//! controller with, the in-cluster paths and addresses swapped for loopback ones.
//!
//! [`RbacEnv`] runs `arbor-kube-emu` with one static token per component, named like the
//! chart's ServiceAccounts (`system:serviceaccount:arbor-system:arbor-<component>`), so the
//! emulator's request accounting (`GET /__emu/requests`) says which component made each
//! request. The emulator enforces RBAC (`--authorization rbac`) with exactly the chart's
//! rendered Roles, ClusterRoles and bindings applied (plus kube's bootstrap policy), so a
//! grant the chart lacks fails the first request that needs it with kube-apiserver's 403.
//! Afterwards the test also judges each recorded request with [`Grants::allows`],
//! Kubernetes' RBAC matching rules (API groups, resources with `resource/subresource`, verbs,
//! `*` in each, resourceNames, the namespace of a Role or RoleBinding), which names what is
//! missing in one list and, with [`Grants::unused`], what the chart grants but nothing used.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use arbor_testkit::cluster::{apply, ensure_namespace, install_crds, parse_documents};
use arbor_testkit::ports::free_addr;
use arbor_testkit::tls::TlsFiles;
use arbor_testkit::{Process, ProcessSpec};
use base64::Engine as _;
use kube::Client;
use serde::Deserialize;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::source::Need;

// The chart tests' helm helpers (finding helm, `helm template`), shared rather than copied;
// they expect these four items in their parent module.
#[allow(dead_code)]
#[path = "../../crates/chart-tests/tests/common/helm.rs"]
mod helm;

const NAMESPACE: &str = "arbor-system";
const RELEASE: &str = "arbor";

fn workspace_root() -> &'static Path {
    crate::workspace_root()
}

fn chart_dir() -> PathBuf {
    workspace_root().join("charts/arbor")
}

/// What the environment needs of the API server, so that its test skips, saying why, when
/// `ARBOR_E2E_KUBECONFIG` names another: each request's identity comes from the emulator's
/// request accounting, and the identities from its token file.
pub const NEEDS: &[Need] = &[
    Need::EmulatorHook("request accounting (GET /__emu/requests)"),
    Need::EmulatorFlags("a token file (--token-file) with one identity per component"),
];

/// The limit of every wait: generous, since the suite shares two cores with other tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// The components the chart deploys, each with a ServiceAccount `arbor-<component>`.
pub const COMPONENTS: [&str; 4] = ["gitsync", "hierarchy", "observer", "webhook"];

/// The username the emulator gives `component`'s token: its ServiceAccount's.
pub fn identity(component: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:arbor-{component}")
}

/// One rule of a (Cluster)Role.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// One request, as the emulator's accounting records it.
pub use arbor_kube_emu::accounting::RequestRecord as Request;

/// `identity verb group/resource[/subresource] namespace`, for messages.
pub fn describe(request: &Request) -> String {
    let group = if request.group.is_empty() {
        "core"
    } else {
        &request.group
    };
    let namespace = if request.namespace.is_empty() {
        "(cluster)"
    } else {
        &request.namespace
    };
    let subresource = if request.subresource.is_empty() {
        String::new()
    } else {
        format!("/{}", request.subresource)
    };
    format!(
        "{} {} {group}/{}{subresource} {namespace}",
        request.identity, request.verb, request.resource
    )
}

impl Rule {
    /// Whether this rule, in effect in every namespace or only `scope`, allows `request`.
    pub fn allows(&self, scope: Option<&str>, request: &Request) -> bool {
        let any =
            |list: &[String], wanted: &str| list.iter().any(|item| item == "*" || item == wanted);
        scope.is_none_or(|namespace| namespace == request.namespace)
            && any(&self.api_groups, &request.group)
            && any(&self.verbs, &request.verb)
            && self.names_resource(&request.resource, &request.subresource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&request.name))
    }

    /// `resources` entries: `name`, `name/sub`, `*`, `*/sub` and `name/*`.
    fn names_resource(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|entry| {
            if entry == "*" {
                return true;
            }
            match (entry.split_once('/'), subresource.is_empty()) {
                (None, true) => entry == resource,
                (Some((name, sub)), false) => {
                    (name == "*" || name == resource) && (sub == "*" || sub == subresource)
                }
                _ => false,
            }
        })
    }
}

/// A rule granted to an identity, where it applies, and the role it comes from.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The RoleBinding's namespace; `None` for a ClusterRoleBinding.
    pub scope: Option<String>,
    pub role: String,
    pub rule: Rule,
}

/// Everything one identity is granted.
#[derive(Debug, Clone, Default)]
pub struct Grants(pub Vec<Grant>);

impl Grants {
    pub fn allows(&self, request: &Request) -> bool {
        self.0
            .iter()
            .any(|grant| grant.rule.allows(grant.scope.as_deref(), request))
    }

    /// The verbs granted that no request in `used` exercised, one line per role, scope,
    /// group and resource (`core/configmaps in (cluster) via ClusterRole x: create, delete`).
    /// Rules with `*` are taken as written: `*` is unused only when nothing matched it.
    pub fn unused(&self, used: &[Request]) -> Vec<String> {
        let mut unused: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for grant in &self.0 {
            let scope = grant.scope.as_deref();
            for group in &grant.rule.api_groups {
                for resource in &grant.rule.resources {
                    for verb in &grant.rule.verbs {
                        let single = Rule {
                            api_groups: vec![group.clone()],
                            resources: vec![resource.clone()],
                            verbs: vec![verb.clone()],
                            resource_names: grant.rule.resource_names.clone(),
                        };
                        if !used.iter().any(|request| single.allows(scope, request)) {
                            let group = if group.is_empty() { "core" } else { group };
                            let line = format!(
                                "{group}/{resource} in {} via {}",
                                scope.unwrap_or("(cluster)"),
                                grant.role
                            );
                            unused.entry(line).or_default().insert(verb);
                        }
                    }
                }
            }
        }
        unused
            .into_iter()
            .map(|(line, verbs)| format!("{line}: {}", Vec::from_iter(verbs).join(", ")))
            .collect()
    }
}

/// The chart rendered with its default values into `arbor-system`.
#[derive(Debug, Clone)]
pub struct RenderedChart {
    pub objects: Vec<Value>,
}

impl RenderedChart {
    pub fn render() -> anyhow::Result<RenderedChart> {
        let stream = helm::template(&[])?;
        let objects = parse_documents("helm template charts/arbor", &stream)?;
        Ok(RenderedChart { objects })
    }

    fn find(&self, kind: &str, name: &str) -> anyhow::Result<&Value> {
        self.objects
            .iter()
            .find(|object| object["kind"] == kind && object["metadata"]["name"] == name)
            .with_context(|| format!("the chart renders no {kind} {name}"))
    }

    fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .iter()
            .filter(move |object| object["kind"] == kind)
    }

    /// The chart's ServiceAccounts, Roles, ClusterRoles and their bindings, in an order that
    /// can be applied (accounts and roles before the bindings naming them).
    pub fn rbac_objects(&self) -> impl Iterator<Item = &Value> + '_ {
        [
            "ServiceAccount",
            "ClusterRole",
            "Role",
            "ClusterRoleBinding",
            "RoleBinding",
        ]
        .into_iter()
        .flat_map(|kind| self.of_kind(kind))
    }

    /// The rules of the role a binding refers to (a RoleBinding's `Role` is in its namespace).
    fn role_rules(&self, binding: &Value) -> anyhow::Result<(String, Vec<Rule>)> {
        let kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
        let name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let role = match kind {
            "ClusterRole" => self.find("ClusterRole", name)?,
            "Role" => self
                .of_kind("Role")
                .find(|role| {
                    role["metadata"]["name"] == name
                        && role["metadata"]["namespace"] == binding["metadata"]["namespace"]
                })
                .with_context(|| format!("the chart renders no Role {name} for its binding"))?,
            other => bail!(
                "binding {} refers to a {other}",
                binding["metadata"]["name"]
            ),
        };
        let rules = serde_json::from_value(role["rules"].clone())
            .with_context(|| format!("the rules of {kind} {name}"))?;
        Ok((format!("{kind} {name}"), rules))
    }

    /// What the chart grants `identity` (a ServiceAccount's username, member of the
    /// ServiceAccount groups), through its ClusterRoleBindings and RoleBindings.
    pub fn grants(&self, identity: &str) -> anyhow::Result<Grants> {
        let mut grants = Vec::new();
        for kind in ["ClusterRoleBinding", "RoleBinding"] {
            for binding in self.of_kind(kind) {
                let subjects = binding["subjects"].as_array().cloned().unwrap_or_default();
                if !subjects.iter().any(|subject| names(subject, identity)) {
                    continue;
                }
                let scope = (kind == "RoleBinding")
                    .then(|| binding["metadata"]["namespace"].as_str().map(str::to_owned))
                    .flatten();
                let (role, rules) = self.role_rules(binding)?;
                grants.extend(rules.into_iter().map(|rule| Grant {
                    scope: scope.clone(),
                    role: role.clone(),
                    rule,
                }));
            }
        }
        Ok(Grants(grants))
    }

    /// The container arguments of Deployment `arbor-<component>`.
    pub fn args(&self, component: &str) -> anyhow::Result<Vec<String>> {
        let deployment = self.find("Deployment", &format!("arbor-{component}"))?;
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        serde_json::from_value(args.clone())
            .with_context(|| format!("the container args of Deployment arbor-{component}"))
    }

    /// arbor-hierarchy's configuration file, from the chart's ConfigMap.
    pub fn hierarchy_config(&self) -> anyhow::Result<String> {
        let map = self.find("ConfigMap", "arbor-hierarchy-config")?;
        map["data"]["config.yaml"]
            .as_str()
            .map(str::to_owned)
            .context("ConfigMap arbor-hierarchy-config has no config.yaml")
    }

    /// The chart's ValidatingWebhookConfiguration, calling `base` (`https://host:port`) with
    /// each webhook's service path instead of the in-cluster Service, trusting `ca_pem`.
    pub fn webhook_registration(&self, base: &str, ca_pem: &str) -> anyhow::Result<Value> {
        let mut registration = self
            .of_kind("ValidatingWebhookConfiguration")
            .next()
            .context("the chart renders no ValidatingWebhookConfiguration")?
            .clone();
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        let webhooks = registration["webhooks"]
            .as_array_mut()
            .context("the ValidatingWebhookConfiguration has no webhooks")?;
        for webhook in webhooks {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap_or("/")
                .to_owned();
            webhook["clientConfig"] =
                json!({"url": format!("{base}{path}"), "caBundle": ca_bundle});
        }
        Ok(registration)
    }
}

/// Whether a binding subject names `identity` or a group a ServiceAccount belongs to.
fn names(subject: &Value, identity: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("ServiceAccount") => {
            let namespace = subject["namespace"].as_str().unwrap_or_default();
            identity == format!("system:serviceaccount:{namespace}:{name}")
        }
        Some("User") => identity == name,
        Some("Group") => {
            let namespace = identity
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.split_once(':'))
                .map(|(namespace, _)| namespace);
            match namespace {
                Some(namespace) => {
                    name == "system:serviceaccounts"
                        || name == "system:authenticated"
                        || name == format!("system:serviceaccounts:{namespace}")
                }
                None => name == "system:authenticated",
            }
        }
        _ => false,
    }
}

/// Replaces the value after each flag of `replacements` in `args` (flags the chart does not
/// pass are left out: each component takes only some of them).
pub fn replace_values(
    args: &[String],
    replacements: &BTreeMap<&str, OsString>,
) -> anyhow::Result<Vec<OsString>> {
    let mut out: Vec<OsString> = args.iter().map(OsString::from).collect();
    for (index, arg) in args.iter().enumerate() {
        if let Some(value) = replacements.get(arg.as_str()) {
            let slot = out
                .get_mut(index + 1)
                .with_context(|| format!("flag {arg} has no value"))?;
            *slot = value.clone();
        }
    }
    Ok(out)
}

/// The emulator, one kubeconfig per component, and the controllers started so far.
pub struct RbacEnv {
    /// The administrator's client, for the scenario's own changes.
    pub client: Client,
    pub chart: RenderedChart,
    pub tls: TlsFiles,
    controllers: BTreeMap<String, Process>,
    gitsync_url: Option<String>,
    emulator: Process,
    // Last: the processes above stop (on drop) before their files go.
    dir: TempDir,
}

impl std::fmt::Debug for RbacEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RbacEnv")
            .field("dir", &self.dir.path())
            .field("controllers", &self.controllers.keys())
            .finish_non_exhaustive()
    }
}

impl RbacEnv {
    /// Renders the chart, starts the emulator with the admin's and each component's token,
    /// and installs the CRDs and `arbor-system`.
    pub async fn start() -> anyhow::Result<RbacEnv> {
        let chart = RenderedChart::render()?;
        let dir = tempfile::tempdir()?;
        let salt = salt(dir.path());
        let token = |user: &str| format!("{}-{salt}", user.replace(':', "-"));
        // The admin first: the emulator writes the first token into its own kubeconfig.
        let mut lines = format!(
            "{},arbor-admin,arbor-admin,\"system:masters\"\n",
            token("admin")
        );
        for component in COMPONENTS {
            let user = identity(component);
            let _ = writeln!(lines, "{},{user},{user},\"\"", token(component));
        }
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, lines).with_context(|| format!("writing {}", tokens.display()))?;

        let admin_kubeconfig = dir.path().join("admin.kubeconfig");
        let mut emulator = ProcessSpec::new(
            "arbor-kube-emu",
            crate::binary("arbor-kube-emu", "arbor-kube-emu")?,
            dir.path().join("logs/kube-emu.log"),
        )
        .args(["--listen", "127.0.0.1:0", "--tls", "--kubeconfig-out"])
        .arg(&admin_kubeconfig)
        .arg("--token-file")
        .arg(&tokens)
        .args(["--authorization", "rbac"])
        .start()?;
        emulator.wait_for_line("listening on", WAIT).await?;
        let admin_yaml = std::fs::read_to_string(&admin_kubeconfig)
            .with_context(|| format!("reading {}", admin_kubeconfig.display()))?;
        for component in COMPONENTS {
            let path = dir.path().join(format!("{component}.kubeconfig"));
            write_kubeconfig_with_token(&admin_yaml, &token(component), &path)?;
        }
        let client = arbor_runtime::client::from_kubeconfig_yaml(&admin_yaml).await?;
        install_crds(&client, WAIT).await?;
        ensure_namespace(&client, NAMESPACE).await?;
        for object in chart.rbac_objects() {
            apply(&client, object, Some(NAMESPACE))
                .await
                .with_context(|| {
                    format!(
                        "applying the chart's {} {}",
                        object["kind"], object["metadata"]["name"]
                    )
                })?;
        }
        let tls = TlsFiles::create(&dir.path().join("tls"))?;
        Ok(RbacEnv {
            client,
            chart,
            tls,
            controllers: BTreeMap::new(),
            gitsync_url: None,
            emulator,
            dir,
        })
    }

    /// Starts `arbor-<component>` with the chart's arguments, as its ServiceAccount, on
    /// loopback ports, and waits for its ports. The webhook is also registered with the
    /// chart's ValidatingWebhookConfiguration.
    pub async fn start_component(&mut self, component: &str) -> anyhow::Result<()> {
        let identity_files = self.tls.issue(component)?;
        let (admin, grpc, serving_addr) = (free_addr()?, free_addr()?, free_addr()?);
        let config = self.dir.path().join("hierarchy-config.yaml");
        std::fs::write(&config, self.chart.hierarchy_config()?)
            .with_context(|| format!("writing {}", config.display()))?;
        let mut replacements: BTreeMap<&str, OsString> = BTreeMap::from([
            ("--admin-addr", admin.to_string().into()),
            ("--grpc-addr", grpc.to_string().into()),
            ("--tls-cert", identity_files.cert.clone().into()),
            ("--tls-key", identity_files.key.clone().into()),
            ("--tls-client-ca", self.tls.ca().into()),
            ("--cache-dir", self.dir.path().join("cache").into()),
            ("--config", config.clone().into()),
            ("--hierarchy-config", config.into()),
        ]);
        if component == "webhook" {
            let serving = self.tls.issue("webhook-serving")?;
            replacements.insert("--webhook-addr", serving_addr.to_string().into());
            replacements.insert("--webhook-cert", serving.cert.into());
            replacements.insert("--webhook-key", serving.key.into());
        }
        if let Some(url) = &self.gitsync_url {
            replacements.insert("--gitsync-addr", url.into());
        }
        let mut args = replace_values(&self.chart.args(component)?, &replacements)?;
        if component == "gitsync" {
            // The chart refuses file:// repositories; the tests' repositories are local.
            args.push("--allow-file-repositories".into());
        }
        let kubeconfig = self.dir.path().join(format!("{component}.kubeconfig"));
        let binary = format!("arbor-{component}");
        let mut process = ProcessSpec::new(
            &binary,
            crate::binary(&binary, &binary)?,
            self.dir.path().join(format!("logs/{component}.log")),
        )
        .args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        // What the Deployment's downward API gives the pod.
        .env("POD_NAME", format!("{binary}-0"))
        .env("POD_NAMESPACE", NAMESPACE)
        .env("KUBECONFIG", &kubeconfig)
        .start()?;
        process.wait_for_port(admin, WAIT).await?;
        process.wait_for_port(grpc, WAIT).await?;
        if component == "webhook" {
            process.wait_for_port(serving_addr, WAIT).await?;
            let registration = self
                .chart
                .webhook_registration(&format!("https://{serving_addr}"), self.tls.ca_pem())?;
            apply(&self.client, &registration, None).await?;
        }
        if component == "gitsync" {
            self.gitsync_url = Some(format!("https://{grpc}"));
        }
        self.controllers.insert(component.to_owned(), process);
        Ok(())
    }

    /// Every request the emulator recorded.
    pub async fn requests(&self) -> anyhow::Result<Vec<Request>> {
        #[derive(Deserialize)]
        struct Report {
            records: Vec<Request>,
        }
        let request = http::Request::get("/__emu/requests").body(Vec::new())?;
        let text = self.client.request_text(request).await?;
        let report: Report =
            serde_json::from_str(&text).context("decoding the emulator's request report")?;
        Ok(report.records)
    }

    /// The last lines of every process's log, for failure messages.
    pub fn logs(&self) -> String {
        std::iter::once(&self.emulator)
            .chain(self.controllers.values())
            .map(|process| format!("\n--- {} ---\n{}", process.name(), process.log_tail()))
            .collect()
    }

    /// A client authenticated as `component`'s ServiceAccount, as the component itself is.
    pub async fn client_as(&self, component: &str) -> anyhow::Result<Client> {
        let path = self.dir.path().join(format!("{component}.kubeconfig"));
        let yaml = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(arbor_runtime::client::from_kubeconfig_yaml(&yaml).await?)
    }

    /// A directory removed with the environment.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A per-run salt for the tokens, so that no two runs share one.
fn salt(dir: &Path) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(dir.as_os_str().as_encoded_bytes());
    format!("{:016x}", hasher.finish())
}

/// Writes the emulator's kubeconfig with every user's credentials replaced by `token`.
fn write_kubeconfig_with_token(admin_yaml: &str, token: &str, path: &Path) -> anyhow::Result<()> {
    let mut kubeconfig = parse_documents("the emulator's kubeconfig", admin_yaml)?
        .into_iter()
        .next()
        .context("the emulator's kubeconfig is empty")?;
    for user in kubeconfig["users"]
        .as_array_mut()
        .context("the emulator's kubeconfig has no users")?
    {
        user["user"] = json!({ "token": token });
    }
    std::fs::write(path, serde_json::to_string(&kubeconfig)?)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> Request {
        Request {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            identity: identity("gitsync"),
            code: 200,
        }
    }

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]) -> Rule {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        Rule {
            api_groups: owned(groups),
            resources: owned(resources),
            verbs: owned(verbs),
            resource_names: owned(names),
        }
    }

    #[test]
    fn a_subresource_needs_its_own_entry_or_a_wildcard() {
        let status = request("update", "arbor.dev", "syncs", "status", "a", "s");
        assert!(!rule(&["arbor.dev"], &["syncs"], &["update"], &[]).allows(None, &status));
        assert!(rule(&["arbor.dev"], &["syncs/status"], &["update"], &[]).allows(None, &status));
        assert!(rule(&["arbor.dev"], &["*/status"], &["update"], &[]).allows(None, &status));
        assert!(rule(&["*"], &["*"], &["*"], &[]).allows(None, &status));
        let plain = request("update", "arbor.dev", "syncs", "", "a", "s");
        assert!(!rule(&["arbor.dev"], &["syncs/status"], &["update"], &[]).allows(None, &plain));
    }

    #[test]
    fn a_role_applies_in_its_namespace_and_resource_names_restrict() {
        let lease = request(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "arbor-system",
            "l",
        );
        let leases = rule(&["coordination.k8s.io"], &["leases"], &["get"], &[]);
        assert!(leases.allows(Some("arbor-system"), &lease));
        assert!(!leases.allows(Some("default"), &lease));
        let named = rule(&["coordination.k8s.io"], &["leases"], &["get"], &["other"]);
        assert!(!named.allows(None, &lease));
        assert!(!rule(&[""], &["leases"], &["get"], &[]).allows(None, &lease));
    }

    #[test]
    fn group_subjects_cover_service_accounts() {
        let me = identity("observer");
        assert!(names(
            &json!({"kind": "Group", "name": "system:serviceaccounts:arbor-system"}),
            &me
        ));
        assert!(!names(
            &json!({"kind": "Group", "name": "system:serviceaccounts:other"}),
            &me
        ));
        assert!(names(
            &json!({"kind": "ServiceAccount", "name": "arbor-observer", "namespace": "arbor-system"}),
            &me
        ));
        assert!(!names(
            &json!({"kind": "ServiceAccount", "name": "arbor-gitsync", "namespace": "arbor-system"}),
            &me
        ));
    }
}
