//! Applying one declared object to the cluster under the action table of seeds/000.
//!
//! ## Model
//!
//! The controller hands [`Applier::sync_object`] a [`Target`]: an object's identity, whether its
//! kind is declared ("Sync Declared"), the form Arbor would apply when git declares it
//! ("Resource Declared"), and the live object if the cluster holds one ("On Cluster"). The
//! decision is [`arbor_policy::sync::decide`]'s, never this module's: it only carries it out.
//!
//! - Create (row 4): server-side apply under the `arbor-gitsync` field manager **without**
//!   force: nothing is on the cluster, so nothing can be taken from anyone.
//! - Update (row 2): server-side apply **with** force. The live object carries the management
//!   label, so the table lets Arbor own every field it declares.
//! - Delete (row 5): a delete with the live object's uid and resourceVersion as preconditions,
//!   so an object whose label was removed after it was read is never deleted.
//! - Rows 1, 3, 6, 7 and 8 write nothing. In particular the applier compares before it writes, so
//!   a cluster that matches git sees no request but reads.
//!
//! The applied form ([`object::applied_form`]) is the declaration with the management label and
//! Arbor's source and declared-in annotations added, and without the fields the server owns.
//! Kinds are found through discovery ([`Discovery`]); a kind the cluster does not serve is an
//! [`ApplyError::KindNotServed`] for that kind alone.

mod discovery;
pub mod error;
pub mod object;
pub mod skimmed_reply;
mod write;

pub use discovery::{Discovery, ServedKind};
pub use error::ApplyError;
pub use write::{Applier, Outcome, Target};
