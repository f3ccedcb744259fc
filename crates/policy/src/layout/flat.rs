//! The flat layout (Faros): every object in the tree is declared as written.
//!
//! There is no Sync: every kind that occurs counts as declared. Objects keep the namespace they
//! name; one without `metadata.namespace` is left to the source (a GitTrack applies it in its own
//! namespace, as the ownership rules of seeds/002 decide).

use std::collections::BTreeMap;

use super::declared::{DeclaredObject, DeclaredState, Layout};
use super::error::{SourceError, sorted};
use super::input::{Location, SourceFile, identify};
use super::synced::DeclaredKind;
use super::unique::{Declaration, insert_unique};
use crate::code::ErrorCode;
use crate::object::{GroupKind, ObjectKey};

/// Validates a flat tree. Any error means no declared state at all.
pub fn parse_flat(files: &[SourceFile]) -> Result<DeclaredState, Vec<SourceError>> {
    parse_flat_files(files.to_vec())
}

/// [`parse_flat`], taking the files: each object is moved into the state.
pub fn parse_flat_files(files: Vec<SourceFile>) -> Result<DeclaredState, Vec<SourceError>> {
    let mut reader = FlatReader::new(|declared| declared);
    for file in files {
        reader.read(file);
    }
    reader.finish()
}

/// A flat tree taken in one file at a time.
///
/// A flat tree is valid when every document has an identity and no object is declared twice,
/// and both are read off an object's identity alone. So each file's objects are identified as
/// the file is read and then handed to `hold`, which makes what the caller keeps of them
/// (gitsync: a compact text), and the file's parsed documents are dropped before the next file
/// is read: a large source is never held parsed all at once, as it was when every file was
/// parsed before any was validated (at 100,000 ConfigMaps, some 200 MB for a moment, against a
/// tenth of that held). Any error means no declared state at all ([`FlatReader::finish`]).
pub struct FlatReader<O, H> {
    hold: H,
    taken: Vec<Taken<O>>,
    errors: Vec<SourceError>,
}

/// An identified object of a flat tree, as `hold` made it.
struct Taken<O> {
    key: ObjectKey,
    location: Location,
    object: O,
}

impl<O, H> std::fmt::Debug for FlatReader<O, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatReader")
            .field("objects", &self.taken.len())
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

impl<O> Declaration for Taken<O> {
    fn location(&self) -> &Location {
        &self.location
    }

    fn display(&self) -> String {
        format!("{}/{}", self.key.group_kind, self.key.name)
    }
}

