//! # arbor-source
//!
//! A source is a directory of a repository (the tree of one commit at its subPath, or a
//! directory on an operator's disk) that declares objects. This crate reads it into the state
//! it declares and writes a declared state back out as files; arbor-gitsync does the first
//! after every fetch, and `arborctl vet`, `hydrate` and `diff` do both offline, so the
//! controller and the CLI read a repository the same way.
//!
//! - [`files`] reads the `.yaml`, `.yml` and `.json` files (hidden entries and symbolic links
//!   are skipped, other files listed as skipped);
//! - [`document`] parses each file: multi-document YAML with `serde-saphyr`, or JSON; a file
//!   that does not parse is `ARB1001` with its line;
//! - [`source`] ties them together: [`source::load`] resolves the subPath (`ARB1006`,
//!   `ARB1007`), reads, parses, and hands the documents to the pure layout rules of
//!   [`arbor_policy::layout`] (Flat or Hierarchical).
//!
//! The result is all or nothing: a [`DeclaredState`](arbor_policy::layout::DeclaredState) or
//! every [`SourceError`](arbor_policy::layout::SourceError) found, each with its stable code,
//! file and object (`docs/error-codes.md`). [`hydrate`] renders a declared state as the files
//! `arborctl hydrate` writes. Fetching the repository is arbor-gitsync's.

pub mod document;
pub mod error;
pub mod files;
pub mod hydrate;
pub mod source;

pub use error::{HydrateError, LoadError};
pub use source::{LoadOptions, load};
