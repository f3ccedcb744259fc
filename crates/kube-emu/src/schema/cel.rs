//! `x-kubernetes-validations`: CEL rules parsed when the CRD is registered, evaluated with the
//! node's value as `self` (and the stored value as `oldSelf` on updates), as kube-apiserver's
//! CEL validator does.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::SchemaProblem;
use crate::status::Cause;

/// CEL's standard library (functions, macros, types), built once: building it costs more than
/// evaluating a typical rule, and every evaluation needs it.
static STDLIB: LazyLock<Arc<cel::Env>> = LazyLock::new(|| Arc::new(cel::Env::stdlib()));

/// One rule of `x-kubernetes-validations`.
#[derive(Debug)]
pub struct Rule {
    source: String,
    program: cel::Program,
    message: Option<String>,
    /// `messageExpression`: a CEL string expression that words the failure.
    message_expression: Option<cel::Program>,
    /// `fieldPath`, relative to the node (`.spec.x`).
    field_path: Option<String>,
    reason: Option<String>,
    /// A transition rule (it mentions `oldSelf`): evaluated only on updates of an existing value.
    transition: bool,
}

/// Parses the rules of one schema node; unparsable rules are problems of the CRD.
pub fn compile_rules(
    rules: Option<&Value>,
    path: &str,
    problems: &mut Vec<SchemaProblem>,
) -> Vec<Rule> {
    let Some(rules) = rules.and_then(Value::as_array) else {
        return Vec::new();
    };
    rules
        .iter()
        .enumerate()
        .filter_map(|(index, rule)| {
            let text = |key: &str| rule.get(key).and_then(Value::as_str).map(str::to_owned);
            let source = text("rule").unwrap_or_default();
            let message_expression = match text("messageExpression")
                .map(|expression| cel::Program::compile(&expression).map_err(|e| (expression, e)))
                .transpose()
            {
                Ok(program) => program,
                Err((expression, error)) => {
                    problems.push(SchemaProblem {
                        path: format!("{path}.x-kubernetes-validations[{index}].messageExpression"),
                        value: expression,
                        why: format!("messageExpression compilation failed: {error}"),
                    });
                    None
                }
            };
            match cel::Program::compile(&source) {
                Ok(program) => Some(Rule {
                    transition: program.references().has_variable("oldSelf"),
                    program,
                    message: text("message"),
                    message_expression,
                    field_path: text("fieldPath"),
                    reason: text("reason"),
                    source,
                }),
                Err(error) => {
                    problems.push(SchemaProblem {
                        path: format!("{path}.x-kubernetes-validations[{index}].rule"),
                        value: source,
                        why: format!("compilation failed: {error}"),
                    });
                    None
                }
            }
        })
        .collect()
}

/// JSON as CEL sees it: integers are `int`, other numbers `double`, objects maps.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(flag) => cel::Value::Bool(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(int) => cel::Value::Int(int),
            None => match number.as_u64() {
                Some(uint) => cel::Value::UInt(uint),
                None => cel::Value::Float(number.as_f64().unwrap_or_default()),
            },
        },
        Value::String(text) => cel::Value::String(Arc::new(text.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let map: HashMap<String, cel::Value> = map
                .iter()
                .map(|(key, value)| (key.clone(), to_cel(value)))
                .collect();
            cel::Value::from(map)
        }
    }
}

/// `spec.ref` + `.x` → `spec.ref.x`.
fn join_field_path(path: &str, relative: &str) -> String {
    let relative = relative.trim_start_matches('.');
    match (path.is_empty(), relative.is_empty()) {
        (_, true) => path.to_owned(),
        (true, false) => relative.to_owned(),
        (false, false) => format!("{path}.{relative}"),
    }
}

impl Rule {
    /// The failure worded by `messageExpression`, when it has one that yields a non-empty
    /// string (kube-apiserver falls back to `message` otherwise).
    fn expressed_message(&self, context: &cel::Context) -> Option<String> {
        match self.message_expression.as_ref()?.execute(context) {
            Ok(cel::Value::String(text)) if !text.trim().is_empty() => Some(text.to_string()),
            _ => None,
        }
    }

