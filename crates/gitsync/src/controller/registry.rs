//! What the controllers know about each source, shared with the finalizers and the gRPC
//! service: the last good declared state, every declared object with its state on the cluster,
//! the last status, and the channel that asks for a round now.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use arbor_api::keys::SourceRef;
use arbor_api::source::{DeletionPolicy, GitSourceStatus};
use arbor_policy::object::{GroupKind, GroupVersionKind, Interned, ObjectKey};
use arbor_policy::sync::Decision;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::held_state::HeldState;
use super::plan::applied_form_for;
use super::settings::Settings;

/// Where a declared object stands (the proto's `ManagedState`), decided in arbor-policy.
pub use arbor_policy::sync::ObjectState;

/// One declared object: what is applied, from where, and how it is doing.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRecord {
    pub gvk: GroupVersionKind,
    /// The repository file, relative to subPath.
    pub file: Interned,
    pub inherited_from: Option<String>,
    /// What the object is declared as; [`ObjectRecord::desired`] makes its applied form.
    pub declared: Declared,
    pub compare_fields: Vec<String>,
    pub state: ObjectState,
    /// Most often a row's reason, a static text: held without a copy.
    pub message: Cow<'static, str>,
    pub decision: Option<Decision>,
    pub last_applied: Option<SystemTime>,
}

/// The records of a source's objects, sorted by key and held in one block.
///
/// A round makes its records in plan order and hands them over whole ([`RecordsBuilder`]);
/// they are read by key and in key order until the next round replaces them. A `BTreeMap`
/// filled in plan order left its nodes about half full (at 100,000 objects, 55 MB where the
/// records themselves take 30 MB), in small blocks the allocator kept among others after the
/// next round freed them; one sorted block is the records' own size, and large enough to be
/// given back to the system when it is replaced.
#[derive(Debug, Clone, Default)]
pub struct Records {
    sorted: Vec<(ObjectKey, ObjectRecord)>,
}

impl Records {
    fn position(&self, key: &ObjectKey) -> Result<usize, usize> {
        self.sorted.binary_search_by(|(held, _)| held.cmp(key))
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&ObjectRecord> {
        let at = self.position(key).ok()?;
        Some(&self.sorted[at].1)
    }

    pub fn get_mut(&mut self, key: &ObjectKey) -> Option<&mut ObjectRecord> {
        let at = self.position(key).ok()?;
        Some(&mut self.sorted[at].1)
    }

    pub fn contains_key(&self, key: &ObjectKey) -> bool {
        self.position(key).is_ok()
    }

    /// In key order.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &ObjectRecord)> {
        self.into_iter()
    }

    /// In key order.
    pub fn values(&self) -> impl Iterator<Item = &ObjectRecord> {
        self.sorted.iter().map(|(_, record)| record)
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

/// [`Records`] as a round makes them: in any order, a key recorded again replacing what it
/// recorded before (as a map's insert does).
#[derive(Debug, Default)]
pub struct RecordsBuilder {
    made: Vec<(ObjectKey, ObjectRecord)>,
}

impl RecordsBuilder {
    /// Room for `records` records, made once (a vector grown by doubling holds up to twice
    /// what it needs).
    pub fn with_capacity(records: usize) -> Self {
        Self {
            made: Vec::with_capacity(records),
        }
    }

    pub fn insert(&mut self, key: ObjectKey, record: ObjectRecord) {
        self.made.push((key, record));
    }

    /// Sorted by key; of records made for the same key, the last.
    pub fn finish(self) -> Records {
        let mut sorted = self.made;
        // Stable, so that records of one key stay in the order they were made.
        sorted.sort_by(|(a, _), (b, _)| a.cmp(b));
        sorted.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        sorted.shrink_to_fit();
        Records { sorted }
    }
}

impl<'a> IntoIterator for &'a Records {
    type Item = (&'a ObjectKey, &'a ObjectRecord);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (ObjectKey, ObjectRecord)>,
        fn(&'a (ObjectKey, ObjectRecord)) -> (&'a ObjectKey, &'a ObjectRecord),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.sorted.iter().map(|(key, record)| (key, record))
    }
}

/// Where a record's object is declared. Applied forms are made when asked, never kept: kept
/// for every object they were the largest part of gitsync's memory (at 10,000 objects, more
/// than the declarations they are made from).
#[derive(Debug, Clone)]
pub enum Declared {
    /// Applied: the declaration under `key` in the state the round that applied it synced.
    Applied {
        state: Arc<HeldState>,
        key: ObjectKey,
    },
    /// Not applied (ignored, or failed before it was planned): the declaration as written.
    AsWritten(Arc<Value>),
}

impl PartialEq for Declared {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::Applied { state, key },
                Self::Applied {
                    state: other_state,
                    key: other_key,
                },
            ) => Arc::ptr_eq(state, other_state) && key == other_key,
            (Self::AsWritten(object), Self::AsWritten(other)) => object == other,
            _ => false,
        }
    }
}

