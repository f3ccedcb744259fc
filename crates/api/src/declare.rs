//! `arbor_kind!`: declares the spec struct of one Arbor kind with the CRD attributes every kind
//! shares (group, version, category, status subresource), so each kind states only what is its
//! own: kind, scope, short name, description, printer columns and fields.

/// Expands to a `#[derive(CustomResource)]` spec struct in group `arbor.dev`, version
/// `v1alpha1`, category `arbor`. Attributes written before `struct` (docs, `serde`, extra
/// derives) are kept; they follow the derive, as derive helpers must.
macro_rules! arbor_kind {
    (
        $(#[$meta:meta])*
        pub struct $spec:ident for $kind:tt {
            $(root: $root:tt,)?
            $(scope: $scope:ident,)?
            status: $status:tt,
            shortname: $short:tt,
            doc: $doc:tt,
            columns: [$($column:tt),* $(,)?] $(,)?
        }
        { $($fields:tt)* }
    ) => {
        // Every printer column repeats `type_ = "..."`, which clippy mistakes for a repeated
        // attribute.
        #[allow(clippy::duplicated_attributes)]
        #[derive(
            kube::CustomResource,
            serde::Serialize,
            serde::Deserialize,
            Clone,
            Debug,
            PartialEq,
            schemars::JsonSchema
        )]
        #[kube(
            group = "arbor.dev",
            version = "v1alpha1",
            kind = $kind,
            $(root = $root,)?
            $($scope,)?
            status = $status,
            shortname = $short,
            category = "arbor",
            doc = $doc,
            $(printcolumn $column),*
        )]
        $(#[$meta])*
        pub struct $spec { $($fields)* }
    };
}
