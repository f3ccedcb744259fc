//! What the cluster holds of a source's kinds, read with one list per kind.
//!
//! A full round compares every declared object with its live object; listing each kind once
//! (in the GitTrack's namespace, or cluster-wide for a ClusterGitTrack) costs one request per
//! kind instead of one per object. Lists are read in pages, so a kind of 100,000 objects is
//! never one response held whole next to the values made from it.

use std::collections::{BTreeMap, HashMap};

use arbor_policy::object::{GroupVersionKind, ObjectKey};
use kube::api::ListParams;
use serde_json::Value;

use crate::apply::object::live_value;
use crate::apply::{ApplyError, Discovery, ServedKind};

/// Objects per list request: kube-apiserver's own page size for informers.
pub(super) const LIST_PAGE: u32 = 500;

/// The live objects of some kinds, by key.
#[derive(Debug, Default)]
pub struct Snapshot {
    objects: HashMap<ObjectKey, Value>,
}

impl Snapshot {
    /// Lists every kind of `kinds` in `namespace` (cluster-wide when `None`).
    pub async fn read(
        discovery: &Discovery,
        kinds: &BTreeMap<GroupVersionKind, ServedKind>,
        namespace: Option<&str>,
    ) -> Result<Self, ApplyError> {
        let mut objects = HashMap::new();
        for (gvk, served) in kinds {
            let api = discovery.api(served, namespace);
            let mut params = ListParams::default().limit(LIST_PAGE);
            loop {
                let page = api
                    .list(&params)
                    .await
                    .map_err(|source| ApplyError::Write {
                        verb: "list",
                        object: gvk.to_string(),
                        source: Box::new(source),
                    })?;
                for item in &page.items {
                    let Ok(value) = live_value(gvk, item) else {
                        continue;
                    };
                    if let Ok(key) = ObjectKey::of(&value) {
                        objects.insert(key, value);
                    }
                }
                match page.metadata.continue_.filter(|token| !token.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
        }
        Ok(Self { objects })
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Value> {
        self.objects.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Value)> {
        self.objects.iter()
    }

    /// Records what a write left on the cluster.
    pub fn set(&mut self, key: ObjectKey, live: Option<Value>) {
        match live {
            Some(live) => self.objects.insert(key, live),
            None => self.objects.remove(&key),
        };
    }
}
