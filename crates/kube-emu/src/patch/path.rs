//! Path elements: the steps from an object's root to one of its fields.
//!
//! They follow structured-merge-diff: a step is a field name, the key of an element of an
//! associative list (`listType=map`), the value of an element of a set list (`listType=set`) or a
//! list index. The order between elements (field names first, then keys, values, indexes) is the
//! order in which kube-apiserver serialises `fieldsV1` and prints conflicting fields.

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A named field of an object (`f:<name>` in FieldsV1).
    Field(String),
    /// An associative-list element identified by its key fields, sorted by name (`k:{..}`).
    Key(Vec<(String, Value)>),
    /// A set-list element identified by its value (`v:<json>`).
    Value(Value),
    /// A list element identified by position (`i:<n>`).
    Index(usize),
}

impl PathElement {
    /// A key element; the key fields are sorted by name as kube does.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The member name of this element inside a FieldsV1 object.
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let object: Map<String, Value> = fields.iter().cloned().collect();
                format!("k:{}", Value::Object(object))
            }
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// Parses a FieldsV1 member name (`f:`, `k:`, `v:` or `i:` prefixed).
    pub fn from_fields_v1_key(encoded: &str) -> Result<PathElement, String> {
        let (prefix, rest) = encoded
            .split_once(':')
            .ok_or_else(|| format!("fieldsV1 member {encoded:?} has no type prefix"))?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(object)) => Ok(PathElement::key(object.into_iter().collect())),
                _ => Err(format!(
                    "fieldsV1 member {encoded:?} is not a JSON object key"
                )),
            },
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|error| format!("fieldsV1 member {encoded:?}: {error}")),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|error| format!("fieldsV1 member {encoded:?}: {error}")),
            _ => Err(format!(
                "fieldsV1 member {encoded:?} has an unknown type prefix"
            )),
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                compare_entries(&key_entries(a), &key_entries(b))
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// Prints a whole path the way kube-apiserver does in conflict messages
/// (`.spec.containers[name="nginx"].image`).
pub fn display_path(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Orders JSON values like structured-merge-diff: numbers, strings, booleans, lists, maps, null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(value: &Value) -> u8 {
        match value {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (item_x, item_y) in x.iter().zip(y) {
                let ordering = compare_values(item_x, item_y);
                if ordering != Ordering::Equal {
                    return ordering;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            compare_entries(&sorted_entries(x), &sorted_entries(y))
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

fn key_entries(key: &[(String, Value)]) -> Vec<(&str, &Value)> {
    key.iter()
        .map(|(name, value)| (name.as_str(), value))
        .collect()
}

fn sorted_entries(map: &Map<String, Value>) -> Vec<(&str, &Value)> {
    let mut entries: Vec<(&str, &Value)> = map
        .iter()
        .map(|(name, value)| (name.as_str(), value))
        .collect();
    entries.sort_by(|p, q| p.0.cmp(q.0));
    entries
}

/// Compares name-sorted entries lexicographically, names first, then values.
fn compare_entries(a: &[(&str, &Value)], b: &[(&str, &Value)]) -> Ordering {
    for ((name_a, value_a), (name_b, value_b)) in a.iter().zip(b) {
        let ordering = name_a
            .cmp(name_b)
            .then_with(|| compare_values(value_a, value_b));
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_members_encode_sorted_compact_json() {
        let element = PathElement::key(vec![
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]);
        assert_eq!(
            element.to_fields_v1_key(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(
            PathElement::from_fields_v1_key(&element.to_fields_v1_key()).unwrap(),
            element
        );
        assert_eq!(element.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
    }

    #[test]
    fn field_names_sort_before_keys_values_and_indexes() {
        let mut elements = [
            PathElement::Index(0),
            PathElement::Value(json!("a")),
            PathElement::key(vec![("name".into(), json!("x"))]),
            PathElement::Field("z".into()),
        ];
        elements.sort();
        assert!(matches!(elements[0], PathElement::Field(_)));
        assert!(matches!(elements[1], PathElement::Key(_)));
        assert!(matches!(elements[2], PathElement::Value(_)));
        assert!(matches!(elements[3], PathElement::Index(_)));
    }

    #[test]
    fn unknown_prefix_is_rejected() {
        assert!(PathElement::from_fields_v1_key("x:y").is_err());
        assert!(PathElement::from_fields_v1_key("nothing").is_err());
    }
}
