//! List (and map) semantics of a kind: the part of its schema that patching and apply need.
//!
//! kube-apiserver merges lists according to the schema: in server-side apply a list is *atomic*
//! (replaced and owned as a whole; the default when the schema says nothing), a *set* of scalars,
//! or a *map* whose elements are identified by key fields. Strategic merge patch uses the Go
//! struct tags `patchStrategy`/`patchMergeKey` of built-in types instead, which mostly but not
//! always agree (container ports merge by `containerPort` in a strategic merge patch but are keyed
//! by `containerPort`+`protocol` in apply). A [`Schema`] node carries both.

use std::collections::BTreeMap;

use serde_json::Value;

/// How server-side apply treats a list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// Replaced and owned as a single value.
    #[default]
    Atomic,
    /// A set of scalars; each value is owned separately.
    Set,
    /// Elements are identified (and owned) by these key fields.
    Map(Vec<String>),
}

/// How strategic merge patch treats a list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MergeStrategy {
    /// The patch's list replaces the live list.
    #[default]
    Replace,
    /// Elements are objects merged by this field.
    MergeByKey(String),
    /// Scalars: the patch's values are added to the live ones.
    MergeValues,
}

/// Schema of one position in an object.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// Known fields of an object.
    pub fields: BTreeMap<String, Schema>,
    /// Schema of the values of a map (fields not listed in `fields`).
    pub values: Option<Box<Schema>>,
    /// Schema of list elements.
    pub items: Option<Box<Schema>>,
    /// Apply semantics when this position is a list.
    pub list: ListType,
    /// Strategic merge semantics when this position is a list.
    pub strategy: MergeStrategy,
    /// `x-kubernetes-map-type: atomic`: the map is replaced and owned as a whole.
    pub atomic_map: bool,
    /// Schema default, used for list-map keys an element leaves out (as `protocol: TCP`).
    pub default: Option<Value>,
}

/// Schema of everything nobody described: atomic lists, granular maps.
static UNDESCRIBED: Schema = Schema {
    fields: BTreeMap::new(),
    values: None,
    items: None,
    list: ListType::Atomic,
    strategy: MergeStrategy::Replace,
    atomic_map: false,
    default: None,
};

impl Schema {
    /// The schema of field (or map key) `name` of this object.
    pub fn field(&self, name: &str) -> &Schema {
        self.fields
            .get(name)
            .or(self.values.as_deref())
            .unwrap_or(&UNDESCRIBED)
    }

    /// The schema of this list's elements.
    pub fn item(&self) -> &Schema {
        self.items.as_deref().unwrap_or(&UNDESCRIBED)
    }

    /// Adds (or replaces) a known field.
    pub fn with_field(mut self, name: &str, schema: Schema) -> Schema {
        self.fields.insert(name.to_owned(), schema);
        self
    }

    /// A list whose elements follow `item`.
    pub fn list_of(item: Schema, list: ListType, strategy: MergeStrategy) -> Schema {
        Schema {
            items: Some(Box::new(item)),
            list,
            strategy,
            ..Schema::default()
        }
    }

    /// A list of objects merged by `key` in both apply and strategic merge patch.
    pub fn keyed_list(key: &str, item: Schema) -> Schema {
        Schema::list_of(
            item,
            ListType::Map(vec![key.to_owned()]),
            MergeStrategy::MergeByKey(key.to_owned()),
        )
    }

    /// A schema with a default value.
    pub fn defaulting(value: Value) -> Schema {
        Schema {
            default: Some(value),
            ..Schema::default()
        }
    }
}

/// List merge semantics of one kind; see the module documentation.
#[derive(Debug, Clone)]
pub struct ListSemantics {
    pub(crate) root: Schema,
    pub(crate) strategic_merge: bool,
    pub(crate) status_subresource: bool,
}

impl ListSemantics {
    /// Semantics of a built-in kind (strategic merge patch allowed). Kinds missing from the table
    /// get kube's defaults: every list atomic.
    pub fn for_builtin(group: &str, kind: &str) -> ListSemantics {
        let (root, status_subresource) = super::builtin::schema_for(group, kind);
        ListSemantics {
            root,
            strategic_merge: true,
            status_subresource,
        }
    }

    /// Semantics of a custom resource from its CRD's `openAPIV3Schema` (a whole CRD version
    /// object with a `schema.openAPIV3Schema` is accepted too). Strategic merge patch is refused
    /// for custom resources, as kube does. Whether the kind has a status subresource is guessed
    /// from the schema declaring a `status` property; call
    /// [`with_status_subresource`](Self::with_status_subresource) with the CRD's
    /// `subresources.status` to state it.
    pub fn from_openapi_schema(schema: &Value) -> ListSemantics {
        let mut root = super::openapi::read_schema(schema);
        // A CRD schema may not describe metadata beyond name; kube types it as ObjectMeta.
        root.fields
            .insert("metadata".to_owned(), super::builtin::object_meta());
        let status_subresource = root.fields.contains_key("status");
        ListSemantics {
            root,
            strategic_merge: false,
            status_subresource,
        }
    }

    /// States whether the kind has a `/status` subresource: then apply to the main resource
    /// ignores `.status`, and apply to `/status` ignores everything else.
    pub fn with_status_subresource(mut self, has_status: bool) -> ListSemantics {
        self.status_subresource = has_status;
        self
    }

    /// Whether the kind has a `/status` subresource.
    pub fn has_status_subresource(&self) -> bool {
        self.status_subresource
    }
}
