//! The admission rules, one module per concern. Each reads raw JSON through [`shape`] and asks
//! `arbor-policy` (or `arbor-api` for specs) for the decision; [`crate::reviewer::Policy`] chooses which
//! apply to a request.

pub mod drift;
pub mod namespaces;
pub mod ownership;
pub mod shape;
pub mod sources;
