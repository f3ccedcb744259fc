//! (crate docs being written)

pub mod fetch;
