//! The validation every kind gets, with kube-apiserver's messages: object names per the
//! kind's [`NameRule`], label keys and values, annotation keys and their total size, and
//! ownerReferences (each complete, at most one controller).

use serde_json::Value;

use crate::registry::NameRule;
use crate::status::Cause;

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// Why `name` is not a valid name under `rule`, if it is not.
pub fn name_problems(name: &str, rule: NameRule) -> Vec<String> {
    match rule {
        NameRule::Subdomain if !is_dns_subdomain(name) => {
            let mut problems = vec![SUBDOMAIN_MESSAGE.to_owned()];
            if name.len() > 253 {
                problems.insert(0, "must be no more than 253 characters".to_owned());
            }
            problems
        }
        NameRule::Label if !is_dns_label(name) => {
            let mut problems = vec![LABEL_MESSAGE.to_owned()];
            if name.len() > 63 {
                problems.insert(0, "must be no more than 63 characters".to_owned());
            }
            problems
        }
        NameRule::PathSegment => {
            let mut problems = Vec::new();
            if name == "." || name == ".." {
                problems.push(format!("may not be '{name}'"));
            }
            for forbidden in ["/", "%"] {
                if name.contains(forbidden) {
                    problems.push(format!("may not contain '{forbidden}'"));
                }
            }
            problems
        }
        _ => Vec::new(),
    }
}

/// Causes for an invalid `metadata.name`; empty when the name is fine.
pub fn validate_name(name: &str, rule: NameRule) -> Vec<Cause> {
    name_problems(name, rule)
        .into_iter()
        .map(|why| Cause::invalid("metadata.name", &Value::from(name), &why))
        .collect()
}

const QUALIFIED_NAME_FORMAT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// kube-apiserver's limit on the summed size of an object's annotation keys and values.
pub const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of a qualified name.
fn is_qualified_name_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Why `key` is not a qualified name (`prefix/name`, as label and annotation keys are).
pub fn qualified_name_problems(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_FORMAT} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    let mut problems = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            problems.push("prefix part must be non-empty".to_owned());
        } else if !is_dns_subdomain(prefix) {
            problems.push(format!("prefix part {SUBDOMAIN_MESSAGE}"));
        }
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 characters".to_owned());
    }
    if !name.is_empty() && !is_qualified_name_part(name) {
        problems.push(format!("name part {QUALIFIED_NAME_FORMAT}"));
    }
    problems
}

fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 63 {
        problems.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        problems.push(LABEL_VALUE_MESSAGE.to_owned());
    }
    problems
}

/// Causes for invalid labels and annotations (keys, label values, annotations' total size).
pub fn validate_labels_and_annotations(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let metadata = object.get("metadata");
    let map = |field: &str| {
        metadata
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
    };
    for (key, value) in map("labels").into_iter().flatten() {
        for why in qualified_name_problems(key) {
            causes.push(Cause::invalid(
                "metadata.labels",
                &Value::from(key.as_str()),
                &why,
            ));
        }
        let text = value.as_str().unwrap_or_default();
        for why in label_value_problems(text) {
            causes.push(Cause::invalid("metadata.labels", value, &why));
        }
    }
    let mut size = 0;
    for (key, value) in map("annotations").into_iter().flatten() {
        for why in qualified_name_problems(&key.to_lowercase()) {
            causes.push(Cause::invalid(
                "metadata.annotations",
                &Value::from(key.as_str()),
                &why,
            ));
        }
        size += key.len() + value.as_str().map_or(0, str::len);
    }
    if size > ANNOTATIONS_SIZE_LIMIT {
        causes.push(Cause::too_long(
            "metadata.annotations",
            ANNOTATIONS_SIZE_LIMIT as u64,
        ));
    }
    causes
}

