//! The declared state as gitsync keeps it: from one commit's parse until the next commit's.
//!
//! ## Model
//!
//! A source's last good state ([`GoodState`](super::registry::GoodState)) is kept for its
//! whole life on this replica: rounds on the same commit plan from it, the records of a round
//! make applied forms from it ([`ObjectRecord::desired`](super::registry::ObjectRecord)), and
//! the gRPC service answers from those. A parsed object (a `serde_json::Value` of ordered maps)
//! costs over a kilobyte even for a small ConfigMap, and with every object of every source kept
//! it was the largest part of gitsync's memory. So each object is held as its JSON text
//! ([`HeldObject`]), about a tenth of that, and parsed again where its content is read: when its
//! applied form is made, at most a few at a time per round. What planning reads of every object
//! (its group, version and kind, and the namespace it declares) is read once, when the state
//! is taken in, and kept beside the text.
//!
//! The text is the object exactly: a value written as JSON and read back is the same value
//! (ordered keys in their order, integers as they were). Floating-point numbers are the
//! exception: serde_json, as this workspace builds it (without `float_roundtrip`), can read
//! a 17-digit decimal back one step off, so an object holding any is kept parsed instead. Such
//! objects are rare in manifests, and they are then applied exactly as declared.

use arbor_policy::layout::{DeclaredObject, DeclaredState, Location};
use arbor_policy::object::{self, GroupVersionKind, Interned};
use serde_json::Value;

/// A declared state whose objects are held as [`HeldObject`]s.
pub type HeldState = DeclaredState<HeldObject>;

/// One declared object, held as its JSON text (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct HeldObject {
    form: HeldForm,
    /// Its group, version and kind; `None` when it names none (the layouts refuse such an
    /// object, so a state holds none).
    pub gvk: Option<GroupVersionKind>,
    /// Its `metadata.namespace`, as [`object::namespace`] reads it.
    pub namespace: Option<Interned>,
    /// The file and document it was declared in.
    pub source: Location,
    /// For an object inherited from an abstract namespace, that namespace's directory.
    pub inherited_from: Option<String>,
}

/// How an object's content is held.
#[derive(Debug, Clone, PartialEq)]
enum HeldForm {
    /// Its JSON text.
    Text(Box<str>),
    /// Parsed, for an object with a floating-point number (see the module docs).
    Parsed(Box<Value>),
}

impl HeldObject {
    pub fn hold(declared: DeclaredObject) -> Self {
        let gvk = object::gvk(&declared.object).ok();
        let namespace = object::namespace(&declared.object).map(Interned::new);
        let form = if has_float(&declared.object) {
            HeldForm::Parsed(Box::new(declared.object))
        } else {
            let text = serde_json::to_string(&declared.object)
                .expect("a JSON value is always written as JSON text");
            HeldForm::Text(text.into_boxed_str())
        };
        Self {
            form,
            gvk,
            namespace,
            source: declared.source,
            inherited_from: declared.inherited_from,
        }
    }

    /// The object, exactly as it was declared.
    pub fn object(&self) -> Value {
        match &self.form {
            // The text was written from a value that the parsers of sources (YAML at most 64
            // levels deep, JSON at most 128) produced, so it reads back within serde_json's
            // nesting limit.
            HeldForm::Text(text) => {
                serde_json::from_str(text).expect("the text was written from a JSON value")
            }
            HeldForm::Parsed(object) => Value::clone(object),
        }
    }
}

/// Whether `value` holds a number that is neither a signed nor an unsigned 64-bit integer.
fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(number) => number.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(fields) => fields.values().any(has_float),
        Value::Null | Value::Bool(_) | Value::String(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared(object: Value) -> DeclaredObject {
        DeclaredObject {
            object,
            source: Location {
                path: "apps/settings.yaml".into(),
                document: 2,
            },
            inherited_from: Some("namespaces/online".into()),
        }
    }

    #[test]
    fn a_held_object_is_the_declared_object_exactly() {
        let object = json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "settings", "namespace": "shop", "labels": {"z": "1", "a": "2"}},
            "data": {"é": "\u{1F600}\n\"", "b": "1"},
            "numbers": [1, -2, u64::MAX, i64::MIN, true, null],
        });
        let held = HeldObject::hold(declared(object.clone()));
        let back = held.object();
        assert_eq!(back, object);
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&object).unwrap(),
            "keys keep their declared order"
        );
        assert_eq!(held.source.path, "apps/settings.yaml");
        assert_eq!(held.source.document, 2);
        assert_eq!(held.inherited_from.as_deref(), Some("namespaces/online"));
    }

    /// 17-digit decimals and large exponents that serde_json's default float parser reads
    /// back one step off from their shortest text.
    #[test]
    fn an_object_with_floats_comes_back_exactly() {
        let object = json!({
            "apiVersion": "example.com/v1", "kind": "Model",
            "metadata": {"name": "m", "namespace": "shop"},
            "spec": {"x": 0.422_658_316_773_075_6_f64, "y": 2.15838e-20_f64,
                     "more": [2.5, 1e300, -0.0, 0.1]},
        });
        let held = HeldObject::hold(declared(object.clone()));
        let back = held.object();
        assert_eq!(back, object);
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&object).unwrap()
        );
    }

    #[test]
    fn what_planning_reads_is_kept_beside_the_text() {
        let held = HeldObject::hold(declared(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
        })));
        let gvk = held.gvk.as_ref().expect("it names its kind");
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("apps", "v1", "Deployment")
        );
        assert_eq!(held.namespace.as_deref(), Some("shop"));

        let unnamed = HeldObject::hold(declared(json!({
            "kind": "ConfigMap", "metadata": {"name": "a", "namespace": ""},
        })));
        assert_eq!(unnamed.gvk, None, "no apiVersion");
        assert_eq!(unnamed.namespace, None, "an empty namespace is none");
    }

    #[test]
    fn a_held_state_keeps_every_key_kind_and_namespace() {
        let files = [arbor_policy::layout::SourceFile {
            path: "all.yaml".into(),
            documents: vec![
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "a", "namespace": "shop"}, "data": {"k": "v"}}),
            ],
        }];
        let parsed = arbor_policy::layout::parse(arbor_policy::layout::Layout::Flat, &files)
            .expect("a valid flat tree");
        let held = parsed.clone().hold_with(HeldObject::hold);
        assert_eq!(held.layout, parsed.layout);
        assert_eq!(held.kinds, parsed.kinds);
        assert_eq!(held.namespaces, parsed.namespaces);
        assert!(held.objects.keys().eq(parsed.objects.keys()));
        for (key, object) in &parsed.objects {
            assert_eq!(held.objects[key].object(), object.object, "{key}");
        }
    }
}
