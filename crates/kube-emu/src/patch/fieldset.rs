//! Field sets: which fields of an object a manager owns, and their `FieldsV1` encoding.
//!
//! A set is a tree of path elements. A node is a *member* when the path ending there is itself in
//! the set (a leaf value, an atomic list, an empty map, or a list element as a whole); a node can
//! also have children. In FieldsV1 a member without children is `{}`, a member with children
//! carries a `"."` entry, and a node that is only a parent of members has just its children. The
//! tree keeps no empty nodes, so an empty tree is an empty set.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::path::PathElement;

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    nodes: BTreeMap<PathElement, Node>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Node {
    member: bool,
    children: FieldSet,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }
}

impl FieldSet {
    /// An empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// True when the set has no member.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds `path` as a member. The empty path (the object itself) is never a member.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let node = self.nodes.entry(first.clone()).or_default();
        if rest.is_empty() {
            node.member = true;
        } else {
            node.children.insert(rest);
        }
    }

    /// True when `path` is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => false,
            Some((first, rest)) => self.nodes.get(first).is_some_and(|node| {
                if rest.is_empty() {
                    node.member
                } else {
                    node.children.contains(rest)
                }
            }),
        }
    }

    /// True when `path` or one of its ancestors is a member: the value at `path` is owned, on its
    /// own or as part of an atomic whole.
    pub fn covers(&self, path: &[PathElement]) -> bool {
        (1..=path.len()).any(|depth| self.contains(&path[..depth]))
    }

    /// True when `path` or anything below it is a member.
    pub fn has_member_at_or_below(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((first, rest)) => self
                .nodes
                .get(first)
                .is_some_and(|node| rest.is_empty() || node.children.has_member_at_or_below(rest)),
        }
    }

    /// Members of either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        for (element, node) in &other.nodes {
            let mine = out.nodes.entry(element.clone()).or_default();
            mine.member |= node.member;
            mine.children = mine.children.union(&node.children);
        }
        out
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |mine, theirs| mine && !theirs, FieldSet::difference)
    }

    /// Members of both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, node) in &self.nodes {
            if let Some(theirs) = other.nodes.get(element) {
                let combined = Node {
                    member: node.member && theirs.member,
                    children: node.children.intersection(&theirs.children),
                };
                if !combined.is_empty() {
                    out.nodes.insert(element.clone(), combined);
                }
            }
        }
        out
    }

    fn combine(
        &self,
        other: &FieldSet,
        member: fn(bool, bool) -> bool,
        children: fn(&FieldSet, &FieldSet) -> FieldSet,
    ) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, node) in &self.nodes {
            let combined = match other.nodes.get(element) {
                Some(theirs) => Node {
                    member: member(node.member, theirs.member),
                    children: children(&node.children, &theirs.children),
                },
                None => node.clone(),
            };
            if !combined.is_empty() {
                out.nodes.insert(element.clone(), combined);
            }
        }
        out
    }

    /// All members, in the order kube-apiserver iterates them: at each level the members first,
    /// then the subtrees, each in path-element order.
    pub fn members(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.collect_members(&mut Vec::new(), &mut out);
        out
    }

    fn collect_members(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for (element, node) in &self.nodes {
            if node.member {
                let mut path = prefix.clone();
                path.push(element.clone());
                out.push(path);
            }
        }
        for (element, node) in &self.nodes {
            if !node.children.is_empty() {
                prefix.push(element.clone());
                node.children.collect_members(prefix, out);
                prefix.pop();
            }
        }
    }

    /// The `fieldsV1` JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        let mut object = Map::new();
        for (element, node) in &self.nodes {
            let mut inner = Map::new();
            if node.member && !node.children.is_empty() {
                inner.insert(".".to_owned(), Value::Object(Map::new()));
            }
            if let Value::Object(children) = node.children.to_fields_v1() {
                inner.extend(children);
            }
            object.insert(element.to_fields_v1_key(), Value::Object(inner));
        }
        Value::Object(object)
    }

    /// Reads a `fieldsV1` JSON object.
    pub fn from_fields_v1(encoded: &Value) -> Result<FieldSet, String> {
        let object = encoded
            .as_object()
            .ok_or_else(|| format!("fieldsV1 must be a JSON object, found {encoded}"))?;
        let mut out = FieldSet::new();
        for (name, inner) in object {
            if name == "." {
                continue;
            }
            let element = PathElement::from_fields_v1_key(name)?;
            let inner_object = inner
                .as_object()
                .ok_or_else(|| format!("fieldsV1 member {name:?} must be a JSON object"))?;
            let node = Node {
                member: inner_object.is_empty() || inner_object.contains_key("."),
                children: FieldSet::from_fields_v1(inner)?,
            };
            out.nodes.insert(element, node);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    fn container(name: &str) -> PathElement {
        PathElement::key(vec![("name".to_owned(), json!(name))])
    }

    #[test]
    fn list_element_member_with_children_gets_a_dot_entry() {
        let mut set = FieldSet::new();
        let element = [field("spec"), field("containers"), container("nginx")];
        set.insert(&element);
        set.insert(&[element.as_slice(), &[field("image")]].concat());
        set.insert(&[field("metadata"), field("labels"), field("app")]);
        assert_eq!(
            set.to_fields_v1(),
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}}}}
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&set.to_fields_v1()).unwrap(), set);
    }

    #[test]
    fn difference_and_intersection_work_member_wise() {
        let mut a = FieldSet::new();
        a.insert(&[field("spec"), field("a")]);
        a.insert(&[field("spec"), field("b")]);
        let mut b = FieldSet::new();
        b.insert(&[field("spec"), field("b")]);
        let only_a = a.difference(&b);
        assert!(only_a.contains(&[field("spec"), field("a")]));
        assert!(!only_a.contains(&[field("spec"), field("b")]));
        let both = a.intersection(&b);
        assert_eq!(both.members(), vec![vec![field("spec"), field("b")]]);
        assert!(a.difference(&a).is_empty());
    }

    #[test]
    fn members_come_before_subtrees_at_each_level() {
        let mut set = FieldSet::new();
        set.insert(&[field("a"), field("z")]);
        set.insert(&[field("b")]);
        assert_eq!(
            set.members(),
            vec![vec![field("b")], vec![field("a"), field("z")]]
        );
    }

    #[test]
    fn malformed_fields_v1_is_an_error() {
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
    }
}
