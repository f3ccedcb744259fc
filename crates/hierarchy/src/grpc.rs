//! `HierarchyService` (arbor.v1): the tree, one namespace, and why an object was or was not
//! copied where — answered from the controller's index with the same policy functions the
//! reconciler uses, so the explanation cannot disagree with what the controller does.

use std::collections::{BTreeMap, BTreeSet};

use arbor_policy::object::{self, GroupKind, GroupVersionKind};
use arbor_policy::propagation::{
    CopyAction, CycleReport, LeaveReason, NAME_OCCUPIED_RULE, NamespaceTree, PlannedCopy,
    PropagateMode, PropagationRules, RoleKind, Upstream, controller_of, decide_copy,
    desired_metadata, generated_propagation, plan_fan_out,
};
use arbor_proto::v1 as pb;
use arbor_proto::v1::hierarchy_service_server::{HierarchyService, HierarchyServiceServer};
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::index::Index;

/// The service over the index.
#[derive(Debug, Clone)]
pub struct HierarchyGrpc {
    index: Index,
    rules: PropagationRules,
}

impl HierarchyGrpc {
    pub fn new(index: Index, rules: PropagationRules) -> Self {
        Self { index, rules }
    }

    /// The tonic service, for `runtime::grpc::server(..).add_service(..)`.
    pub fn into_server(self) -> HierarchyServiceServer<Self> {
        HierarchyServiceServer::new(self)
    }