    /// Evaluates the rule on `value` (at `path`, of the schema type `type_name`); the cause
    /// when it does not hold.
    pub fn check(
        &self,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        type_name: &str,
    ) -> Option<Cause> {
        if self.transition && old.is_none() {
            return None;
        }
        let mut context = cel::Context::with_env(Arc::clone(&STDLIB));
        context.add_variable_from_value("self", to_cel(value));
        if let Some(old) = old {
            context.add_variable_from_value("oldSelf", to_cel(old));
        }
        let field = match &self.field_path {
            Some(relative) => join_field_path(path, relative),
            None => path.to_owned(),
        };
        let why = match self.program.execute(&context) {
            Ok(cel::Value::Bool(true)) => return None,
            Ok(cel::Value::Bool(false)) => self
                .expressed_message(&context)
                .or_else(|| self.message.clone())
                .unwrap_or_else(|| format!("failed rule: {}", self.source)),
            Ok(other) => format!(
                "rule \"{}\" must evaluate to a bool, found {other:?}",
                self.source
            ),
            Err(error) => format!("{}: {error}", self.source),
        };
        let type_value = Value::from(type_name);
        Some(match self.reason.as_deref() {
            Some("FieldValueForbidden") => Cause::forbidden(field, &why),
            Some("FieldValueRequired") => Cause::required(field, &why),
            Some("FieldValueDuplicate") => Cause::duplicate(field, &type_value),
            _ => Cause::invalid(field, &type_value, &why),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(rules: Value) -> Vec<Rule> {
        let mut problems = Vec::new();
        let compiled = compile_rules(Some(&rules), "openAPIV3Schema", &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        compiled
    }

    #[test]
    fn arbors_exactly_one_reference_rule_holds_only_for_one_field() {
        let compiled = rules(json!([{
            "rule": "[has(self.branch), has(self.tag), has(self.commit)].filter(x, x).size() == 1",
            "message": "exactly one of branch, tag or commit must be set",
        }]));
        let rule = &compiled[0];
        assert!(
            rule.check(&json!({"branch": "main"}), None, "spec.reference", "object")
                .is_none()
        );
        let cause = rule
            .check(
                &json!({"branch": "main", "tag": "v1"}),
                None,
                "spec.reference",
                "object",
            )
            .expect("two references");
        assert_eq!(cause.field, "spec.reference");
        assert_eq!(
            cause.message,
            "Invalid value: \"object\": exactly one of branch, tag or commit must be set"
        );
        assert!(
            rule.check(&json!({}), None, "spec.reference", "object")
                .is_some()
        );
    }

    #[test]
    fn a_message_expression_words_the_failure() {
        let compiled = rules(json!([{
            "rule": "self.size() <= 3",
            "message": "too long",
            "messageExpression": "'has ' + string(self.size()) + ' characters'",
        }]));
        let cause = compiled[0]
            .check(&json!("abcd"), None, "spec.name", "string")
            .expect("too long");
        assert_eq!(cause.message, "Invalid value: \"string\": has 4 characters");
    }

    #[test]
    fn transition_rules_wait_for_an_old_value() {
        let compiled = rules(json!([{"rule": "self == oldSelf", "message": "is immutable"}]));
        assert!(
            compiled[0]
                .check(&json!("a"), None, "spec.x", "string")
                .is_none()
        );
        assert!(
            compiled[0]
                .check(&json!("a"), Some(&json!("b")), "spec.x", "string")
                .is_some()
        );
    }

    #[test]
    fn a_rule_that_does_not_parse_is_a_problem_of_the_crd() {
        let mut problems = Vec::new();
        compile_rules(
            Some(&json!([{"rule": "self.x ==="}])),
            "openAPIV3Schema",
            &mut problems,
        );
        assert_eq!(
            problems[0].path,
            "openAPIV3Schema.x-kubernetes-validations[0].rule"
        );
    }
}