impl ObjectRecord {
    /// The object as `source` applies it (for an object not applied: as declared), landing in
    /// `namespace` (the namespace the record is keyed with). `None` only for a record whose
    /// declaration is missing from its own state, which a round never makes.
    pub fn desired(
        &self,
        settings: &Settings,
        source: &SourceRef,
        namespace: Option<&str>,
    ) -> Option<Value> {
        match &self.declared {
            Declared::Applied { state, key } => {
                let declared = state.objects.get(key)?;
                Some(applied_form_for(
                    &settings.keys,
                    &settings.label,
                    source,
                    declared,
                    namespace,
                ))
            }
            Declared::AsWritten(object) => Some(object.as_ref().clone()),
        }
    }
}

/// The last good state of a source.
#[derive(Debug, Clone)]
pub struct GoodState {
    pub commit: String,
    pub state: Arc<HeldState>,
}

/// Everything known about one source.
#[derive(Debug, Clone, Default)]
pub struct SourceRecord {
    pub repository: String,
    pub revision: String,
    pub suspended: bool,
    pub deletion_policy: DeletionPolicy,
    pub good: Option<GoodState>,
    /// Declared objects, keyed with the namespace they land in.
    pub objects: Records,
    pub status: GitSourceStatus,
    /// Completed rounds.
    pub rounds: u64,
    /// When every object was last compared with git.
    pub last_full_round: Option<tokio::time::Instant>,
    /// The generation the last full round saw.
    pub generation: Option<i64>,
    /// A full round was asked for (TriggerSync, ReportDrift, a tracking object deleted).
    pub full_round_requested: bool,
    /// The generation of the source last reported as not decoding.
    pub undecodable_generation: Option<i64>,
    /// The user the source's objects are written as (a GitTrack's service account), `None`
    /// for gitsync itself.
    pub apply_as: Option<String>,
    /// A round here read the source's tracking objects with a LIST since this replica last
    /// took the source on (a restart or a shard gained forgets the record): from then on every
    /// removal of the source's tracking objects is this replica's own write, which the watch is
    /// waited for, so its rounds may read the watch ([`super::tracking::InventoryRead`]).
    pub inventory_listed: bool,
    /// A round used the mass-prune allowance and removing the annotation failed: it is removed
    /// after the next round, which has nothing left to prune and would not use it.
    pub allowance_unremoved: bool,
}

impl SourceRecord {
    /// Whether what the source declares is known here: a good state was read (a shard gained
    /// starts with none), or the source does not decode, or a round finished and the source
    /// never synced anywhere (its status names no commit), so it declares nothing. A round
    /// that failed to fetch or parse a source that did sync before (on the replica that held
    /// it) says nothing about what it declares: its objects would be answered "not declared".
    pub fn state_known(&self) -> bool {
        self.good.is_some()
            || self.undecodable_generation.is_some()
            || (self.rounds > 0 && self.status.observed_commit.is_none())
    }
}

/// The shared registry.
#[derive(Debug)]
pub struct Registry {
    sources: RwLock<BTreeMap<SourceRef, SourceRecord>>,
    triggers: mpsc::UnboundedSender<SourceRef>,
    rounds: watch::Sender<u64>,
    round_locks: std::sync::Mutex<BTreeMap<SourceRef, Arc<tokio::sync::Mutex<()>>>>,
}