    /// GetTree: roots with their sub-namespaces, templates with their instances, as one flat
    /// list in which each node names the node it hangs under (see the proto), built without
    /// recursion so that a chain of any depth answers.
    pub fn tree(&self, root: &str) -> Result<pb::GetTreeResponse, Status> {
        let (tree, cycles) = self.index.tree();
        let keys = tree.keys().clone();
        let tops: Vec<String> = if root.is_empty() {
            let of_kind = |kind: RoleKind| {
                tree.namespaces()
                    .filter(|ns| ns.role(&keys).kind() == kind)
                    .map(|ns| ns.name.clone())
                    .collect::<Vec<_>>()
            };
            let mut tops = of_kind(RoleKind::Root);
            tops.extend(of_kind(RoleKind::Template));
            tops
        } else if tree.contains(root) {
            vec![root.to_owned()]
        } else {
            return Err(Status::not_found(format!(
                "namespace {root} does not exist"
            )));
        };
        // Depth-first with an explicit stack; children are pushed in reverse so that they come
        // out in order. A namespace is listed once: a cycle's members are shown where they are
        // first reached and not descended into again.
        let mut seen = BTreeSet::new();
        let mut nodes = Vec::new();
        let mut stack: Vec<(String, String)> = tops
            .into_iter()
            .rev()
            .map(|name| (name, String::new()))
            .collect();
        while let Some((name, parent)) = stack.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            stack.extend(
                tree.children(&name)
                    .into_iter()
                    .rev()
                    .filter(|child| !seen.contains(*child))
                    .map(|child| (child.to_owned(), name.clone())),
            );
            nodes.push(self.node(&tree, &cycles, &name, parent));
        }
        Ok(pb::GetTreeResponse { nodes })
    }

    fn node(
        &self,
        tree: &NamespaceTree,
        cycles: &CycleReport,
        name: &str,
        parent: String,
    ) -> pb::TreeNode {
        let keys = tree.keys();
        let state = tree.get(name);
        let upstream_parent = state.and_then(|ns| ns.parent(keys));
        pb::TreeNode {
            name: name.to_owned(),
            role: role(tree, name) as i32,
            from_subnamespace: upstream_parent
                .is_some_and(|p| self.index.has_sub_namespace(p, name)),
            template: state
                .and_then(|ns| ns.template(keys))
                .unwrap_or_default()
                .to_owned(),
            conditions: cycle_conditions(tree, cycles, name),
            parent,
        }
    }

    /// GetNamespace.
    pub fn namespace(&self, name: &str) -> Result<pb::GetNamespaceResponse, Status> {
        let view = self
            .index
            .view(name)
            .ok_or_else(|| Status::not_found(format!("namespace {name} does not exist")))?;
        let keys = self.rules.keys();
        let tree = &view.tree;
        let received = desired_metadata(&self.rules, tree, name, view.sub_namespace.as_ref())
            .ok()
            .flatten()
            .unwrap_or_default();
        let origin_of =
            |key: &str, value: &str, labels: bool| origin(tree, name, key, value, labels);
        let upstream = view
            .namespace
            .role(keys)
            .upstream()
            .map(|u| u.name().to_owned());
        let objects = view
            .objects
            .iter()
            .filter_map(|live| {
                let from = object::annotation(live, &keys.from_annotation)?.to_owned();
                let key = object::ObjectKey::of(live).ok()?;
                let source = self.index.object(&from, &key.group_kind, &key.name);
                let action = decide_copy(
                    &self.rules,
                    upstream.as_deref(),
                    name,
                    source.as_ref(),
                    Some(live),
                )
                .ok()?;
                Some(pb::PropagatedObject {
                    object: Some(object_ref(live)),
                    mode: mode(PropagateMode::of(keys, live)) as i32,
                    from,
                    in_sync: !matches!(action, CopyAction::Update(_)),
                })
            })
            .collect();
        Ok(pb::GetNamespaceResponse {
            namespace: Some(pb::NamespaceInfo {
                name: name.to_owned(),
                role: role(tree, name) as i32,
                parent: view.namespace.parent(keys).unwrap_or_default().to_owned(),
                template: view.namespace.template(keys).unwrap_or_default().to_owned(),
                children: owned(tree.sub_namespaces(name)),
                instances: owned(tree.instances(name)),
                propagated_labels: received
                    .labels
                    .iter()
                    .filter(|(k, _)| **k != keys.parent_label)
                    .map(|(k, v)| (k.clone(), origin_of(k, v, true)))
                    .collect(),
                propagated_annotations: received
                    .annotations
                    .iter()
                    .map(|(k, v)| (k.clone(), origin_of(k, v, false)))
                    .collect(),
                objects,
                conditions: cycle_conditions(tree, &view.cycles, name),
            }),
        })
    }

    /// ExplainPropagation: for every namespace below the object's (or one), what happens to
    /// its copy there and by which rule.
    pub fn explain(
        &self,
        request: &pb::ExplainPropagationRequest,
    ) -> Result<pb::ExplainPropagationResponse, Status> {
        let reference = request
            .object
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("object is required"))?;
        let group_kind = GroupKind::new(&reference.group, &reference.kind);
        let (tree, cycles) = self.index.tree();
        if !tree.contains(&reference.namespace) {
            return Err(Status::not_found(format!(
                "namespace {} does not exist",
                reference.namespace
            )));
        }
        let source = self
            .index
            .object(&reference.namespace, &group_kind, &reference.name);
        let keys = self.rules.keys();
        let generated = source.as_ref().and_then(|source| {
            let owner = self.index.controller_of(source);
            generated_propagation(keys, source, owner.as_ref())?;
            let owner = controller_of(source)?;
            let gvk = GroupVersionKind::from_api_version(&owner.api_version, &owner.kind);
            Some(pb::ObjectRef {
                group: gvk.group.into(),
                version: gvk.version.into(),
                kind: gvk.kind.into(),
                namespace: reference.namespace.clone(),
                name: owner.name,
            })
        });
        let source_mode = source.as_ref().and_then(|s| PropagateMode::of(keys, s));
        let mut targets = Vec::new();
        self.explain_below(
            &tree,
            &cycles,
            &reference.namespace,
            &group_kind,
            &reference.name,
            source,
            &mut BTreeSet::new(),
            &mut targets,
        )?;
        if !request.target_namespace.is_empty() {
            targets.retain(|t| t.namespace == request.target_namespace);
        }
        Ok(pb::ExplainPropagationResponse {
            object: Some(reference.clone()),
            mode: mode(source_mode) as i32,
            generated_from: generated,
            targets,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn explain_below(
        &self,
        tree: &NamespaceTree,
        cycles: &CycleReport,
        namespace: &str,
        group_kind: &GroupKind,
        name: &str,
        source: Option<Value>,
        seen: &mut BTreeSet<String>,
        targets: &mut Vec<pb::PropagationTarget>,
    ) -> Result<(), Status> {
        if !seen.insert(namespace.to_owned()) {
            return Ok(());
        }
        let live: BTreeMap<String, Value> = tree
            .children(namespace)
            .into_iter()
            .filter_map(|child| {
                Some((
                    child.to_owned(),
                    self.index.object(child, group_kind, name)?,
                ))
            })
            .collect();
        let planned = plan_fan_out(
            &self.rules,
            tree,
            namespace,
            group_kind,
            name,
            source.as_ref(),
            |child| live.get(child),
        )
        .map_err(|e| Status::failed_precondition(e.to_string()))?;
        for copy in planned {
            let relation = tree
                .role(&copy.namespace)
                .and_then(|r| r.upstream().cloned());
            let decision = match cycles.cycle_halting(&copy.namespace, tree) {
                Some(cycle) => pb::Decision {
                    allowed: false,
                    action: pb::Action::None as i32,
                    rule: "arbor: propagation halts on and below a cycle".into(),
                    reason: format!(
                        "namespace {} is on or below the cycle {}",
                        copy.namespace,
                        cycle.join(" -> ")
                    ),
                },
                None => decision(&copy, relation.as_ref()),
            };
            targets.push(pb::PropagationTarget {
                namespace: copy.namespace.clone(),
                decision: Some(decision),
            });
            // Below the child, the child's copy is the source.
            let next = live.get(&copy.namespace).cloned();
            self.explain_below(
                tree,
                cycles,
                &copy.namespace,
                group_kind,
                name,
                next,
                seen,
                targets,
            )?;
        }
        Ok(())
    }
}

fn owned(names: Vec<&str>) -> Vec<String> {
    names.into_iter().map(str::to_owned).collect()
}

fn role(tree: &NamespaceTree, name: &str) -> pb::NamespaceRole {
    match tree.role(name) {
        None => pb::NamespaceRole::Unspecified,
        Some(role) => match role.kind() {
            RoleKind::Root => pb::NamespaceRole::Root,
            RoleKind::Sub => pb::NamespaceRole::Sub,
            RoleKind::Template => pb::NamespaceRole::Template,
            RoleKind::Plain if role.is_instance() => pb::NamespaceRole::Instance,
            RoleKind::Plain => pb::NamespaceRole::None,
        },
    }
}

fn mode(mode: Option<PropagateMode>) -> pb::PropagateMode {
    match mode {
        None => pb::PropagateMode::None,
        Some(PropagateMode::Create) => pb::PropagateMode::Create,
        Some(PropagateMode::Update) => pb::PropagateMode::Update,
    }
}

fn cycle_conditions(tree: &NamespaceTree, cycles: &CycleReport, name: &str) -> Vec<pb::Condition> {
    cycles
        .cycle_halting(name, tree)
        .map(|cycle| pb::Condition {
            r#type: arbor_api::condition::types::STALLED.into(),
            status: "True".into(),
            reason: arbor_api::condition::reasons::CYCLE_DETECTED.into(),
            message: format!(
                "propagation halted by the namespace cycle {}",
                cycle.join(" -> ")
            ),
            last_transition_time: None,
            observed_generation: 0,
        })
        .into_iter()
        .collect()
}

/// The namespace a received key comes from: the highest namespace up the chain that holds the
/// same value without interruption.
fn origin(tree: &NamespaceTree, name: &str, key: &str, value: &str, labels: bool) -> String {
    let keys = tree.keys();
    let mut origin = String::new();
    let mut seen = BTreeSet::new();
    let mut current = tree
        .role(name)
        .and_then(|r| r.upstream().map(|u| u.name().to_owned()));
    while let Some(upstream) = current {
        if !seen.insert(upstream.clone()) {
            break;
        }
        let Some(ns) = tree.get(&upstream) else { break };
        let held = if labels { &ns.labels } else { &ns.annotations };
        if held.get(key).map(String::as_str) != Some(value) {
            break;
        }
        origin = upstream;
        current = ns.role(keys).upstream().map(|u| u.name().to_owned());
    }
    origin
}

fn object_ref(object: &Value) -> pb::ObjectRef {
    let gvk = object::gvk(object).ok();
    pb::ObjectRef {
        group: gvk
            .as_ref()
            .map(|g| g.group.to_string())
            .unwrap_or_default(),
        version: gvk
            .as_ref()
            .map(|g| g.version.to_string())
            .unwrap_or_default(),
        kind: gvk.map(|g| g.kind.to_string()).unwrap_or_default(),
        namespace: object::namespace(object).unwrap_or_default().to_owned(),
        name: object::name(object).unwrap_or_default().to_owned(),
    }
}

/// The decision for one copy, with the seed rule that makes it.
fn decision(copy: &PlannedCopy, relation: Option<&Upstream>) -> pb::Decision {
    let (heading, create_rule, update_rule, delete_rule) = match relation {
        Some(Upstream::Template(_)) => ("template instance", 2, 3, 4),
        _ => ("sub-namespace", 3, 4, 5),
    };
    let rule = |n: u8| format!("seeds/001 {heading} {n}");
    let (allowed, action, rule, reason) = match &copy.action {
        CopyAction::Create(_) => (
            true,
            pb::Action::Create,
            rule(create_rule),
            "the copy is missing".to_owned(),
        ),
        CopyAction::Update(_) => (
            true,
            pb::Action::Update,
            rule(update_rule),
            "the copy differs from its source".to_owned(),
        ),
        CopyAction::Delete => (
            false,
            pb::Action::Delete,
            rule(delete_rule),
            "an update copy whose source is gone or whose from does not name the upstream"
                .to_owned(),
        ),
        CopyAction::Leave(reason) => {
            let (allowed, text) = leave(*reason);
            let rule = if reason.is_conflict() {
                NAME_OCCUPIED_RULE.to_owned()
            } else {
                rule(if allowed { update_rule } else { create_rule })
            };
            (allowed, pb::Action::None, rule, text.to_owned())
        }
    };
    pb::Decision {
        allowed,
        action: action as i32,
        rule,
        reason,
    }
}

fn leave(reason: LeaveReason) -> (bool, &'static str) {
    match reason {
        LeaveReason::NothingToCopy => (
            false,
            "the object does not propagate (no propagate annotation)",
        ),
        LeaveReason::UpToDate => (true, "the copy is up to date"),
        LeaveReason::CreateOnly => (true, "a create copy exists and is never updated"),
        LeaveReason::SourceNotPropagated => {
            (false, "the source no longer propagates; its copy stays")
        }
        LeaveReason::Original => (false, "the object there is the namespace's own"),
        LeaveReason::OccupiedByOriginal => (
            false,
            "an object of the same name, not a copy, is in the way",
        ),
        LeaveReason::OccupiedByForeignCopy => {
            (false, "a copy from another namespace is in the way")
        }
        LeaveReason::KeptNotUpdateMode => {
            (false, "a copy that is not in update mode is kept as it is")
        }
    }
}

#[tonic::async_trait]
impl HierarchyService for HierarchyGrpc {
    async fn get_tree(
        &self,
        request: Request<pb::GetTreeRequest>,
    ) -> Result<Response<pb::GetTreeResponse>, Status> {
        self.tree(&request.into_inner().root).map(Response::new)
    }

    async fn get_namespace(
        &self,
        request: Request<pb::GetNamespaceRequest>,
    ) -> Result<Response<pb::GetNamespaceResponse>, Status> {
        self.namespace(&request.into_inner().name)
            .map(Response::new)
    }

    async fn explain_propagation(
        &self,
        request: Request<pb::ExplainPropagationRequest>,
    ) -> Result<Response<pb::ExplainPropagationResponse>, Status> {
        self.explain(&request.into_inner()).map(Response::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_policy::keys::Keys;
    use arbor_policy::propagation::{NamespaceState, SubNamespace};
    use serde_json::json;

    fn keys() -> Keys {
        Keys::default()
    }

    fn service() -> HierarchyGrpc {
        let k = keys();
        let index = Index::new(&k);
        index.apply_namespace(
            NamespaceState::new("root")
                .with_label(&k.type_label, "root")
                .with_label("team", "a"),
        );
        index.apply_namespace(
            NamespaceState::new("a")
                .with_label(&k.parent_label, "root")
                .with_label("team", "a"),
        );
        index.apply_namespace(NamespaceState::new("b").with_label(&k.parent_label, "a"));
        index.apply_namespace(NamespaceState::new("tmpl").with_label(&k.type_label, "template"));
        index.apply_namespace(NamespaceState::new("inst").with_label(&k.template_label, "tmpl"));
        index.apply_sub_namespace(SubNamespace::new("root", "a"));
        let rules = arbor_policy::propagation::PropagationConfig {
            label_keys: vec!["team".into()],
            ..Default::default()
        }
        .compile(&k)
        .unwrap();
        HierarchyGrpc::new(index, rules)
    }

    fn secret(namespace: &str, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "s", "namespace": namespace, "annotations": annotations},
               "data": {"k": "dg=="}})
    }

    fn explain(service: &HierarchyGrpc, target: &str) -> pb::ExplainPropagationResponse {
        service
            .explain(&pb::ExplainPropagationRequest {
                object: Some(pb::ObjectRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    namespace: "root".into(),
                    name: "s".into(),
                }),
                target_namespace: target.into(),
            })
            .unwrap()
    }

    #[test]
    fn tree_lists_roots_with_sub_namespaces_and_templates_with_instances() {
        let tree = service().tree("").unwrap();
        let listed: Vec<(&str, &str)> = tree
            .nodes
            .iter()
            .map(|node| (node.name.as_str(), node.parent.as_str()))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("root", ""),
                ("a", "root"),
                ("b", "a"),
                ("tmpl", ""),
                ("inst", "tmpl")
            ]
        );
        assert_eq!(tree.nodes[0].role, pb::NamespaceRole::Root as i32);
        assert!(tree.nodes[1].from_subnamespace);
        assert!(!tree.nodes[2].from_subnamespace);
        assert_eq!(tree.nodes[4].role, pb::NamespaceRole::Instance as i32);
    }

    #[test]
    fn tree_from_a_namespace_has_it_as_the_only_top_node() {
        let tree = service().tree("a").unwrap();
        let listed: Vec<(&str, &str)> = tree
            .nodes
            .iter()
            .map(|node| (node.name.as_str(), node.parent.as_str()))
            .collect();
        assert_eq!(listed, vec![("a", ""), ("b", "a")]);
    }

    #[test]
    fn namespace_names_where_received_labels_come_from() {
        let info = service().namespace("b").unwrap().namespace.unwrap();
        assert_eq!(info.parent, "a");
        assert_eq!(
            info.propagated_labels.get("team").map(String::as_str),
            Some("root")
        );
    }

    #[test]
    fn explain_reports_a_missing_update_copy_as_create_under_the_sub_namespace_rule() {
        let service = service();
        service
            .index
            .apply_object(secret("root", json!({"arbor.dev/propagate": "update"})));
        let answer = explain(&service, "");
        assert_eq!(answer.mode, pb::PropagateMode::Update as i32);
        let a = answer.targets.iter().find(|t| t.namespace == "a").unwrap();
        let decision = a.decision.as_ref().unwrap();
        assert_eq!(decision.action, pb::Action::Create as i32);
        assert_eq!(decision.rule, "seeds/001 sub-namespace 3");
    }

    #[test]
    fn explain_follows_copies_down_the_tree_and_filters_by_target() {
        let service = service();
        service
            .index
            .apply_object(secret("root", json!({"arbor.dev/propagate": "update"})));
        let copy = secret(
            "a",
            json!({"arbor.dev/propagate": "update", "arbor.dev/from": "root"}),
        );
        service.index.apply_object(copy);
        let answer = explain(&service, "b");
        assert_eq!(answer.targets.len(), 1);
        assert_eq!(
            answer.targets[0].decision.as_ref().unwrap().action,
            pb::Action::Create as i32,
            "b has no copy yet: it is created from a's"
        );
        let a = &explain(&service, "a").targets[0];
        assert_eq!(a.decision.as_ref().unwrap().action, pb::Action::None as i32);
        assert!(
            a.decision.as_ref().unwrap().allowed,
            "a's copy is up to date"
        );
    }

    #[test]
    fn explain_says_propagation_halts_below_a_cycle() {
        let service = service();
        let k = keys();
        service
            .index
            .apply_namespace(NamespaceState::new("x").with_label(&k.parent_label, "y"));
        service
            .index
            .apply_namespace(NamespaceState::new("y").with_label(&k.parent_label, "x"));
        let answer = service
            .explain(&pb::ExplainPropagationRequest {
                object: Some(pb::ObjectRef {
                    kind: "Secret".into(),
                    version: "v1".into(),
                    namespace: "x".into(),
                    name: "s".into(),
                    ..Default::default()
                }),
                target_namespace: String::new(),
            })
            .unwrap();
        let decision = answer.targets[0].decision.as_ref().unwrap();
        assert!(!decision.allowed);
        assert!(decision.reason.contains("x -> y"), "{}", decision.reason);
    }
}