impl<O, H: FnMut(DeclaredObject) -> O> FlatReader<O, H> {
    pub fn new(hold: H) -> Self {
        Self {
            hold,
            taken: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Identifies the documents of `file` and holds each one that has an identity; one that
    /// has none is an error of the tree.
    pub fn read(&mut self, file: SourceFile) {
        let mut file = [file];
        let (objects, errors) = identify(&file);
        self.errors.extend(errors);
        let placed: Vec<(ObjectKey, Location)> = objects
            .into_iter()
            .map(|object| {
                let key = ObjectKey {
                    group_kind: object.gvk.group_kind(),
                    namespace: crate::object::namespace(object.value).map(Into::into),
                    name: object.name.as_str().into(),
                };
                (key, object.location)
            })
            .collect();
        let [file] = &mut file;
        for (key, location) in placed {
            let object = std::mem::take(&mut file.documents[location.document]);
            let object = (self.hold)(DeclaredObject {
                object,
                source: location.clone(),
                inherited_from: None,
            });
            self.taken.push(Taken {
                key,
                location,
                object,
            });
        }
    }

    /// The declared state of every file read, or every error found in them.
    pub fn finish(self) -> Result<DeclaredState<O>, Vec<SourceError>> {
        let Self {
            taken, mut errors, ..
        } = self;
        if taken.is_empty() && errors.is_empty() {
            return Err(vec![empty_source()]);
        }
        let mut seen = BTreeMap::new();
        for object in taken {
            let key = object.key.clone();
            insert_unique(&mut seen, key, object, &mut errors);
        }
        if !errors.is_empty() {
            return Err(sorted(errors));
        }
        let mut state = DeclaredState {
            layout: Layout::Flat,
            objects: BTreeMap::new(),
            kinds: BTreeMap::new(),
            namespaces: Default::default(),
        };
        for key in seen.keys() {
            state
                .kinds
                .entry(key.group_kind.clone())
                .or_insert_with(|| DeclaredKind::implied(key.group_kind.clone()));
            if key.group_kind == GroupKind::new("", "Namespace") {
                state.namespaces.insert(key.name.to_string());
            }
        }
        state.objects = seen
            .into_iter()
            .map(|(key, taken)| (key, taken.object))
            .collect();
        Ok(state)
    }
}

/// "An empty subPath is an error, never nothing declared": a tree without objects would
/// otherwise read as a request to delete everything.
pub(crate) fn empty_source() -> SourceError {
    SourceError::at_path(
        ErrorCode::EmptySource,
        ".",
        "the tree declares no object; an empty source is refused rather than read as \"delete everything\"",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cm(name: &str, namespace: Option<&str>) -> Value {
        let mut object =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        if let Some(ns) = namespace {
            object["metadata"]["namespace"] = json!(ns);
        }
        object
    }

    fn codes(result: Result<DeclaredState, Vec<SourceError>>) -> Vec<ErrorCode> {
        result.unwrap_err().iter().map(|e| e.code).collect()
    }

    #[test]
    fn flat_declares_every_object_and_every_kind_it_contains() {
        let files = [
            SourceFile::new("a.yaml", vec![cm("a", Some("team")), cm("a", None)]),
            SourceFile::new(
                "deep/ns.json",
                vec![
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
                ],
            ),
        ];
        let state = parse_flat(&files).unwrap();
        assert_eq!(state.objects.len(), 3);
        assert!(state.declares_kind(&GroupKind::new("", "ConfigMap")));
        assert!(state.declares_kind(&GroupKind::new("", "Namespace")));
        assert_eq!(state.namespaces.iter().collect::<Vec<_>>(), ["team"]);
        assert_eq!(state.in_namespace("team").count(), 1);
        let (_, ns) = state
            .without_namespace()
            .find(|(k, _)| k.name == "team")
            .unwrap();
        assert_eq!(ns.source.path, "deep/ns.json");
    }

    #[test]
    fn taking_the_files_declares_what_reading_them_declares() {
        let files = vec![
            SourceFile::new("a.yaml", vec![cm("b", Some("team")), cm("a", None)]),
            SourceFile::new(
                "deep/ns.json",
                vec![
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
                    cm("a", Some("team")),
                ],
            ),
        ];
        let read = parse_flat(&files).unwrap();
        let taken = parse_flat_files(files.clone()).unwrap();
        assert_eq!(taken, read);
        let (_, moved) = taken
            .in_namespace("team")
            .find(|(key, _)| key.name == "a")
            .unwrap();
        assert_eq!(moved.object, files[1].documents[1]);
        assert_eq!(
            (moved.source.path.as_str(), moved.source.document),
            ("deep/ns.json", 1)
        );

        let twice = vec![
            SourceFile::new("a.yaml", vec![cm("a", Some("team"))]),
            SourceFile::new("b.yaml", vec![cm("a", Some("team"))]),
        ];
        assert_eq!(
            parse_flat_files(twice.clone()).unwrap_err(),
            parse_flat(&twice).unwrap_err()
        );
        assert_eq!(
            codes(parse_flat_files(Vec::new())),
            [ErrorCode::EmptySource]
        );
    }

    #[test]
    fn duplicate_objects_in_flat_are_refused() {
        let files = [
            SourceFile::new("a.yaml", vec![cm("a", Some("team"))]),
            SourceFile::new("b.yaml", vec![cm("a", Some("team"))]),
        ];
        let errors = parse_flat(&files).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].code, ErrorCode::DuplicateObject);
        assert_eq!(errors[0].path, "b.yaml");
        assert!(errors[0].message.contains("a.yaml"));
    }

    #[test]
    fn empty_source_is_an_error_never_nothing_declared() {
        assert_eq!(codes(parse_flat(&[])), [ErrorCode::EmptySource]);
        assert_eq!(
            codes(parse_flat(&[SourceFile::new("empty.yaml", vec![])])),
            [ErrorCode::EmptySource]
        );
    }

    #[test]
    fn any_error_yields_no_declared_state() {
        let files = [SourceFile::new(
            "a.yaml",
            vec![cm("good", None), json!({"kind": "ConfigMap"})],
        )];
        assert_eq!(codes(parse_flat(&files)), [ErrorCode::MissingIdentity]);
    }

    #[test]
    fn each_file_read_is_held_before_the_next_is_read() {
        let files = vec![
            SourceFile::new("a.yaml", vec![cm("b", Some("team")), json!({"kind": "x"})]),
            SourceFile::new(
                "b.yaml",
                vec![
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
                    cm("a", Some("team")),
                    cm("a", None),
                ],
            ),
        ];
        let held = std::cell::RefCell::new(Vec::new());
        let mut reader = FlatReader::new(|declared: DeclaredObject| {
            held.borrow_mut().push(declared.source.clone());
            declared
        });
        reader.read(files[0].clone());
        // The document without an identity is an error, not held.
        assert_eq!(held.borrow().len(), 1, "{:?}", held.borrow());
        reader.read(files[1].clone());
        assert_eq!(held.borrow().len(), 4);
        assert_eq!(
            codes(reader.finish()),
            [ErrorCode::MissingIdentity],
            "the tree's errors, as parsing it whole finds them"
        );
        assert_eq!(codes(parse_flat(&files)), [ErrorCode::MissingIdentity]);

        let mut valid = files;
        valid[0].documents.pop();
        let mut reader = FlatReader::new(|declared: DeclaredObject| declared.object);
        for file in valid.clone() {
            reader.read(file);
        }
        let held = reader.finish().unwrap();
        let whole = parse_flat(&valid).unwrap();
        assert_eq!(held.layout, whole.layout);
        assert_eq!(held.kinds, whole.kinds);
        assert_eq!(held.namespaces, whole.namespaces);
        assert!(held.objects.keys().eq(whole.objects.keys()));
        for (key, object) in &held.objects {
            assert_eq!(*object, whole.objects[key].object, "{key}");
        }
    }
}
