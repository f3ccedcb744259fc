//! # arbor-policy
//!
//! Every decision Arbor makes, as pure functions: no Kubernetes client, no async runtime, no
//! I/O. The controllers observe the cluster and git, ask this crate what to do, and act; the
//! webhook asks the same functions, so admission and reconciliation can never disagree.
//!
//! | module | specification |
//! |---|---|
//! | [`code`] | docs/error-codes.md: every stable error code (`ARB1xxx`-`ARB3xxx`) |
//! | [`git_url`] | the `spec.repository` URL grammar, read by the API's validation and gitsync's fetch |
//! | [`keys`] | DESIGN.md "Keys": the configurable key domain and the management label |
//! | [`sync`] | seeds/000: the management action table and the "resource matches" comparison |
//! | [`layout`] | seeds/000: hierarchical repositories, abstract namespaces, inheritance, selectors |
//! | [`ownership`] | seeds/002: the resource ownership matrix and both controller reconcile matrices |
//! | [`propagation`] | seeds/001 and seeds/003: namespace roles, propagation, copies, tree rules |
//! | [`observe`] | seeds/004: observer schemas, projection, comparison and the observer lifecycle |
//! | [`secret`] | issue #23.4: a Secret's payload is never copied outside Secret protection |
//!
//! Each module's documentation carries the table that maps every seed row and bullet to the
//! test that shows it.

pub mod code;
pub mod git_url;
pub mod interned;
pub mod keys;
pub mod layout;
pub mod object;
pub mod observe;
pub mod ownership;
pub mod propagation;
pub mod secret;
pub mod shards;
pub mod sync;
