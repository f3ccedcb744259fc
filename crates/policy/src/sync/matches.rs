//! "Resource Matches" (seeds/000): does the object on the cluster match the one declared in git?
//!
//! The comparison uses **declared-subset** semantics, because the API server and other
//! controllers legitimately add to every object Arbor applies:
//!
//! - every field the declaration sets must be present on the live object with an equal value;
//! - fields only the live object has are ignored (defaults, `status`, labels and annotations
//!   added by the server, kubectl or other controllers), so `status` is compared only when it is
//!   declared;
//! - lists are compared element by element **at the same index**, each declared element being a
//!   subset of the live element at that index (so server-defaulted fields inside a container are
//!   ignored), and the **lengths must be equal**: in Kubernetes schemas a list is usually atomic,
//!   and an element added on the cluster (an extra rule in a Role, an extra subject in a
//!   RoleBinding) is exactly the drift a policy system must see;
//! - a declared `null`, empty list or empty map means "absent": it matches a missing or null
//!   live field (Kubernetes drops empty fields), and a declared map missing on the cluster is
//!   reported field by field;
//! - numbers compare by value, so `1` matches `1.0`.
//!
//! Some declared fields are never compared, even when a declaration carries them (as it does when
//! it was exported with `kubectl get -o yaml`): the fields the server owns
//! ([`SERVER_OWNED_METADATA`]), the management label itself (Arbor sets it; the declaration may
//! or may not carry it), and annotations that tools write for their own bookkeeping
//! ([`TOOL_ANNOTATIONS`]).
//!
//! When the Sync gives `compareFields`, only those paths of the declaration are compared, with
//! the same rules below each path; a path the declaration does not set is not compared.
//!
//! A known limit of subset semantics: a field removed from git but still on the cluster is not a
//! difference. Server-side apply removes such a field at the next apply Arbor makes, because
//! Arbor's field manager owned it.
//!
//! The result is the list of differing paths, not a bool, so drift reports and `Explain` can say
//! what differs.

use serde_json::Value;

use super::path::{FieldPath, InvalidFieldPath, PathSegment};
use crate::keys::ManagementLabel;

/// Metadata fields that the API server fills in and owns.
pub const SERVER_OWNED_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "managedFields",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// Annotations that tools write about an object rather than as part of it.
pub const TOOL_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
];

/// Which fields of a declaration are compared: a Sync's `compareFields`, or all it declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CompareFields {
    /// Every declared field (the Sync gives no `compareFields`).
    #[default]
    AllDeclared,
    /// Only these paths; never empty.
    Only(Vec<FieldPath>),
}

impl CompareFields {
    /// Reads a Sync's `compareFields`; an empty list means every declared field.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, InvalidFieldPath> {
        if entries.is_empty() {
            return Ok(Self::AllDeclared);
        }
        let paths = entries
            .iter()
            .map(|entry| entry.as_ref().parse())
            .collect::<Result<Vec<FieldPath>, _>>()?;
        Ok(Self::Only(paths))
    }

    /// The roots to compare from, without any root that lies below another (it would be
    /// compared twice).
    fn roots(&self) -> Vec<FieldPath> {
        match self {
            Self::AllDeclared => vec![FieldPath::root()],
            Self::Only(paths) => {
                let mut roots: Vec<FieldPath> = paths.clone();
                roots.sort();
                roots.dedup_by(|later, earlier| later.starts_with(earlier));
                roots
            }
        }
    }
}

/// One way in which a live object does not match its declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// The declaration sets the field; the live object lacks it.
    Missing { path: FieldPath, declared: Value },
    /// Both set the field, to different values (or to values of different types).
    Differs {
        path: FieldPath,
        declared: Value,
        live: Value,
    },
    /// Both set the list, with different lengths.
    LengthDiffers {
        path: FieldPath,
        declared: usize,
        live: usize,
    },
}

impl Difference {
    pub fn path(&self) -> &FieldPath {
        match self {
            Self::Missing { path, .. }
            | Self::Differs { path, .. }
            | Self::LengthDiffers { path, .. } => path,
        }
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing { path, declared } => {
                write!(f, "{path}: declared {declared}, missing on the cluster")
            }
            Self::Differs {
                path,
                declared,
                live,
            } => write!(f, "{path}: declared {declared}, cluster has {live}"),
            Self::LengthDiffers {
                path,
                declared,
                live,
            } => write!(
                f,
                "{path}: declared a list of length {declared}, cluster has length {live}"
            ),
        }
    }
}

/// The outcome of comparing a declaration with its live object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    pub differences: Vec<Difference>,
}

impl Comparison {
    /// "Resource Matches" in the action table.
    pub fn matches(&self) -> bool {
        self.differences.is_empty()
    }

    /// The paths that differ, for drift reports.
    pub fn paths(&self) -> impl Iterator<Item = &FieldPath> {
        self.differences.iter().map(Difference::path)
    }
}

/// Compares `declared` with `live` under declared-subset semantics (see the module docs).
pub fn compare(
    declared: &Value,
    live: &Value,
    fields: &CompareFields,
    label: &ManagementLabel,
) -> Comparison {
    let walker = Walker {
        label_key: &label.key,
    };
    let mut differences = Vec::new();
    for root in fields.roots() {
        if let Some(declared_at_root) = value_at(declared, &root) {
            let mut path: Vec<Step<'_>> = root.segments().iter().map(Step::of).collect();
            walker.walk(
                &mut path,
                declared_at_root,
                value_at(live, &root),
                &mut differences,
            );
        }
    }
    Comparison { differences }
}

