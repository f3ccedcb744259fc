//! What the cluster holds of a source's kinds, read with one list per kind.
//!
//! A full round compares every declared object with its live object; listing each kind once
//! (in the GitTrack's namespace, or cluster-wide for a ClusterGitTrack) costs one request per
//! kind instead of one per object, read in pages (`for_each_page`).

use std::collections::{BTreeMap, HashMap};

use arbor_policy::object::{GroupVersionKind, ObjectKey};
use kube::api::ObjectList;
use kube::core::Request;
use serde_json::Value;

use super::paged_list::for_each_page;
use crate::apply::object::{Listed, named};
use crate::apply::{ApplyError, Discovery, ServedKind};

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
            // Listed as JSON, without managedFields, straight from the response (`Listed`).
            let api = discovery.api(served, namespace);
            let request = Request::new(api.resource_url());
            let client = api.into_client();
            let (client, request) = (&client, &request);
            for_each_page(
                |params| async move {
                    let mut list = request.list(&params).map_err(kube::Error::BuildRequest)?;
                    list.extensions_mut().insert("list");
                    client.request::<ObjectList<Listed>>(list).await
                },
                |items| {
                    for Listed(value) in items {
                        let value = named(gvk, value);
                        if let Ok(key) = ObjectKey::of(&value) {
                            objects.insert(key, value);
                        }
                    }
                },
            )
            .await
            .map_err(|source| ApplyError::Write {
                verb: "list",
                object: gvk.to_string(),
                source: Box::new(source),
            })?;
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
