//! Request accounting: every resource request the server answered, named like kube's audit log
//! (verb, group, resource, subresource, namespace, name, user, status code), so tests can assert
//! exact request counts — for example that a no-op reconcile makes no writes. A create's name is
//! the one its object was sent with, as the audit log's objectRef says (empty for a generated
//! name), so a replay can tie each create to the object it made.
//!
//! Counts per (verb, resource, namespace, identity) and the write count are kept exactly for the
//! server's lifetime (until [`Requests::reset`]); the list of individual records keeps the most
//! recent [`RECORD_LIMIT`] so a long demo run does not grow without bound. Discovery, OpenAPI,
//! health, the emulator's own `/__emu/` endpoints and paths that name no served resource (404
//! before any verb applies) are not recorded. Over HTTP:
//! `GET /__emu/requests` returns the report (`total`, `writes`, `counts`, `records`), `DELETE`
//! resets it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use crate::authz::Attributes;

/// How many individual records are kept (counts stay exact beyond it).
pub const RECORD_LIMIT: usize = 100_000;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The username.
    pub identity: String,
    /// The HTTP status code of the answer (200 for a watch that started).
    pub code: u16,
}

impl RequestRecord {
    /// The record of a request by `identity` (a username) answered with `code`.
    pub fn new(attributes: Attributes, identity: &str, code: u16) -> RequestRecord {
        let Attributes {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
            // Only resource requests are accounted.
            path: _,
        } = attributes;
        RequestRecord {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
            identity: identity.to_owned(),
            code,
        }
    }

    pub fn is_write(&self) -> bool {
        is_write_verb(&self.verb)
    }

    fn key(&self) -> RequestKey {
        RequestKey {
            verb: self.verb.clone(),
            group: self.group.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            identity: self.identity.clone(),
        }
    }
}

/// Whether a verb changes state.
pub fn is_write_verb(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// What requests are counted by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestKey {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub identity: String,
}

#[derive(Debug, Default)]
struct Ledger {
    records: VecDeque<RequestRecord>,
    counts: BTreeMap<RequestKey, u64>,
    writes: u64,
    total: u64,
}

/// The server's request log; cheap to clone (a handle).
#[derive(Debug, Clone, Default)]
pub struct Requests {
    ledger: Arc<Mutex<Ledger>>,
}

/// The JSON report of `GET /__emu/requests`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestReport {
    pub total: u64,
    pub writes: u64,
    pub counts: Vec<CountEntry>,
    pub records: Vec<RequestRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CountEntry {
    #[serde(flatten)]
    pub key: RequestKey,
    pub count: u64,
}

impl Requests {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn record(&self, record: RequestRecord) {
        let mut ledger = self.ledger();
        *ledger.counts.entry(record.key()).or_default() += 1;
        ledger.total += 1;
        if record.is_write() {
            ledger.writes += 1;
        }
        if ledger.records.len() == RECORD_LIMIT {
            ledger.records.pop_front();
        }
        ledger.records.push_back(record);
    }

    /// The kept records, oldest first.
    pub fn snapshot(&self) -> Vec<RequestRecord> {
        self.ledger().records.iter().cloned().collect()
    }

    /// Requests per (verb, group, resource, namespace, identity).
    pub fn counts(&self) -> BTreeMap<RequestKey, u64> {
        self.ledger().counts.clone()
    }

    /// Requests with this verb on this resource (`plural` or `group/plural`), any namespace or
    /// identity.
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        let (group, plural) = resource.rsplit_once('/').unwrap_or(("", resource));
        self.ledger()
            .counts
            .iter()
            .filter(|(key, _)| key.verb == verb && key.group == group && key.resource == plural)
            .map(|(_, count)| count)
            .sum()
    }

    /// create, update, patch, delete and deletecollection requests, whatever their outcome.
    pub fn writes(&self) -> u64 {
        self.ledger().writes
    }

    /// Every request recorded.
    pub fn total(&self) -> u64 {
        self.ledger().total
    }

    /// Forgets everything recorded so far.
    pub fn reset(&self) {
        *self.ledger() = Ledger::default();
    }

    pub fn report(&self) -> RequestReport {
        let ledger = self.ledger();
        RequestReport {
            total: ledger.total,
            writes: ledger.writes,
            counts: ledger
                .counts
                .iter()
                .map(|(key, count)| CountEntry {
                    key: key.clone(),
                    count: *count,
                })
                .collect(),
            records: ledger.records.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(verb: &str, resource: &str) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            group: String::new(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: String::new(),
            identity: "alice".into(),
            code: 200,
        }
    }

    #[test]
    fn writes_and_counts_follow_the_records_until_reset() {
        let requests = Requests::default();
        requests.record(record("get", "configmaps"));
        requests.record(record("patch", "configmaps"));
        requests.record(record("patch", "configmaps"));
        requests.record(record("deletecollection", "secrets"));
        assert_eq!(requests.writes(), 3);
        assert_eq!(requests.count("patch", "configmaps"), 2);
        assert_eq!(requests.count("get", "apps/configmaps"), 0);
        assert_eq!(requests.snapshot().len(), 4);
        requests.reset();
        assert_eq!((requests.writes(), requests.total()), (0, 0));
        assert!(requests.counts().is_empty());
    }
}
