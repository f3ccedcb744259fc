//! Kubernetes JSONPath, as printer columns (`additionalPrinterColumns`) use it: fields
//! (`.spec.a`, `['a.b']`), indexes (`[0]`, `[-1]`), slices (`[1:3]`, `[::2]`), wildcards
//! (`[*]`, `.*`), recursive descent (`..name`) and filters (`[?(@.type=="Ready")]`,
//! `[?(@.count>2)]`, `[?(@.ready)]`). A path yields every match in order; printer columns show
//! the first, as kube-apiserver's table convertor does.

use serde_json::Value;

/// A comparison inside a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    /// The path below `@`.
    path: Vec<Step>,
    /// `None` for an existence test (`[?(@.ready)]`).
    comparison: Option<(Operator, Value)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Wildcard,
    Recursive(Box<Step>),
    Filter(Box<Filter>),
}

/// A compiled path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

fn literal(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if let Some(quoted) = text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .or_else(|| {
            text.strip_prefix('\'')
                .and_then(|rest| rest.strip_suffix('\''))
        })
    {
        return Ok(Value::from(quoted));
    }
    match text {
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        "null" => Ok(Value::Null),
        number => serde_json::from_str::<serde_json::Number>(number)
            .map(Value::Number)
            .map_err(|_| format!("unrecognized literal {number:?}")),
    }
}

fn filter(text: &str) -> Result<Filter, String> {
    let inner = text
        .strip_prefix("?(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(|| format!("unterminated filter {text:?}"))?;
    let operators = [
        ("==", Operator::Equal),
        ("!=", Operator::NotEqual),
        ("<=", Operator::LessOrEqual),
        (">=", Operator::GreaterOrEqual),
        ("<", Operator::Less),
        (">", Operator::Greater),
    ];
    let found = operators
        .iter()
        .filter_map(|(symbol, operator)| inner.find(symbol).map(|at| (at, *symbol, *operator)))
        .min_by_key(|(at, symbol, _)| (*at, usize::MAX - symbol.len()));
    let (left, comparison) = match found {
        Some((at, symbol, operator)) => (
            &inner[..at],
            Some((operator, literal(&inner[at + symbol.len()..])?)),
        ),
        None => (inner, None),
    };
    let left = left.trim();
    let below = left
        .strip_prefix('@')
        .ok_or_else(|| format!("a filter must start with @: {inner:?}"))?;
    Ok(Filter {
        path: parse_steps(below)?,
        comparison,
    })
}

fn bracket(content: &str) -> Result<Step, String> {
    let content = content.trim();
    if content.starts_with('?') {
        return Ok(Step::Filter(Box::new(filter(content)?)));
    }
    if content == "*" {
        return Ok(Step::Wildcard);
    }
    if (content.starts_with('\'') && content.ends_with('\'') && content.len() >= 2)
        || (content.starts_with('"') && content.ends_with('"') && content.len() >= 2)
    {
        return Ok(Step::Field(content[1..content.len() - 1].to_owned()));
    }
    if content.contains(':') {
        let bound = |text: &str| -> Result<Option<i64>, String> {
            let text = text.trim();
            if text.is_empty() {
                Ok(None)
            } else {
                text.parse()
                    .map(Some)
                    .map_err(|_| format!("bad slice bound {text:?}"))
            }
        };
        let parts: Vec<&str> = content.split(':').collect();
        return Ok(Step::Slice(
            bound(parts[0])?,
            bound(parts.get(1).copied().unwrap_or_default())?,
            bound(parts.get(2).copied().unwrap_or_default())?,
        ));
    }
    content
        .parse()
        .map(Step::Index)
        .map_err(|_| format!("bad index {content:?}"))
}

/// The end of the bracket that opens at `start`, skipping quoted text and nested parentheses.
fn closing_bracket(text: &str, start: usize) -> Result<usize, String> {
    let mut quote: Option<char> = None;
    let mut depth = 0i32;
    for (offset, c) in text[start + 1..].char_indices() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, ']') if depth == 0 => return Ok(start + 1 + offset),
            _ => {}
        }
    }
    Err(format!("unterminated [ in {text:?}"))
}

fn field_end(text: &str, start: usize) -> usize {
    text[start..]
        .find(['.', '['])
        .map_or(text.len(), |offset| start + offset)
}

fn parse_steps(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        if rest.starts_with("..") {
            let start = at + 2;
            let (step, next) = if text[start..].starts_with('[') {
                let end = closing_bracket(text, start)?;
                (bracket(&text[start + 1..end])?, end + 1)
            } else {
                let end = field_end(text, start);
                let name = &text[start..end];
                let step = if name == "*" {
                    Step::Wildcard
                } else {
                    Step::Field(name.to_owned())
                };
                (step, end)
            };
            steps.push(Step::Recursive(Box::new(step)));
            at = next;
        } else if rest.starts_with('.') {
            let end = field_end(text, at + 1);
            match &text[at + 1..end] {
                "" => {}
                "*" => steps.push(Step::Wildcard),
                name => steps.push(Step::Field(name.to_owned())),
            }
            at = end;
        } else if rest.starts_with('[') {
            let end = closing_bracket(text, at)?;
            steps.push(bracket(&text[at + 1..end])?);
            at = end + 1;
        } else {
            let end = field_end(text, at);
            steps.push(Step::Field(text[at..end].to_owned()));
            at = end;
        }
    }
    Ok(steps)
}

