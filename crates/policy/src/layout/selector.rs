//! NamespaceSelectors: which descendant namespaces inherit an object of an abstract namespace.
//!
//! A NamespaceSelector (`spec.selector`, a Kubernetes label selector) is declared in an abstract
//! namespace directory. An object in that directory or below it that carries the annotation
//! `nomos.dev/namespace-selector: <name>` (or `arbor.dev/namespace-selector`) is inherited only
//! by the descendant namespaces whose labels the selector matches.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotations naming an object's NamespaceSelector, in the order they are read.
pub const SELECTOR_ANNOTATIONS: [&str; 2] = [
    "nomos.dev/namespace-selector",
    "arbor.dev/namespace-selector",
];

/// The NamespaceSelector an object names, with the annotation that names it.
pub fn selector_reference(object: &Value) -> Option<(&'static str, &str)> {
    SELECTOR_ANNOTATIONS
        .iter()
        .find_map(|key| crate::object::annotation(object, key).map(|name| (*key, name)))
}

/// A label selector's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => !value.is_some_and(|v| self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A Kubernetes label selector. The empty selector matches every namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Reads a selector (`matchLabels`, `matchExpressions`) and checks it as the API server
    /// would: `In` and `NotIn` need values, `Exists` and `DoesNotExist` take none.
    pub fn from_value(selector: &Value) -> Result<Self, String> {
        let map = selector
            .as_object()
            .ok_or("the selector must be a mapping")?;
        let mut parsed = Self::default();
        if let Some(labels) = map.get("matchLabels").filter(|v| !v.is_null()) {
            let labels = labels.as_object().ok_or("matchLabels must be a mapping")?;
            for (key, value) in labels {
                let value = value
                    .as_str()
                    .ok_or_else(|| format!("matchLabels.{key} must be a string"))?;
                parsed.match_labels.insert(key.clone(), value.to_owned());
            }
        }
        if let Some(expressions) = map.get("matchExpressions").filter(|v| !v.is_null()) {
            let expressions = expressions
                .as_array()
                .ok_or("matchExpressions must be a list")?;
            for (i, expression) in expressions.iter().enumerate() {
                parsed.match_expressions.push(
                    requirement(expression).map_err(|e| format!("matchExpressions[{i}]: {e}"))?,
                );
            }
        }
        Ok(parsed)
    }

    /// Whether a namespace with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

fn requirement(expression: &Value) -> Result<Requirement, String> {
    let key = expression
        .get("key")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or("key is missing")?;
    let operator = match expression.get("operator").and_then(Value::as_str) {
        Some("In") => Operator::In,
        Some("NotIn") => Operator::NotIn,
        Some("Exists") => Operator::Exists,
        Some("DoesNotExist") => Operator::DoesNotExist,
        other => {
            return Err(format!(
                "operator must be In, NotIn, Exists or DoesNotExist, not {}",
                other.map_or("missing".to_owned(), |o| format!("{o:?}"))
            ));
        }
    };
    let values = match expression.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or("values must be strings")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("values must be a list".into()),
    };
    let needs_values = matches!(operator, Operator::In | Operator::NotIn);
    if needs_values == values.is_empty() {
        return Err(if needs_values {
            format!("{operator:?} needs at least one value")
        } else {
            format!("{operator:?} takes no values")
        });
    }
    Ok(Requirement {
        key: key.to_owned(),
        operator,
        values,
    })
}

/// A NamespaceSelector object's selector (`spec.selector`).
pub fn namespace_selector(object: &Value) -> Result<LabelSelector, String> {
    let selector = object
        .pointer("/spec/selector")
        .ok_or("spec.selector is missing")?;
    LabelSelector::from_value(selector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selects(selector: Value, pairs: &[(&str, &str)]) -> bool {
        LabelSelector::from_value(&selector)
            .unwrap()
            .matches(&labels(pairs))
    }

    #[test]
    fn match_labels_require_every_pair() {
        let s = json!({"matchLabels": {"env": "prod", "tier": "web"}});
        assert!(selects(
            s.clone(),
            &[("env", "prod"), ("tier", "web"), ("x", "y")]
        ));
        assert!(!selects(s, &[("env", "prod")]));
    }

    #[test]
    fn match_expressions_in_notin_exists_doesnotexist() {
        let in_ = json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "staging"]}]});
        assert!(selects(in_.clone(), &[("env", "staging")]));
        assert!(!selects(in_.clone(), &[("env", "dev")]));
        assert!(!selects(in_, &[]));
        let not_in =
            json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]});
        assert!(selects(not_in.clone(), &[("env", "prod")]));
        assert!(selects(not_in.clone(), &[]));
        assert!(!selects(not_in, &[("env", "dev")]));
        let exists = json!({"matchExpressions": [{"key": "sre", "operator": "Exists"}]});
        assert!(selects(exists.clone(), &[("sre", "")]));
        assert!(!selects(exists, &[]));
        let absent = json!({"matchExpressions": [{"key": "sre", "operator": "DoesNotExist"}]});
        assert!(selects(absent.clone(), &[]));
        assert!(!selects(absent, &[("sre", "yes")]));
    }

    #[test]
    fn empty_selector_matches_every_namespace() {
        assert!(selects(json!({}), &[]));
        assert!(selects(json!({"matchLabels": null}), &[("a", "b")]));
    }

    #[test]
    fn invalid_selectors_are_refused() {
        for bad in [
            json!([]),
            json!({"matchLabels": {"a": 1}}),
            json!({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]}),
            json!({"matchExpressions": [{"operator": "Exists"}]}),
        ] {
            assert!(LabelSelector::from_value(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selector_reference_reads_nomos_then_arbor_annotation() {
        let nomos = json!({"metadata": {"annotations": {"nomos.dev/namespace-selector": "sre"}}});
        assert_eq!(
            selector_reference(&nomos),
            Some(("nomos.dev/namespace-selector", "sre"))
        );
        let arbor = json!({"metadata": {"annotations": {"arbor.dev/namespace-selector": "prod"}}});
        assert_eq!(selector_reference(&arbor).map(|r| r.1), Some("prod"));
        assert_eq!(selector_reference(&json!({"metadata": {}})), None);
    }
}
