//! Drift of git-managed objects, reported to arbor-gitsync.
//!
//! Objects carrying the management label belong to gitsync, which knows what git declares; the
//! observer only notices that they changed and says so at once, so gitsync re-applies without
//! waiting for its next poll. The pipeline:
//!
//! * [`watch`]: one watch per configured kind, label-selected; each change of an object's
//!   content (everything but `status` and the metadata the server writes) becomes a
//!   [`DriftEvent`](arbor_proto::v1::DriftEvent) with the paths that changed, found with
//!   `arbor_policy::sync::compare`.
//! * [`debounce`]: events of one object within a short window are coalesced into one.
//! * [`report`]: `SyncService.ReportDrift`, retried with exponential backoff while gitsync is
//!   unreachable.

pub mod debounce;
pub mod report;
pub mod watch;