impl JsonPath {
    /// Parses `{.spec.a}` or `.spec.a`.
    pub fn parse(path: &str) -> Result<JsonPath, String> {
        let path = path.trim();
        let path = path
            .strip_prefix('{')
            .and_then(|rest| rest.strip_suffix('}'))
            .unwrap_or(path);
        let path = path.strip_prefix('$').unwrap_or(path);
        Ok(JsonPath {
            steps: parse_steps(path)?,
        })
    }

    /// Every value the path reaches in `object`, in order.
    pub fn find<'a>(&self, object: &'a Value) -> Vec<&'a Value> {
        run(&self.steps, vec![object])
    }
}

fn children(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) => items.iter().collect(),
        Value::Object(map) => map.values().collect(),
        _ => Vec::new(),
    }
}

fn descendants<'a>(value: &'a Value, into: &mut Vec<&'a Value>) {
    into.push(value);
    for child in children(value) {
        descendants(child, into);
    }
}

fn compare(left: &Value, operator: Operator, right: &Value) -> bool {
    let ordering = match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    match operator {
        Operator::Equal => ordering.map_or(left == right, |o| o.is_eq()),
        Operator::NotEqual => ordering.map_or(left != right, |o| o.is_ne()),
        Operator::Less => ordering.is_some_and(|o| o.is_lt()),
        Operator::LessOrEqual => ordering.is_some_and(|o| o.is_le()),
        Operator::Greater => ordering.is_some_and(|o| o.is_gt()),
        Operator::GreaterOrEqual => ordering.is_some_and(|o| o.is_ge()),
    }
}

fn resolve_index(index: i64, length: usize) -> Option<usize> {
    let length = length as i64;
    let index = if index < 0 { length + index } else { index };
    (0..length).contains(&index).then_some(index as usize)
}

fn step<'a>(step: &Step, value: &'a Value) -> Vec<&'a Value> {
    match step {
        Step::Field(name) => value.get(name).into_iter().collect(),
        Step::Index(index) => value
            .as_array()
            .and_then(|items| resolve_index(*index, items.len()).map(|at| &items[at]))
            .into_iter()
            .collect(),
        Step::Slice(start, end, stride) => {
            let Some(items) = value.as_array() else {
                return Vec::new();
            };
            let length = items.len() as i64;
            let clamp = |bound: i64| {
                if bound < 0 {
                    (length + bound).max(0)
                } else {
                    bound.min(length)
                }
            };
            let start = clamp(start.unwrap_or(0));
            let end = clamp(end.unwrap_or(length));
            let stride = stride.unwrap_or(1).max(1) as usize;
            (start..end)
                .step_by(stride)
                .map(|at| &items[at as usize])
                .collect()
        }
        Step::Wildcard => children(value),
        Step::Recursive(inner) => {
            let mut all = Vec::new();
            descendants(value, &mut all);
            all.into_iter()
                .flat_map(|node| self::step(inner, node))
                .collect()
        }
        Step::Filter(filter) => children(value)
            .into_iter()
            .filter(|item| {
                let found = run(&filter.path, vec![*item]);
                match &filter.comparison {
                    None => found
                        .first()
                        .is_some_and(|value| !matches!(value, Value::Null | Value::Bool(false))),
                    Some((operator, literal)) => found
                        .first()
                        .is_some_and(|value| compare(value, *operator, literal)),
                }
            })
            .collect(),
    }
}

fn run<'a>(steps: &[Step], start: Vec<&'a Value>) -> Vec<&'a Value> {
    steps.iter().fold(start, |current, next| {
        current
            .into_iter()
            .flat_map(|value| step(next, value))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn find(object: &Value, path: &str) -> Vec<Value> {
        JsonPath::parse(path)
            .expect("parses")
            .find(object)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn filters_pick_the_condition_of_a_type() {
        let object = json!({"status": {"conditions": [
            {"type": "Reconciling", "status": "False"},
            {"type": "Ready", "status": "True", "count": 3},
        ]}});
        assert_eq!(
            find(&object, r#".status.conditions[?(@.type=="Ready")].status"#),
            vec![json!("True")]
        );
        assert_eq!(
            find(&object, "{.status.conditions[?(@.type!='Ready')].type}"),
            vec![json!("Reconciling")]
        );
        assert_eq!(
            find(&object, ".status.conditions[?(@.count>2)].type"),
            vec![json!("Ready")]
        );
        assert_eq!(
            find(&object, ".status.conditions[?(@.count)].type"),
            vec![json!("Ready")]
        );
    }

    #[test]
    fn indexes_slices_wildcards_and_recursion() {
        let object = json!({"spec": {"ports": [{"port": 80}, {"port": 443}, {"port": 8080}],
                                     "labels": {"a.b/c": "x"}}});
        assert_eq!(find(&object, ".spec.ports[-1].port"), vec![json!(8080)]);
        assert_eq!(
            find(&object, ".spec.ports[0:2].port"),
            vec![json!(80), json!(443)]
        );
        assert_eq!(
            find(&object, ".spec.ports[::2].port"),
            vec![json!(80), json!(8080)]
        );
        assert_eq!(find(&object, ".spec.ports[*].port").len(), 3);
        assert_eq!(find(&object, "..port").len(), 3);
        assert_eq!(find(&object, ".spec.labels['a.b/c']"), vec![json!("x")]);
        assert!(find(&object, ".spec.missing").is_empty());
    }
}