impl Registry {
    /// A registry and the receiver of its round requests.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<SourceRef>) {
        let (triggers, receiver) = mpsc::unbounded_channel();
        let (rounds, _) = watch::channel(0);
        (
            Self {
                sources: RwLock::default(),
                triggers,
                rounds,
                round_locks: std::sync::Mutex::default(),
            },
            receiver,
        )
    }

    pub fn get(&self, source: &SourceRef) -> Option<SourceRecord> {
        self.read().get(source).cloned()
    }

    /// What `read` takes from `source`'s record, without copying the record (its objects are
    /// one record per declared object).
    pub fn view<T>(&self, source: &SourceRef, read: impl FnOnce(&SourceRecord) -> T) -> Option<T> {
        self.read().get(source).map(read)
    }

    /// Whether a round here listed `source`'s tracking objects since this replica took it on
    /// ([`SourceRecord::inventory_listed`]), read without copying the record (every round asks).
    pub fn inventory_listed(&self, source: &SourceRef) -> bool {
        self.read()
            .get(source)
            .is_some_and(|record| record.inventory_listed)
    }

    /// Whether what `source` declares is known here ([`SourceRecord::state_known`]). Read
    /// without copying the record (every gathered question asks, for every source).
    pub fn state_known(&self, source: &SourceRef) -> bool {
        self.read()
            .get(source)
            .is_some_and(SourceRecord::state_known)
    }

    pub fn sources(&self) -> Vec<(SourceRef, SourceRecord)> {
        self.read()
            .iter()
            .map(|(source, record)| (source.clone(), record.clone()))
            .collect()
    }

    /// Changes the record of `source`, creating it when absent.
    pub fn update<T>(&self, source: &SourceRef, change: impl FnOnce(&mut SourceRecord) -> T) -> T {
        let mut sources = self.sources.write().unwrap_or_else(PoisonError::into_inner);
        change(sources.entry(source.clone()).or_default())
    }

    /// Forgets a deleted source.
    pub fn remove(&self, source: &SourceRef) {
        self.sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(source);
    }

    /// The lock that keeps a round, a preview and a drift re-apply of one source from running
    /// at once.
    pub fn round_lock(&self, source: &SourceRef) -> Arc<tokio::sync::Mutex<()>> {
        self.round_locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(source.clone())
            .or_default()
            .clone()
    }

    /// Marks a round of `source` finished and wakes those waiting for it.
    pub fn round_finished(&self, source: &SourceRef) {
        self.update(source, |record| record.rounds += 1);
        self.rounds.send_modify(|rounds| *rounds += 1);
    }

    /// Asks for a full round of `source` now. Only a record that exists is marked: one
    /// forgotten (its shard handed over) or removed (the source deleted) must not come back
    /// empty, and a source with no record gets a full round anyway, its first.
    pub fn request_round(&self, source: &SourceRef) {
        if let Some(record) = self
            .sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(source)
        {
            record.full_round_requested = true;
        }
        // The receiver lives as long as the controllers; without them there is no one to ask.
        let _ = self.triggers.send(source.clone());
    }

    /// Waits until `source` has finished more than `after` rounds, for at most `patience`.
    pub async fn wait_for_round(&self, source: &SourceRef, after: u64, patience: Duration) -> bool {
        let mut rounds = self.rounds.subscribe();
        let finished = async {
            loop {
                if self
                    .view(source, |record| record.rounds > after)
                    .unwrap_or(false)
                {
                    return;
                }
                if rounds.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(patience, finished).await.is_ok()
    }

    /// The sources that declare `key`, with the record of the object.
    pub fn declarations(&self, key: &ObjectKey) -> Vec<(SourceRef, String, ObjectRecord)> {
        self.read()
            .iter()
            .filter_map(|(source, record)| {
                let object = record.objects.get(key)?;
                let commit = record.good.as_ref().map(|good| good.commit.clone());
                Some((source.clone(), commit.unwrap_or_default(), object.clone()))
            })
            .collect()
    }

    /// `source`'s record of `key`, with the user the source's objects are written as
    /// ([`SourceRecord::apply_as`]), read without copying the rest of the record.
    pub fn declaration(
        &self,
        source: &SourceRef,
        key: &ObjectKey,
    ) -> Option<(ObjectRecord, Option<String>)> {
        let sources = self.read();
        let record = sources.get(source)?;
        let object = record.objects.get(key)?;
        Some((object.clone(), record.apply_as.clone()))
    }

    /// Whether `source`'s last good state declares the kind; `None` when the source is unknown.
    pub fn declares_kind(&self, source: &SourceRef, kind: &GroupKind) -> Option<bool> {
        let sources = self.read();
        let good = sources.get(source)?.good.as_ref()?;
        Some(good.state.declares_kind(kind))
    }

    /// Whether `source` has a Sync declared for a kind its inventory holds (a flat source
    /// declares every kind it manages an object of); `None` when the source is unknown.
    pub fn declares_inventory_kind(&self, source: &SourceRef, kind: &GroupKind) -> Option<bool> {
        let sources = self.read();
        let good = sources.get(source)?.good.as_ref()?;
        Some(arbor_policy::sync::prune::kind_has_sync(
            good.state.layout,
            good.state.declares_kind(kind),
            true,
        ))
    }

    /// Whether any known source declares the kind.
    pub fn any_declares_kind(&self, kind: &GroupKind) -> bool {
        self.read().values().any(|record| {
            record
                .good
                .as_ref()
                .is_some_and(|good| good.state.declares_kind(kind))
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<SourceRef, SourceRecord>> {
        self.sources.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(name: &str) -> ObjectKey {
        ObjectKey {
            group_kind: GroupKind::new("", "ConfigMap"),
            namespace: Some("team-a".into()),
            name: name.into(),
        }
    }

    fn record(message: &'static str) -> ObjectRecord {
        ObjectRecord {
            gvk: GroupVersionKind::from_api_version("v1", "ConfigMap"),
            file: "cms.yaml".into(),
            inherited_from: None,
            declared: Declared::AsWritten(Arc::new(Value::Null)),
            compare_fields: Vec::new(),
            state: ObjectState::InSync,
            message: Cow::Borrowed(message),
            decision: None,
            last_applied: None,
        }
    }

    #[test]
    fn records_made_in_any_order_are_read_by_key_and_in_key_order() {
        let mut made = RecordsBuilder::with_capacity(4);
        for name in ["c", "a", "d", "b"] {
            made.insert(config_map(name), record("made"));
        }
        let records = made.finish();
        let names: Vec<&str> = records.iter().map(|(key, _)| key.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(records.len(), 4);
        assert!(records.contains_key(&config_map("d")));
        assert!(!records.contains_key(&config_map("e")));
        assert!(records.get(&config_map("e")).is_none());
        assert_eq!(records.get(&config_map("b")).unwrap().message, "made");
    }

    #[test]
    fn a_key_recorded_again_keeps_its_last_record() {
        let mut made = RecordsBuilder::with_capacity(5);
        made.insert(config_map("b"), record("first"));
        made.insert(config_map("a"), record("only"));
        made.insert(config_map("b"), record("second"));
        made.insert(config_map("c"), record("only"));
        made.insert(config_map("b"), record("third"));
        let mut records = made.finish();
        let read: Vec<(&str, &str)> = records
            .iter()
            .map(|(key, record)| (key.name.as_str(), record.message.as_ref()))
            .collect();
        assert_eq!(read, [("a", "only"), ("b", "third"), ("c", "only")]);
        records.get_mut(&config_map("c")).unwrap().message = Cow::Borrowed("changed");
        assert_eq!(records.get(&config_map("c")).unwrap().message, "changed");
    }

    #[test]
    fn a_round_that_read_no_state_of_a_source_that_synced_before_knows_nothing() {
        let synced_before = SourceRecord {
            rounds: 1,
            status: GitSourceStatus {
                observed_commit: Some("c0ffee".into()),
                ..GitSourceStatus::default()
            },
            ..SourceRecord::default()
        };
        assert!(
            !synced_before.state_known(),
            "a failed fetch after a handover"
        );
        let never_synced = SourceRecord {
            rounds: 1,
            ..SourceRecord::default()
        };
        assert!(never_synced.state_known(), "declares nothing yet");
        assert!(!SourceRecord::default().state_known(), "no round yet");
        let read = SourceRecord {
            good: Some(GoodState {
                commit: "c0ffee".into(),
                state: Arc::new(HeldState::default()),
            }),
            ..synced_before.clone()
        };
        assert!(read.state_known());
        let undecodable = SourceRecord {
            undecodable_generation: Some(2),
            ..synced_before
        };
        assert!(undecodable.state_known());
    }

    #[test]
    fn a_round_asked_for_a_source_without_a_record_brings_no_record_back() {
        let (registry, mut triggers) = Registry::new();
        let kept = SourceRef::ClusterGitTrack {
            name: "kept".into(),
        };
        let gone = SourceRef::ClusterGitTrack {
            name: "gone".into(),
        };
        registry.round_finished(&kept);
        registry.round_finished(&gone);
        registry.remove(&gone);

        registry.request_round(&gone);
        registry.request_round(&kept);

        assert!(
            registry.get(&gone).is_none(),
            "a removed (or forgotten) source stays without a record"
        );
        assert!(registry.get(&kept).is_some_and(|r| r.full_round_requested));
        // The controllers are still asked: a round of a source without a record is a full one.
        assert_eq!(triggers.try_recv().ok(), Some(gone));
        assert_eq!(triggers.try_recv().ok(), Some(kept));
    }
}
