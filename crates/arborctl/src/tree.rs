//! `arborctl tree [ROOT]`: the namespace tree, drawn the way `kubectl hns tree` draws it.
//!
//! Each root (or the given namespace) on its own line, its sub-namespaces below with `├──` and
//! `└──`; then each template with its instances. Markers after a name say how it got there:
//! `[s]` created from a SubNamespace, `[i]` an instance of a template, `[cycle]` halted
//! because its parent chain loops (condition reason CycleDetected). A legend lists the
//! markers that appear.

use arbor_proto::v1::hierarchy_service_client::HierarchyServiceClient;
use arbor_proto::v1::{GetTreeRequest, GetTreeResponse, NamespaceRole, TreeNode};
use clap::Args;
use serde_json::{Value, json};

use crate::connect::{ConnectionArgs, Service};
use crate::output::{Format, OutputArgs, conditions_json, enum_name, print_structured};

/// The condition reason arbor-hierarchy sets on namespaces whose parent chain loops.
const CYCLE_REASON: &str = "CycleDetected";

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Start at this namespace; default: every root and every template.
    pub root: Option<String>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

pub async fn run(args: &TreeArgs) -> anyhow::Result<()> {
    let remote = args.connection.connect(Service::Hierarchy).await?;
    let request = GetTreeRequest {
        root: args.root.clone().unwrap_or_default(),
    };
    let response = HierarchyServiceClient::new(remote.channel())
        .get_tree(request)
        .await
        .map_err(|status| remote.call_failed("GetTree", status))?
        .into_inner();
    match args.output.format {
        Format::Table => print!("{}", render(&response)),
        format => print_structured(format, &tree_json(&response))?,
    }
    Ok(())
}

/// Markers that can follow a namespace name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    SubNamespace,
    Instance,
    Cycle,
}

impl Marker {
    const ALL: [Self; 3] = [Self::SubNamespace, Self::Instance, Self::Cycle];

    fn tag(self) -> &'static str {
        match self {
            Self::SubNamespace => "[s]",
            Self::Instance => "[i]",
            Self::Cycle => "[cycle]",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            Self::SubNamespace => "created from a SubNamespace",
            Self::Instance => "follows a template",
            Self::Cycle => "halted: its parent chain is a cycle",
        }
    }

    fn of(node: &TreeNode) -> Vec<Self> {
        let mut markers = Vec::new();
        if node.from_subnamespace {
            markers.push(Self::SubNamespace);
        }
        if node.role() == NamespaceRole::Instance || !node.template.is_empty() {
            markers.push(Self::Instance);
        }
        if node
            .conditions
            .iter()
            .any(|condition| condition.reason == CYCLE_REASON)
        {
            markers.push(Self::Cycle);
        }
        markers
    }
}

/// Draws roots, then templates, then the legend of the markers used.
pub fn render(tree: &GetTreeResponse) -> String {
    let mut out = String::new();
    let mut used = Vec::new();
    for node in &tree.roots {
        draw_node(node, "", None, &mut out, &mut used);
    }
    for node in &tree.templates {
        draw_node(node, "", None, &mut out, &mut used);
    }
    if out.is_empty() {
        return "No namespaces in a tree.\n".to_owned();
    }
    let legend: Vec<Marker> = Marker::ALL
        .into_iter()
        .filter(|marker| used.contains(marker))
        .collect();
    if !legend.is_empty() {
        out.push('\n');
        for marker in legend {
            out.push_str(&format!("{} {}\n", marker.tag(), marker.meaning()));
        }
    }
    out
}

/// `branch` is `None` for a top-level node, else whether it is the last of its siblings.
fn draw_node(
    node: &TreeNode,
    prefix: &str,
    branch: Option<bool>,
    out: &mut String,
    used: &mut Vec<Marker>,
) {
    let (connector, child_prefix) = match branch {
        None => (String::new(), String::new()),
        Some(true) => (format!("{prefix}└── "), format!("{prefix}    ")),
        Some(false) => (format!("{prefix}├── "), format!("{prefix}│   ")),
    };
    let mut line = format!("{connector}{}", node.name);
    if node.role() == NamespaceRole::Template {
        line.push_str(" (template)");
    }
    for marker in Marker::of(node) {
        line.push(' ');
        line.push_str(marker.tag());
        if !used.contains(&marker) {
            used.push(marker);
        }
    }
    out.push_str(&line);
    out.push('\n');
    let count = node.children.len();
    for (index, child) in node.children.iter().enumerate() {
        draw_node(child, &child_prefix, Some(index + 1 == count), out, used);
    }
}

pub fn tree_json(tree: &GetTreeResponse) -> Value {
    json!({
        "roots": tree.roots.iter().map(node_json).collect::<Vec<_>>(),
        "templates": tree.templates.iter().map(node_json).collect::<Vec<_>>(),
    })
}

fn node_json(node: &TreeNode) -> Value {
    json!({
        "name": node.name,
        "role": enum_name(node.role().as_str_name(), "NAMESPACE_ROLE_"),
        "fromSubnamespace": node.from_subnamespace,
        "template": node.template,
        "conditions": conditions_json(&node.conditions),
        "children": node.children.iter().map(node_json).collect::<Vec<_>>(),
    })
}
