//! Strings that many values hold alike, kept once per process.
//!
//! An object's key ([`ObjectKey`](crate::object::ObjectKey)) and its group, version and kind
//! are held many times over by a controller: in the declared state, in the records of a round,
//! in the plan, in the inventory of tracking objects. With a `String` each, every copy was an
//! allocation of its own, and at 100,000 objects those small strings were the larger part of
//! gitsync's memory; comparing keys compared their bytes every time.
//!
//! An [`Interned`] string is a shared, immutable string taken from one table per process: the
//! same text is always the same allocation, so a copy costs a reference count, and two equal
//! strings compare by their pointers first. The table holds each text only while something
//! else does: once it has grown to twice its size after the last sweep, the texts no value
//! holds any more are dropped, so the table stays proportional to what is alive (names of
//! objects long deleted do not pile up).
//!
//! Ordering and hashing are those of the text, so maps keyed by interned strings iterate in
//! the same order as with `String`s and can be looked up by `&str`.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string shared by every holder of the same text (see the module docs).
#[derive(Clone)]
pub struct Interned(Arc<str>);

/// The table is split so that threads interning at once rarely wait for each other.
const PARTS: usize = 16;
/// A part is not swept below this many texts: sweeping a small table gains nothing.
const SWEEP_FLOOR: usize = 1024;

struct Part {
    texts: HashSet<Arc<str>>,
    /// The size at which the next sweep runs.
    sweep_at: usize,
}

struct Table {
    parts: [Mutex<Part>; PARTS],
    hasher: std::collections::hash_map::RandomState,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| Table {
    parts: std::array::from_fn(|_| {
        Mutex::new(Part {
            texts: HashSet::new(),
            sweep_at: SWEEP_FLOOR,
        })
    }),
    hasher: std::collections::hash_map::RandomState::new(),
});

impl Table {
    fn part(&self, text: &str) -> &Mutex<Part> {
        // The low bits pick the part; the part's own set hashes with its own keys.
        &self.parts[(self.hasher.hash_one(text) as usize) % PARTS]
    }

    fn intern(&self, text: &str) -> Arc<str> {
        let mut part = self
            .part(text)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = part.texts.get(text) {
            return found.clone();
        }
        if part.texts.len() >= part.sweep_at {
            // Texts only the table holds: nothing refers to them any more.
            part.texts.retain(|kept| Arc::strong_count(kept) > 1);
            part.sweep_at = (part.texts.len() * 2).max(SWEEP_FLOOR);
        }
        let shared: Arc<str> = Arc::from(text);
        part.texts.insert(shared.clone());
        shared
    }
}

impl Interned {
    /// The shared string with the text `text`.
    pub fn new(text: &str) -> Self {
        Self(TABLE.intern(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Interned {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Interned {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Interned {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Default for Interned {
    fn default() -> Self {
        Self::new("")
    }
}

impl From<&str> for Interned {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<&String> for Interned {
    fn from(text: &String) -> Self {
        Self::new(text)
    }
}

impl From<String> for Interned {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl From<&Interned> for Interned {
    fn from(text: &Interned) -> Self {
        text.clone()
    }
}

impl From<Interned> for String {
    fn from(text: Interned) -> Self {
        text.0.as_ref().to_owned()
    }
}

impl PartialEq for Interned {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for Interned {}

impl PartialOrd for Interned {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Interned {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl Hash for Interned {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that a set of these can be looked up by `&str`.
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for Interned {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Interned {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Interned {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Interned> for str {
    fn eq(&self, other: &Interned) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Interned> for &str {
    fn eq(&self, other: &Interned) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Interned> for String {
    fn eq(&self, other: &Interned) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Display for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As `str` formats: width, precision and alignment apply.
        f.pad(&self.0)
    }
}

impl fmt::Debug for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for Interned {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Interned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;

        impl serde::de::Visitor<'_> for Text {
            type Value = Interned;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Interned, E> {
                Ok(Interned::new(text))
            }

            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Interned, E> {
                Ok(Interned::from(text))
            }
        }

        deserializer.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_same_text_is_one_allocation() {
        let a = Interned::new("configmap-interned-test");
        let b = Interned::from("configmap-interned-test".to_owned());
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, b);
        assert_eq!(a, "configmap-interned-test");
    }

    #[test]
    fn ordering_is_the_texts_whatever_order_they_were_interned_in() {
        let texts = ["b-order-test", "a-order-test", "c-order-test", ""];
        let interned: BTreeSet<Interned> = texts.iter().map(|t| Interned::new(t)).collect();
        let mut sorted = texts.to_vec();
        sorted.sort_unstable();
        let read: Vec<&str> = interned.iter().map(Interned::as_str).collect();
        assert_eq!(read, sorted);
    }

    #[test]
    fn a_text_nothing_holds_is_swept_and_one_still_held_is_kept() {
        let part_of = |text: &str| TABLE.part(text);
        let dropped = Interned::new("dropped-sweep-test");
        let part = part_of("dropped-sweep-test");
        drop(dropped);
        // Texts of the same part, held, until the part sweeps the dropped one.
        let mut held = Vec::new();
        let mut n = 0;
        while part.lock().unwrap().texts.contains("dropped-sweep-test") {
            let text = format!("held-sweep-test-{n}");
            n += 1;
            if std::ptr::eq(part_of(&text), part) {
                held.push(Interned::new(&text));
            }
            assert!(n < 10_000_000, "the part never swept");
        }
        assert!(!held.is_empty());
        for text in &held {
            let again = Interned::new(text);
            assert!(Arc::ptr_eq(&text.0, &again.0), "a held text is never swept");
        }
    }

    #[test]
    fn it_reads_and_writes_as_a_json_string() {
        let key: Interned = serde_json::from_str("\"apps\"").unwrap();
        assert_eq!(key, "apps");
        assert_eq!(serde_json::to_string(&key).unwrap(), "\"apps\"");
        assert_eq!(format!("{key} {key:?}"), "apps \"apps\"");
        assert_eq!(format!("[{key:>6}]"), "[  apps]");
    }
}
