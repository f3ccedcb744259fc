//! The namespace-tree commands `kubectl-accurate` and `kubectl hns` users type, with the same
//! argument shapes: `list [ROOT]`, `ns describe|set-type`, `template list|set|unset`,
//! `sub create|delete|move|graft|cut`.
//!
//! They talk to the API server with the user's kubeconfig (`--kubeconfig`, else `KUBECONFIG`,
//! else `~/.kube/config`): no gRPC, no certificates. Every write goes through admission like
//! any other, so a move the webhook refuses prints the webhook's reason. The key domain is
//! found from the cluster (the group SubNamespaces are served in: Accurate's, Innu's, or
//! `arbor.dev`) unless `--domain` names it.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use arbor_api::SubNamespaceApi;
use arbor_policy::keys::{ACCURATE_DOMAIN, DEFAULT_DOMAIN, INNU_DOMAIN, Keys};
use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// Flags every tree command takes.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The kubeconfig to use (default: `KUBECONFIG`, then `~/.kube/config`).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The key domain (`accurate.cybozu.com`, `innu.cybozu.com`, `arbor.dev`); found from the
    /// SubNamespace group the cluster serves when absent.
    #[arg(long, global = true)]
    pub domain: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show only the tree below this root.
    pub root: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Args)]
pub struct NsArgs {
    #[command(subcommand)]
    pub command: NsCommand,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Subcommand)]
pub enum NsCommand {
    /// Show a namespace's type, parent, template and children.
    Describe { namespace: String },
    /// Make a namespace a root or a template, or neither.
    SetType {
        namespace: String,
        #[arg(value_enum)]
        r#type: NsType,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum NsType {
    Root,
    Template,
    None,
}

#[derive(Debug, Args)]
pub struct TemplateArgs {
    #[command(subcommand)]
    pub command: TemplateCommand,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// List template namespaces and their instances.
    List,
    /// Make NAMESPACE follow TEMPLATE.
    Set { namespace: String, template: String },
    /// Stop NAMESPACE following its template.
    Unset { namespace: String },
}

#[derive(Debug, Args)]
pub struct SubArgs {
    #[command(subcommand)]
    pub command: SubCommand,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Debug, Subcommand)]
pub enum SubCommand {
    /// Create sub-namespace NAME under PARENT (a SubNamespace in PARENT).
    Create {
        name: String,
        parent: String,
        /// Labels for the sub-namespace, `key=value,...`.
        #[arg(long, value_delimiter = ',')]
        labels: Vec<String>,
        /// Annotations for the sub-namespace, `key=value,...`.
        #[arg(long, value_delimiter = ',')]
        annotations: Vec<String>,
    },
    /// Delete sub-namespace NAME (its SubNamespace in its parent).
    Delete { name: String },
    /// Move sub-namespace NAME under NEW_PARENT.
    Move { name: String, new_parent: String },
    /// Make namespace NAMESPACE (a root or plain one) a sub-namespace of PARENT.
    Graft { namespace: String, parent: String },
    /// Make sub-namespace NAME a root of its own.
    Cut { name: String },
}

/// A connection to the cluster under one key domain.
struct Cluster {
    client: Client,
    keys: Keys,
    sub_api: SubNamespaceApi,
}

impl Cluster {
    async fn connect(args: &ClusterArgs) -> anyhow::Result<Self> {
        let client = match &args.kubeconfig {
            Some(path) => {
                let yaml = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
                arbor_runtime::client::from_kubeconfig_yaml(&yaml).await?
            }
            None => Client::try_default()
                .await
                .context("cannot load the kubeconfig")?,
        };
        let domain = match &args.domain {
            Some(domain) => domain.clone(),
            None => discover_domain(&client).await?,
        };
        Ok(Self {
            keys: Keys::for_domain(&domain)?,
            sub_api: SubNamespaceApi::for_domain(&domain),
            client,
        })
    }

    fn namespaces(&self) -> Api<Namespace> {
        Api::all(self.client.clone())
    }

