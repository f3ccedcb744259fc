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
use super::unique::insert_unique;
use crate::code::ErrorCode;
use crate::object::{GroupKind, ObjectKey};

/// Validates a flat tree. Any error means no declared state at all.
pub fn parse_flat(files: &[SourceFile]) -> Result<DeclaredState, Vec<SourceError>> {
    let (mut state, placed) = place(files)?;
    for Placed {
        key,
        file,
        location,
    } in placed
    {
        let declared =
            DeclaredObject::as_written(&files[file].documents[location.document], &location);
        state.objects.insert(key, declared);
    }
    Ok(state)
}

/// [`parse_flat`], taking the files: each object is moved into the state, so the tree's
/// documents and the state are never held side by side (twice the memory of every object while
/// a large source is parsed).
pub fn parse_flat_files(mut files: Vec<SourceFile>) -> Result<DeclaredState, Vec<SourceError>> {
    let (mut state, placed) = place(&files)?;
    for Placed {
        key,
        file,
        location,
    } in placed
    {
        let object = std::mem::take(&mut files[file].documents[location.document]);
        let declared = DeclaredObject {
            object,
            source: location,
            inherited_from: None,
        };
        state.objects.insert(key, declared);
    }
    Ok(state)
}

/// Where a valid object of a flat tree is: its key, its file's index and its location.
struct Placed {
    key: ObjectKey,
    file: usize,
    location: Location,
}

/// The state of a valid flat tree without its objects, and where each object is.
fn place(files: &[SourceFile]) -> Result<(DeclaredState, Vec<Placed>), Vec<SourceError>> {
    let (objects, mut errors) = identify(files);
    if objects.is_empty() && errors.is_empty() {
        return Err(vec![empty_source()]);
    }
    let mut seen = BTreeMap::new();
    for object in &objects {
        let key = ObjectKey {
            group_kind: object.gvk.group_kind(),
            namespace: crate::object::namespace(object.value).map(Into::into),
            name: object.name.as_str().into(),
        };
        insert_unique(&mut seen, key, object, &mut errors);
    }
    if !errors.is_empty() {
        return Err(sorted(errors));
    }
    let mut state = DeclaredState {
        layout: Layout::Flat,
        ..DeclaredState::default()
    };
    let mut placed = Vec::with_capacity(seen.len());
    for (key, object) in seen {
        state
            .kinds
            .entry(key.group_kind.clone())
            .or_insert_with(|| DeclaredKind::implied(key.group_kind.clone()));
        if key.group_kind == GroupKind::new("", "Namespace") {
            state.namespaces.insert(key.name.to_string());
        }
        placed.push(Placed {
            key,
            file: object.file,
            location: object.location.clone(),
        });
    }
    Ok((state, placed))
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
}