/// Causes for invalid ownerReferences, as kube-apiserver's `ValidateOwnerReferences` judges
/// them: each names a version, a kind, a name and a uid, and at most one is the controller
/// (a second controller is how two owners that each think they own an object get caught).
pub fn validate_owner_references(object: &Value) -> Vec<Cause> {
    const FIELD: &str = "metadata.ownerReferences";
    let Some(references) = object
        .get("metadata")
        .and_then(|metadata| metadata.get("ownerReferences"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    let mut first_controller: Option<String> = None;
    for reference in references {
        let text = |field: &str| reference.get(field).and_then(Value::as_str).unwrap_or("");
        let api_version = text("apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or_default();
        if version.is_empty() {
            causes.push(Cause::invalid(
                format!("{FIELD}.apiVersion"),
                &Value::from(api_version),
                "version must not be empty",
            ));
        }
        for field in ["kind", "name", "uid"] {
            if text(field).is_empty() {
                causes.push(Cause::invalid(
                    format!("{FIELD}.{field}"),
                    &Value::from(text(field)),
                    "must not be empty",
                ));
            }
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{}/{}", text("kind"), text("name"));
            match &first_controller {
                Some(first) => causes.push(Cause::invalid(
                    FIELD,
                    &Value::Array(references.clone()),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    ),
                )),
                None => first_controller = Some(this),
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(metadata: Value) -> Vec<String> {
        validate_labels_and_annotations(&json!({"metadata": metadata}))
            .into_iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message))
            .collect()
    }

    #[test]
    fn label_keys_may_have_a_subdomain_prefix_and_values_are_short_names() {
        assert!(messages(json!({"labels": {"arbor.dev/tree": "a.b_c-1", "app": ""}})).is_empty());
        assert_eq!(
            messages(json!({"labels": {"bad key": "x"}})),
            vec![format!(
                "metadata.labels: Invalid value: \"bad key\": name part {QUALIFIED_NAME_FORMAT}"
            )]
        );
        assert_eq!(
            messages(json!({"labels": {"a": "-x"}})),
            vec![format!(
                "metadata.labels: Invalid value: \"-x\": {LABEL_VALUE_MESSAGE}"
            )]
        );
        assert_eq!(
            messages(json!({"labels": {"a": "x".repeat(64)}})).len(),
            1,
            "too long only"
        );
        assert_eq!(messages(json!({"labels": {"a/b/c": "x"}})).len(), 1);
    }

    #[test]
    fn annotations_are_limited_to_256_kib_in_total() {
        let big = "x".repeat(ANNOTATIONS_SIZE_LIMIT);
        assert_eq!(
            messages(json!({"annotations": {"a": big}})),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        assert!(messages(json!({"annotations": {"Example.COM/Any Value": "x"}})).len() == 1);
        assert!(
            messages(json!({"annotations": {"Example.com/Value": "any text at all"}})).is_empty()
        );
    }

    #[test]
    fn subdomains_allow_dots_but_not_capitals_or_underscores() {
        assert!(validate_name("web.example", NameRule::Subdomain).is_empty());
        assert!(!validate_name("Web", NameRule::Subdomain).is_empty());
        assert!(!validate_name("a_b", NameRule::Subdomain).is_empty());
        assert!(!validate_name("-a", NameRule::Subdomain).is_empty());
    }

    #[test]
    fn labels_refuse_dots() {
        assert!(validate_name("team-a", NameRule::Label).is_empty());
        assert!(!validate_name("team.a", NameRule::Label).is_empty());
        assert!(!validate_name(&"a".repeat(64), NameRule::Label).is_empty());
    }

    #[test]
    fn path_segments_refuse_slashes_and_dots() {
        assert!(validate_name("system:controller:x", NameRule::PathSegment).is_empty());
        assert!(!validate_name("a/b", NameRule::PathSegment).is_empty());
        assert!(!validate_name("..", NameRule::PathSegment).is_empty());
    }

    #[test]
    fn owner_references_are_complete_and_name_one_controller_at_most() {
        let owner = |uid: &str, controller: bool| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs-{uid}"),
                   "uid": uid, "controller": controller})
        };
        let causes = |references: Value| {
            validate_owner_references(&json!({"metadata": {"ownerReferences": references}}))
                .into_iter()
                .map(|cause| format!("{}: {}", cause.field, cause.message))
                .collect::<Vec<_>>()
        };
        assert!(causes(json!([owner("a", true), owner("b", false)])).is_empty());
        let two = causes(json!([
            owner("a", true),
            owner("b", false),
            owner("c", true)
        ]));
        assert_eq!(two.len(), 1, "{two:?}");
        assert!(two[0].starts_with("metadata.ownerReferences: Invalid value: [{"));
        assert!(two[0].ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/rs-a and ReplicaSet/rs-c"
        ));
        assert_eq!(
            causes(json!([{"apiVersion": "apps/", "kind": "", "name": "x", "uid": ""}])),
            vec![
                "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
            ]
        );
    }
}
