//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query parameters
//! with kube-apiserver's syntax.

use serde_json::{Map, Value};

use crate::meta;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl LabelRequirement {
    fn matches(&self, labels: &Map<String, Value>) -> bool {
        let value = |key: &str| labels.get(key).and_then(Value::as_str);
        match self {
            LabelRequirement::Equals(key, expected) => value(key) == Some(expected.as_str()),
            LabelRequirement::NotEquals(key, unwanted) => value(key) != Some(unwanted.as_str()),
            LabelRequirement::In(key, values) => {
                value(key).is_some_and(|v| values.iter().any(|candidate| candidate == v))
            }
            LabelRequirement::NotIn(key, values) => {
                value(key).is_none_or(|v| values.iter().all(|candidate| candidate != v))
            }
            LabelRequirement::Exists(key) => labels.contains_key(key),
            LabelRequirement::NotExists(key) => !labels.contains_key(key),
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

/// Splits on commas outside parentheses: `a in (x,y),b` is two terms.
fn top_level_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&selector[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|term| !term.is_empty())
        .collect()
}

fn checked_key(key: &str, term: &str) -> Result<String, String> {
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) || key.contains(['=', '!', '(', ')']) {
        return Err(format!(
            "unable to parse requirement: invalid label key in {term:?}"
        ));
    }
    Ok(key.to_owned())
}

fn parse_label_term(term: &str) -> Result<LabelRequirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelRequirement::NotExists(checked_key(key, term)?));
    }
    if let Some(open) = term.find('(') {
        let close = term
            .rfind(')')
            .filter(|close| *close > open)
            .ok_or_else(|| format!("unable to parse requirement: missing ')' in {term:?}"))?;
        let mut head = term[..open].split_whitespace();
        let (Some(key), Some(operator), None) = (head.next(), head.next(), head.next()) else {
            return Err(format!("unable to parse requirement: {term:?}"));
        };
        let values: Vec<String> = term[open + 1..close]
            .split(',')
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .collect();
        let key = checked_key(key, term)?;
        return match operator {
            "in" => Ok(LabelRequirement::In(key, values)),
            "notin" => Ok(LabelRequirement::NotIn(key, values)),
            other => Err(format!(
                "unable to parse requirement: unknown operator {other:?}"
            )),
        };
    }
    for (operator, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = term.split_once(operator) {
            let key = checked_key(key, term)?;
            let value = value.trim().to_owned();
            return Ok(if negated {
                LabelRequirement::NotEquals(key, value)
            } else {
                LabelRequirement::Equals(key, value)
            });
        }
    }
    Ok(LabelRequirement::Exists(checked_key(term, term)?))
}

impl LabelSelector {
    /// Selects every object (no requirement).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn parse(selector: &str) -> Result<LabelSelector, String> {
        let requirements = top_level_terms(selector)
            .into_iter()
            .map(parse_label_term)
            .collect::<Result<_, _>>()?;
        Ok(LabelSelector { requirements })
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as webhook
    /// configurations carry them. Null or `{}` selects everything.
    pub fn from_object(selector: &Value) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value
                    .as_str()
                    .ok_or_else(|| format!("matchLabels.{key} must be a string"))?;
                requirements.push(LabelRequirement::Equals(key.clone(), value.to_owned()));
            }
        }
        let expressions = selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for expression in expressions {
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .filter(|key| !key.is_empty())
                .ok_or("matchExpressions[].key is required")?
                .to_owned();
            let values = meta::string_list(expression.get("values"));
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            requirements.push(match operator {
                "In" => LabelRequirement::In(key, values),
                "NotIn" => LabelRequirement::NotIn(key, values),
                "Exists" => LabelRequirement::Exists(key),
                "DoesNotExist" => LabelRequirement::NotExists(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            });
        }
        Ok(LabelSelector { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels = meta::labels(object);
        self.requirements
            .iter()
            .all(|requirement| requirement.matches(&labels))
    }
}

/// Selectable fields kube-apiserver prints from a Go `bool`: absent reads as `false`
/// (`spec.unschedulable==false` selects a Node that never set it).
const BOOLEAN_FIELDS: &[&str] = &["spec.unschedulable"];

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    path: String,
    value: String,
    negated: bool,
}

