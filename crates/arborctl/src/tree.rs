//! `arborctl tree [ROOT]`: the namespace tree, drawn the way `kubectl hns tree` draws it.
//!
//! Each root (or the given namespace) on its own line, its sub-namespaces below with `├──` and
//! `└──`; then each template with its instances. Markers after a name say how it got there:
//! `[s]` created from a SubNamespace, `[i]` an instance of a template, `[cycle]` halted
//! because its parent chain loops (condition reason CycleDetected). A legend lists the
//! markers that appear.
//!
//! arbor-hierarchy sends the tree flat (each node names the node it hangs under, see
//! `GetTreeResponse`), so a chain of any depth crosses the wire; [`Forest`] rebuilds the shape
//! as indices and everything here walks it with explicit stacks, never by recursion.
//! `-o json` / `-o yaml` print the flat list as it came, in the same order.

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

/// The answer as a tree: for each node the indices of its children, and the top nodes, in the
/// order the server sent them.
#[derive(Debug)]
pub struct Forest<'a> {
    nodes: &'a [TreeNode],
    children: Vec<Vec<usize>>,
    tops: Vec<usize>,
}

impl<'a> Forest<'a> {
    /// Links each node to the node its `parent` names. A parent that is not in the answer
    /// (an older or inconsistent server) makes the node a top node rather than losing it.
    pub fn new(nodes: &'a [TreeNode]) -> Self {
        let mut index = std::collections::HashMap::new();
        for (position, node) in nodes.iter().enumerate() {
            index.entry(node.name.as_str()).or_insert(position);
        }
        let mut children = vec![Vec::new(); nodes.len()];
        let mut tops = Vec::new();
        for (position, node) in nodes.iter().enumerate() {
            match index.get(node.parent.as_str()) {
                Some(&parent) if !node.parent.is_empty() && parent != position => {
                    children[parent].push(position);
                }
                _ => tops.push(position),
            }
        }
        Self {
            nodes,
            children,
            tops,
        }
    }

    /// Visits the nodes depth-first with the prefix of their line and their branch: `None`
    /// for a top node, else whether it is the last of its siblings.
    fn walk(&self, mut visit: impl FnMut(&TreeNode, &str, Option<bool>)) {
        // (node, prefix, branch); pushed in reverse so that siblings come out in order.
        let mut stack: Vec<(usize, String, Option<bool>)> = self
            .tops
            .iter()
            .rev()
            .map(|&top| (top, String::new(), None))
            .collect();
        // A parent link that loops in a malformed answer must not loop here.
        let mut drawn = vec![false; self.nodes.len()];
        while let Some((position, prefix, branch)) = stack.pop() {
            if std::mem::replace(&mut drawn[position], true) {
                continue;
            }
            visit(&self.nodes[position], &prefix, branch);
            let child_prefix = match branch {
                None => String::new(),
                Some(true) => format!("{prefix}    "),
                Some(false) => format!("{prefix}│   "),
            };
            let children = &self.children[position];
            for (index, &child) in children.iter().enumerate().rev() {
                stack.push((
                    child,
                    child_prefix.clone(),
                    Some(index + 1 == children.len()),
                ));
            }
        }
    }
}

/// Draws roots, then templates, then the legend of the markers used.
pub fn render(tree: &GetTreeResponse) -> String {
    let mut out = String::new();
    let mut used = Vec::new();
    Forest::new(&tree.nodes).walk(|node, prefix, branch| {
        draw_line(node, prefix, branch, &mut out, &mut used);
    });
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

/// One node's line; `branch` is `None` for a top-level node, else whether it is the last of
/// its siblings.
fn draw_line(
    node: &TreeNode,
    prefix: &str,
    branch: Option<bool>,
    out: &mut String,
    used: &mut Vec<Marker>,
) {
    let connector = match branch {
        None => String::new(),
        Some(true) => format!("{prefix}└── "),
        Some(false) => format!("{prefix}├── "),
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
}

/// The flat list as it crossed the wire: nesting it again would make `-o json` as deep as the
/// tree.
pub fn tree_json(tree: &GetTreeResponse) -> Value {
    json!({
        "nodes": tree.nodes.iter().map(node_json).collect::<Vec<_>>(),
    })
}

fn node_json(node: &TreeNode) -> Value {
    json!({
        "name": node.name,
        "parent": node.parent,
        "role": enum_name(node.role().as_str_name(), "NAMESPACE_ROLE_"),
        "fromSubnamespace": node.from_subnamespace,
        "template": node.template,
        "conditions": conditions_json(&node.conditions),
    })
}
