//! # arbor-gitsync
//!
//! Keeps a cluster in the state that git declares. A source (GitTrack or ClusterGitTrack) goes
//! through three stages, each in its own module:
//!
//! 1. [`fetch`]: fetch the repository with git2 into the source's cache and check out the tree
//!    of one commit at its subPath into a directory.
//! 2. Parse: from that directory to the state it declares.
//!    - [`tree`] reads the `.yaml`, `.yml` and `.json` files (hidden entries and symbolic links
//!      are skipped, other files listed as skipped);
//!    - [`document`] parses each file: multi-document YAML with `serde-saphyr`, or JSON; a file
//!      that does not parse is `ARB1001` with its line;
//!    - [`source`] ties them together: [`source::load`] resolves the subPath (`ARB1006`,
//!      `ARB1007`), reads, parses, and hands the documents to the pure layout rules of
//!      [`arbor_policy::layout`] (Flat or Hierarchical).
//!
//!    The result is all or nothing: a [`DeclaredState`](arbor_policy::layout::DeclaredState)
//!    or every [`SourceError`](arbor_policy::layout::SourceError) found, each with its stable
//!    code, file and object (`docs/error-codes.md`). A source whose new commit fails keeps its
//!    last good state, so a broken commit can never delete anything.
//! 3. [`hydrate`]: render a declared state as the files `arborctl hydrate` writes, one per
//!    object, one directory per namespace plus `cluster/`.
//!
//! Applying the declared state (the management action table of seeds/000, the ownership matrix
//! of seeds/002) builds on these modules.

pub mod apply;
pub mod controller;
pub mod document;
pub mod error;
pub mod fetch;
pub mod grpc;
pub mod hydrate;
pub mod run;
pub mod source;
pub mod tree;