/// A parsed field selector over the fields a kind supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Selects every object (no requirement).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Parses `selector`, refusing fields outside `metadata.name`, `metadata.namespace` and
    /// `extra_fields` like kube-apiserver does.
    pub fn parse(selector: &str, extra_fields: &[&str]) -> Result<FieldSelector, String> {
        let mut requirements = Vec::new();
        for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, value, negated) = if let Some((path, value)) = term.split_once("!=") {
                (path, value, true)
            } else if let Some((path, value)) = term.split_once("==") {
                (path, value, false)
            } else if let Some((path, value)) = term.split_once('=') {
                (path, value, false)
            } else {
                return Err(format!(
                    "invalid selector: '{selector}'; can't understand '{term}'"
                ));
            };
            let path = path.trim();
            if !matches!(path, "metadata.name" | "metadata.namespace")
                && !extra_fields.contains(&path)
            {
                return Err(format!("field label not supported: {path}"));
            }
            requirements.push(FieldRequirement {
                path: path.to_owned(),
                value: value.trim().to_owned(),
                negated,
            });
        }
        Ok(FieldSelector { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = match meta::lookup_path(object, &requirement.path) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None if BOOLEAN_FIELDS.contains(&requirement.path.as_str()) => {
                    "false".to_owned()
                }
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == requirement.value) != requirement.negated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "namespace": "ns", "labels": labels}})
    }

    fn selects(selector: &str, labels: Value) -> bool {
        LabelSelector::parse(selector)
            .expect("valid selector")
            .matches(&labelled(labels))
    }

    #[test]
    fn equality_operators() {
        assert!(selects("app=web", json!({"app": "web"})));
        assert!(selects("app==web", json!({"app": "web"})));
        assert!(!selects("app=web", json!({"app": "db"})));
        assert!(selects("app!=web", json!({"app": "db"})));
        assert!(selects("app!=web", json!({})));
        assert!(!selects("app!=web", json!({"app": "web"})));
    }

    #[test]
    fn set_operators() {
        assert!(selects("tier in (a, b)", json!({"tier": "b"})));
        assert!(!selects("tier in (a,b)", json!({})));
        assert!(selects("tier notin (a,b)", json!({"tier": "c"})));
        assert!(selects("tier notin (a,b)", json!({})));
        assert!(!selects("tier notin (a,b)", json!({"tier": "a"})));
    }

    #[test]
    fn existence_operators_and_conjunction() {
        assert!(selects("app", json!({"app": ""})));
        assert!(!selects("app", json!({})));
        assert!(selects("!app", json!({})));
        assert!(!selects("!app", json!({"app": "x"})));
        assert!(selects(
            "app=web,tier in (a,b),!legacy",
            json!({"app": "web", "tier": "a"})
        ));
        assert!(!selects(
            "app=web,tier in (a,b)",
            json!({"app": "web", "tier": "c"})
        ));
    }

    #[test]
    fn malformed_label_selectors_are_refused() {
        assert!(LabelSelector::parse("tier in (a").is_err());
        assert!(LabelSelector::parse("tier within (a)").is_err());
    }

    #[test]
    fn field_selectors_match_name_and_namespace_and_refuse_other_fields() {
        let object = labelled(json!({}));
        let select = |s: &str| {
            FieldSelector::parse(s, &[])
                .expect("valid")
                .matches(&object)
        };
        assert!(select("metadata.name=x"));
        assert!(select("metadata.namespace==ns,metadata.name!=y"));
        assert!(!select("metadata.name!=x"));
        assert_eq!(
            FieldSelector::parse("spec.foo=1", &[]).unwrap_err(),
            "field label not supported: spec.foo"
        );
        assert!(FieldSelector::parse("type=Opaque", &["type"]).is_ok());
    }
}
