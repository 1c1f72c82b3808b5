//! What the operator's endpoints on `--metrics-bind-address` (`/readyz`, `/metrics`,
//! `/debug/state`) report beyond the cache itself: handed to the health listener at startup and
//! read by each page's renderer.

use std::sync::Arc;

/// What the health listener reports beyond the cache itself.
#[derive(Debug, Default)]
pub struct Extras {
    /// Write time (Unix seconds) of the snapshot restored at startup, if one was.
    pub snapshot_written: Option<u64>,
    /// The snapshot writer's counters, with `--cache-dir`.
    pub writer: Option<Arc<crate::persist::WriterStats>>,
    /// `--debug`: serve `/debug/state`.
    pub debug: bool,
}
