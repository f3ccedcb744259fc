//! get and list, including selectors and consistent paging with continue tokens.

use std::ops::Bound;
use std::sync::Arc;

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::Response;
use serde_json::{Map, Value, json};

use super::{object_key, presentation};
use crate::api::{RequestContext, Shared, json_response};
use crate::present;
use crate::registry::ResourceKind;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{ObjectKey, TooOld};

pub fn get(
    shared: &Shared,
    context: &RequestContext,
    kind: &ResourceKind,
) -> Result<Response<Body>, ApiError> {
    let key = object_key(context);
    let object = shared
        .state()
        .store
        .get(kind.storage_id(), &key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&kind.id, &key.name))?;
    let body = present::object(
        kind,
        &context.target.version,
        presentation(context),
        &object,
    );
    Ok(json_response(200, &body))
}

/// The selectors of a list or watch request.
#[derive(Debug, Clone)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn from_request(context: &RequestContext, kind: &ResourceKind) -> Result<Filter, ApiError> {
        let labels = LabelSelector::parse(context.query.get("labelSelector").unwrap_or_default())
            .map_err(ApiError::bad_request)?;
        let mut field_selector = context
            .query
            .get("fieldSelector")
            .unwrap_or_default()
            .to_owned();
        // The old single-object watch path (`.../configmaps/x?watch=1`) selects by name.
        if let Some(name) = &context.target.name {
            if !field_selector.is_empty() {
                field_selector.push(',');
            }
            field_selector.push_str(&format!("metadata.name={name}"));
        }
        if let Some(view) = &kind.view {
            field_selector = view.storage_field_selector(&field_selector);
        }
        let fields = FieldSelector::parse(&field_selector, &kind.field_labels)
            .map_err(ApiError::bad_request)?;
        Ok(Filter {
            namespace: context.target.namespace.clone(),
            labels,
            fields,
        })
    }

    pub fn matches(&self, key: &ObjectKey, object: &Value) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| *ns == key.namespace)
            && self.labels.matches(object)
            && self.fields.matches(object)
    }

    /// No label or field selector: every object of the namespace (or cluster) is listed.
    pub fn selects_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

/// Where the next page starts: the list's revision and the last key served, and for a list
/// without selectors how many items come after that key.
///
/// A page's `remainingItemCount` is a count of everything after it; counted again on every
/// page, a list read in pages of 500 would walk its collection once per page (quadratic in its
/// size). The list is of one fixed revision, so the count made on the first page stays right:
/// each later page subtracts what it served.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ContinueToken {
    revision: u64,
    after: ObjectKey,
    left: Option<usize>,
}

impl ContinueToken {
    fn encode(&self) -> String {
        let mut token =
            json!({"rv": self.revision, "ns": self.after.namespace, "name": self.after.name});
        if let Some(left) = self.left {
            token["left"] = Value::from(left);
        }
        URL_SAFE_NO_PAD.encode(token.to_string())
    }

    fn decode(text: &str) -> Result<ContinueToken, ApiError> {
        let invalid =
            |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| invalid("not base64"))?;
        let token: Value = serde_json::from_slice(&bytes).map_err(|_| invalid("not JSON"))?;
        let field = |name: &str| token.get(name).and_then(Value::as_str).map(str::to_owned);
        Ok(ContinueToken {
            revision: token
                .get("rv")
                .and_then(Value::as_u64)
                .ok_or_else(|| invalid("no revision"))?,
            after: ObjectKey {
                namespace: field("ns").ok_or_else(|| invalid("no namespace"))?,
                name: field("name").ok_or_else(|| invalid("no name"))?,
            },
            left: token
                .get("left")
                .map(|left| left.as_u64().ok_or_else(|| invalid("left is not a count")))
                .transpose()?
                .map(|left| usize::try_from(left).unwrap_or(usize::MAX)),
        })
    }
}

fn parse_revision(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {text:?}")))
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

pub fn list(
    shared: &Shared,
    context: &RequestContext,
    kind: &ResourceKind,
) -> Result<Response<Body>, ApiError> {
    let filter = Filter::from_request(context, kind)?;
    let limit: usize = match context.query.get("limit") {
        Some(limit) => limit
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid limit: {limit:?}")))?,
        None => 0,
    };
    let token = context
        .query
        .get("continue")
        .map(ContinueToken::decode)
        .transpose()?;
    let exact_revision = match (
        context.query.get("resourceVersionMatch"),
        context.query.get("resourceVersion"),
    ) {
        (Some("Exact"), Some(revision)) => Some(parse_revision(revision)?),
        _ => None,
    };
    let state = shared.state();
    let revision = token
        .as_ref()
        .map(|token| token.revision)
        .or(exact_revision)
        .unwrap_or_else(|| state.store.revision());
    // A namespaced list starts at its namespace's first key: keys sort by namespace first.
    let first_in_namespace = filter
        .namespace
        .as_deref()
        .map(|namespace| ObjectKey::new(namespace, ""));
    let from = match (&token, &first_in_namespace) {
        (Some(token), _) => Bound::Excluded(&token.after),
        (None, Some(first)) => Bound::Included(first),
        (None, None) => Bound::Unbounded,
    };
    let collection = state
        .store
        .at_revision(kind.storage_id(), revision, from)
        .map_err(|TooOld { requested, oldest }| {
            if token.is_some() {
                ApiError::expired(EXPIRED_CONTINUE)
            } else {
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
            }
        })?;
    let mut matching = collection
        .take_while(|(key, _)| {
            filter
                .namespace
                .as_ref()
                .is_none_or(|namespace| *namespace == key.namespace)
        })
        .filter(|(key, object)| filter.matches(key, object));
    let mut items: Vec<Arc<Value>> = Vec::new();
    let mut last_key = None;
    for (key, object) in matching.by_ref() {
        items.push(object);
        if limit > 0 && items.len() == limit {
            last_key = Some(key.into_owned());
            break;
        }
    }
    // kube-apiserver counts the items left only for a list without selectors; with one, it
    // says only that there are more (a continue token) and leaves remainingItemCount unset.
    let counted_before = token.as_ref().and_then(|token| token.left);
    let remaining = match last_key {
        None => None,
        // A count run out while items remain is a token reused with another namespace or kind:
        // counted again, so such a list neither ends early nor says a wrong number.
        Some(_) if filter.selects_everything() => Some(
            counted_before
                .map(|left| left.saturating_sub(items.len()))
                .filter(|left| *left > 0)
                .unwrap_or_else(|| matching.count()),
        ),
        Some(_) => Some(usize::from(matching.next().is_some())),
    };
    drop(state);
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), Value::from(revision.to_string()));
    if let (Some(remaining), Some(after)) = (remaining.filter(|left| *left > 0), last_key) {
        metadata.insert(
            "continue".into(),
            Value::from(
                ContinueToken {
                    revision,
                    after,
                    left: filter.selects_everything().then_some(remaining),
                }
                .encode(),
            ),
        );
        if filter.selects_everything() {
            metadata.insert("remainingItemCount".into(), Value::from(remaining));
        }
    }
    let body = present::list(
        kind,
        &context.target.version,
        presentation(context),
        &items,
        metadata,
    );
    Ok(json_response(200, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_refuse_garbage() {
        let token = ContinueToken {
            revision: 42,
            after: ObjectKey::new("ns", "name"),
            left: Some(7),
        };
        assert_eq!(
            ContinueToken::decode(&token.encode()).expect("valid"),
            token
        );
        assert_eq!(ContinueToken::decode("!!!").unwrap_err().code, 400);
    }
}