    fn sub_namespaces(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.sub_api.api_resource())
    }

    async fn namespace(&self, name: &str) -> anyhow::Result<Namespace> {
        self.namespaces()
            .get(name)
            .await
            .with_context(|| format!("cannot read namespace {name}"))
    }

    /// Sets (Some) or removes (None) labels of namespace `name` with a merge patch.
    async fn label(&self, name: &str, labels: &[(&str, Option<&str>)]) -> anyhow::Result<()> {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map_or(Value::Null, Value::from)))
            .collect();
        self.namespaces()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await
            .with_context(|| format!("cannot change namespace {name}"))?;
        Ok(())
    }

    async fn create_sub(
        &self,
        parent: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let mut object = json!({"apiVersion": self.sub_api.api_version(), "kind": "SubNamespace",
            "metadata": {"namespace": parent, "name": name}});
        if !labels.is_empty() || !annotations.is_empty() {
            object["spec"] = json!({"labels": labels, "annotations": annotations});
        }
        self.sub_namespaces(parent)
            .create(&PostParams::default(), &serde_json::from_value(object)?)
            .await
            .with_context(|| format!("cannot create SubNamespace {parent}/{name}"))?;
        Ok(())
    }

    async fn delete_sub(&self, parent: &str, name: &str) -> anyhow::Result<()> {
        self.sub_namespaces(parent)
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("cannot delete SubNamespace {parent}/{name}"))?;
        Ok(())
    }

    fn parent_of(&self, namespace: &Namespace) -> Option<String> {
        namespace.labels().get(&self.keys.parent_label).cloned()
    }
}

/// The key domain whose SubNamespace group the cluster serves: Accurate's, Innu's, else Arbor's.
async fn discover_domain(client: &Client) -> anyhow::Result<String> {
    let groups = client
        .list_api_groups()
        .await
        .context("cannot list the API groups to find the key domain (or pass --domain)")?;
    let served = |group: &str| groups.groups.iter().any(|g| g.name == group);
    Ok([ACCURATE_DOMAIN, INNU_DOMAIN]
        .into_iter()
        .find(|domain| served(domain))
        .unwrap_or(DEFAULT_DOMAIN)
        .to_owned())
}

fn pairs(values: &[String], flag: &str) -> anyhow::Result<BTreeMap<String, String>> {
    values
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => bail!("{flag}: {pair:?} is not key=value"),
        })
        .collect()
}

pub async fn list(args: &ListArgs) -> anyhow::Result<()> {
    let cluster = Cluster::connect(&args.cluster).await?;
    let namespaces = cluster.namespaces().list(&ListParams::default()).await?;
    let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut roots = Vec::new();
    for ns in &namespaces.items {
        match cluster.parent_of(ns) {
            Some(parent) => children.entry(parent).or_default().push(ns.name_any()),
            None if ns
                .labels()
                .get(&cluster.keys.type_label)
                .map(String::as_str)
                == Some("root") =>
            {
                roots.push(ns.name_any())
            }
            None => {}
        }
    }
    if let Some(root) = &args.root {
        roots = vec![root.clone()];
    }
    roots.sort();
    let mut out = String::new();
    for root in roots {
        draw(&root, &children, 0, &mut out);
    }
    print!("{out}");
    Ok(())
}

fn draw(name: &str, children: &BTreeMap<String, Vec<String>>, depth: usize, out: &mut String) {
    out.push_str(&format!("{}{name}\n", "  ".repeat(depth)));
    let mut below = children.get(name).cloned().unwrap_or_default();
    below.sort();
    for child in below {
        // A cycle is drawn once: the webhook and the controller refuse and halt it.
        if depth < 64 {
            draw(&child, children, depth + 1, out);
        }
    }
}

pub async fn ns(args: &NsArgs) -> anyhow::Result<()> {
    let cluster = Cluster::connect(&args.cluster).await?;
    let keys = &cluster.keys;
    match &args.command {
        NsCommand::Describe { namespace } => {
            let ns = cluster.namespace(namespace).await?;
            let labels = ns.labels();
            let get = |key: &str| labels.get(key).cloned().unwrap_or_default();
            let all = cluster.namespaces().list(&ListParams::default()).await?;
            let mut below: Vec<String> = all
                .items
                .iter()
                .filter(|n| cluster.parent_of(n).as_deref() == Some(namespace.as_str()))
                .map(ResourceExt::name_any)
                .collect();
            below.sort();
            println!("Name:      {namespace}");
            println!("Type:      {}", get(&keys.type_label));
            println!("Parent:    {}", get(&keys.parent_label));
            println!("Template:  {}", get(&keys.template_label));
            println!("Children:  {}", below.join(", "));
        }
        NsCommand::SetType { namespace, r#type } => {
            let value = match r#type {
                NsType::Root => Some("root"),
                NsType::Template => Some("template"),
                NsType::None => None,
            };
            cluster
                .label(namespace, &[(&keys.type_label, value)])
                .await?;
            println!("namespace {namespace}: type {}", value.unwrap_or("none"));
        }
    }
    Ok(())
}

