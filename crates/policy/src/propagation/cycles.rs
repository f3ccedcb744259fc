//! Cycles in the namespace graph, and the namespaces whose propagation must halt.
//!
//! The graph has one edge per namespace with an upstream: from the namespace to its parent
//! (sub-namespaces) or to its template (instances), the links that propagation follows. A
//! template label on a sub-namespace is not an edge, because propagation ignores it. The
//! admission rules keep cycles out, but namespaces labelled while the webhook was down, or
//! by someone bypassing it, can still form one; propagating around a cycle would never settle,
//! so the controller halts propagation into every namespace on a cycle and below it.

use std::collections::{BTreeMap, BTreeSet};

use super::tree::NamespaceTree;

/// The cycles of a tree and the namespaces they affect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CycleReport {
    /// Each cycle's members in link order (each member's upstream is the next one; the last
    /// one's is the first), starting from the alphabetically first member.
    pub cycles: Vec<Vec<String>>,
    /// Every namespace on a cycle or whose upstream links lead into one.
    pub halted: BTreeSet<String>,
}

impl CycleReport {
    pub fn is_halted(&self, namespace: &str) -> bool {
        self.halted.contains(namespace)
    }

    /// The cycle that halts `namespace`, if any.
    pub fn cycle_halting<'a>(
        &'a self,
        namespace: &str,
        tree: &NamespaceTree,
    ) -> Option<&'a [String]> {
        if !self.is_halted(namespace) {
            return None;
        }
        // Walking up from a halted namespace reaches its cycle within one step per namespace.
        let mut current = namespace.to_owned();
        for _ in 0..=tree.namespaces().count() {
            if let Some(cycle) = self.cycles.iter().find(|c| c.contains(&current)) {
                return Some(cycle);
            }
            current = tree.role(&current)?.upstream()?.name().to_owned();
        }
        None
    }
}

#[derive(Clone, Copy)]
enum Visit {
    OnPath(usize),
    Done { halted: bool },
}

/// Finds every cycle of `tree`.
pub fn find_cycles(tree: &NamespaceTree) -> CycleReport {
    let mut visits: BTreeMap<&str, Visit> = BTreeMap::new();
    let mut report = CycleReport::default();
    for start in tree.namespaces() {
        let mut path: Vec<&str> = Vec::new();
        let mut current = Some(start.name.as_str());
        let halted = loop {
            let Some(name) = current else { break false };
            match visits.get(name) {
                Some(Visit::Done { halted }) => break *halted,
                Some(Visit::OnPath(at)) => {
                    report.cycles.push(in_canonical_order(&path[*at..]));
                    break true;
                }
                None => {
                    visits.insert(name, Visit::OnPath(path.len()));
                    path.push(name);
                    current = tree
                        .get(name)
                        .and_then(|ns| ns.role(tree.keys()).upstream().cloned())
                        .and_then(|up| tree.get(up.name()).map(|ns| ns.name.as_str()));
                }
            }
        };
        for name in path {
            visits.insert(name, Visit::Done { halted });
            if halted {
                report.halted.insert(name.to_owned());
            }
        }
    }
    report.cycles.sort();
    report
}

fn in_canonical_order(members: &[&str]) -> Vec<String> {
    let first = (0..members.len())
        .min_by_key(|&i| members[i])
        .expect("a cycle has members");
    members[first..]
        .iter()
        .chain(&members[..first])
        .map(|s| s.to_string())
        .collect()
}