/// The differences a change from `old` to `new` introduces against `declared`: those of `new`
/// that `old` did not have (a field `old` matched, or held at another value). A change that
/// leaves earlier drift as it was, or moves the object back towards git, introduces none, so
/// an object that drifted while nothing guarded it can still be repaired by hand. Without an
/// `old` (a create) every difference of `new` is introduced.
pub fn introduced(
    declared: &Value,
    old: Option<&Value>,
    new: &Value,
    fields: &CompareFields,
    label: &ManagementLabel,
) -> Vec<Difference> {
    let before = old
        .map(|old| compare(declared, old, fields, label).differences)
        .unwrap_or_default();
    compare(declared, new, fields, label)
        .differences
        .into_iter()
        .filter(|difference| !before.contains(difference))
        .collect()
}

/// The value at `path`, if every step exists.
pub fn value_at<'a>(value: &'a Value, path: &FieldPath) -> Option<&'a Value> {
    path.segments()
        .iter()
        .try_fold(value, |value, segment| match segment {
            PathSegment::Key(key) => value.get(key.as_str()),
            PathSegment::Index(index) => value.get(*index),
        })
}

/// One step of the path being walked, borrowed from the declaration (or the root it starts
/// from): a round compares every object, and a path is made only for a difference.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

impl<'a> Step<'a> {
    fn of(segment: &'a PathSegment) -> Self {
        match segment {
            PathSegment::Key(key) => Self::Key(key),
            PathSegment::Index(index) => Self::Index(*index),
        }
    }
}

fn field_path(steps: &[Step<'_>]) -> FieldPath {
    steps
        .iter()
        .map(|step| match step {
            Step::Key(key) => PathSegment::Key((*key).to_owned()),
            Step::Index(index) => PathSegment::Index(*index),
        })
        .collect::<Vec<_>>()
        .into()
}

struct Walker<'l> {
    /// The management label's key, never compared.
    label_key: &'l str,
}

impl Walker<'_> {
    /// Whether `path` is, or lies below, a field that is never compared: the metadata the
    /// server owns ([`SERVER_OWNED_METADATA`]), the tools' annotations ([`TOOL_ANNOTATIONS`])
    /// and the management label.
    fn never_compared(&self, path: &[Step<'_>]) -> bool {
        match path {
            [
                Step::Key("metadata"),
                Step::Key("annotations"),
                Step::Key(key),
                ..,
            ] => TOOL_ANNOTATIONS.contains(key),
            [
                Step::Key("metadata"),
                Step::Key("labels"),
                Step::Key(key),
                ..,
            ] => *key == self.label_key,
            [Step::Key("metadata"), Step::Key(field), ..] => SERVER_OWNED_METADATA.contains(field),
            _ => false,
        }
    }

    /// Compares below `path`: `declared` with `live`, the values there. `path` is as it was when
    /// this returns.
    fn walk<'a>(
        &self,
        path: &mut Vec<Step<'a>>,
        declared: &'a Value,
        live: Option<&Value>,
        out: &mut Vec<Difference>,
    ) {
        if self.never_compared(path) {
            return;
        }
        // Kubernetes does not tell an absent field from a null one, nor (with `omitempty`) from
        // an empty list or map.
        let live = live.filter(|live| !live.is_null());
        match (declared, live) {
            (Value::Null, None) => {}
            (Value::Array(declared), None) if declared.is_empty() => {}
            // Descend so that each missing field is reported, and ignored ones are not.
            (Value::Object(declared), None) => {
                for (key, declared_field) in declared {
                    path.push(Step::Key(key));
                    self.walk(path, declared_field, None, out);
                    path.pop();
                }
            }
            (_, None) => out.push(Difference::Missing {
                path: field_path(path),
                declared: declared.clone(),
            }),
            (Value::Object(declared), Some(Value::Object(live))) => {
                for (key, declared_field) in declared {
                    path.push(Step::Key(key));
                    self.walk(path, declared_field, live.get(key), out);
                    path.pop();
                }
            }
            (Value::Array(declared), Some(Value::Array(live))) => {
                if declared.len() != live.len() {
                    out.push(Difference::LengthDiffers {
                        path: field_path(path),
                        declared: declared.len(),
                        live: live.len(),
                    });
                }
                for (index, (declared_element, live_element)) in
                    declared.iter().zip(live).enumerate()
                {
                    path.push(Step::Index(index));
                    self.walk(path, declared_element, Some(live_element), out);
                    path.pop();
                }
            }
            (declared, Some(live)) if !scalars_equal(declared, live) => {
                out.push(Difference::Differs {
                    path: field_path(path),
                    declared: declared.clone(),
                    live: live.clone(),
                });
            }
            (_, Some(_)) => {}
        }
    }
}

fn scalars_equal(declared: &Value, live: &Value) -> bool {
    match (declared, live) {
        // YAML `1` and JSON `1.0` are the same number; integers compare exactly so that large
        // values are not rounded through f64.
        (Value::Number(d), Value::Number(l)) if d.is_f64() || l.is_f64() => {
            d.as_f64() == l.as_f64()
        }
        _ => declared == live,
    }
}