pub async fn template(args: &TemplateArgs) -> anyhow::Result<()> {
    let cluster = Cluster::connect(&args.cluster).await?;
    let keys = &cluster.keys;
    match &args.command {
        TemplateCommand::List => {
            let all = cluster.namespaces().list(&ListParams::default()).await?;
            for ns in &all.items {
                if ns.labels().get(&keys.type_label).map(String::as_str) == Some("template") {
                    println!("{}", ns.name_any());
                }
            }
        }
        TemplateCommand::Set {
            namespace,
            template,
        } => {
            cluster
                .label(namespace, &[(&keys.template_label, Some(template))])
                .await?;
            println!("namespace {namespace} follows template {template}");
        }
        TemplateCommand::Unset { namespace } => {
            cluster
                .label(namespace, &[(&keys.template_label, None)])
                .await?;
            println!("namespace {namespace} follows no template");
        }
    }
    Ok(())
}

pub async fn sub(args: &SubArgs) -> anyhow::Result<()> {
    let cluster = Cluster::connect(&args.cluster).await?;
    let keys = cluster.keys.clone();
    match &args.command {
        SubCommand::Create {
            name,
            parent,
            labels,
            annotations,
        } => {
            let labels = pairs(labels, "--labels")?;
            let annotations = pairs(annotations, "--annotations")?;
            cluster
                .create_sub(parent, name, labels, annotations)
                .await?;
            println!("created SubNamespace {parent}/{name}");
        }
        SubCommand::Delete { name } => {
            let ns = cluster.namespace(name).await?;
            let Some(parent) = cluster.parent_of(&ns) else {
                bail!("namespace {name} is not a sub-namespace");
            };
            cluster.delete_sub(&parent, name).await?;
            println!("deleted SubNamespace {parent}/{name}");
        }
        SubCommand::Move { name, new_parent } => {
            let ns = cluster.namespace(name).await?;
            let Some(parent) = cluster.parent_of(&ns) else {
                bail!("namespace {name} is not a sub-namespace");
            };
            if parent == *new_parent {
                println!("namespace {name} is already under {new_parent}");
                return Ok(());
            }
            let old = cluster.sub_namespaces(&parent).get_opt(name).await?;
            // The namespace moves first: the webhook judges the new parent (cycles included).
            cluster
                .label(name, &[(&keys.parent_label, Some(new_parent))])
                .await?;
            let spec = |field: &str| -> BTreeMap<String, String> {
                old.as_ref()
                    .and_then(|o| o.data.pointer(&format!("/spec/{field}")).cloned())
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default()
            };
            cluster
                .create_sub(new_parent, name, spec("labels"), spec("annotations"))
                .await?;
            if old.is_some() {
                cluster.delete_sub(&parent, name).await?;
            }
            println!("moved {name} from {parent} to {new_parent}");
        }
        SubCommand::Graft { namespace, parent } => {
            let ns = cluster.namespace(namespace).await?;
            if cluster.parent_of(&ns).is_some() {
                bail!("namespace {namespace} is already a sub-namespace");
            }
            cluster
                .label(
                    namespace,
                    &[
                        (&keys.type_label, None),
                        (&keys.template_label, None),
                        (&keys.parent_label, Some(parent)),
                    ],
                )
                .await?;
            cluster
                .create_sub(parent, namespace, BTreeMap::new(), BTreeMap::new())
                .await?;
            println!("grafted {namespace} under {parent}");
        }
        SubCommand::Cut { name } => {
            let ns = cluster.namespace(name).await?;
            let Some(parent) = cluster.parent_of(&ns) else {
                bail!("namespace {name} is not a sub-namespace");
            };
            cluster
                .label(
                    name,
                    &[(&keys.parent_label, None), (&keys.type_label, Some("root"))],
                )
                .await?;
            match cluster.delete_sub(&parent, name).await {
                Ok(()) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => return Err(error),
            }
            println!("cut {name} from {parent}: it is a root now");
        }
    }
    Ok(())
}

fn is_not_found(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<kube::Error>()
        .is_some_and(|e| matches!(e, kube::Error::Api(status) if status.is_not_found()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Test {
        #[command(subcommand)]
        sub: SubCommand,
    }

    #[test]
    fn sub_create_takes_accurate_s_argument_shape() {
        let parsed = Test::try_parse_from([
            "x",
            "create",
            "team-a-dev",
            "team-a",
            "--labels=foo=bar,team=a",
            "--annotations=baz=zot",
        ])
        .unwrap();
        let SubCommand::Create {
            name,
            parent,
            labels,
            annotations,
        } = parsed.sub
        else {
            panic!("not create");
        };
        assert_eq!((name.as_str(), parent.as_str()), ("team-a-dev", "team-a"));
        assert_eq!(pairs(&labels, "--labels").unwrap().len(), 2);
        assert_eq!(pairs(&annotations, "--annotations").unwrap()["baz"], "zot");
        assert!(pairs(&["novalue".into()], "--labels").is_err());
    }
}
