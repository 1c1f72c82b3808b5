//! The snapshot writer's failure bookkeeping and its log texts. Pure: the writer passes in the
//! `Instant`s, the wall-clock time and what it found on the disk.
//!
//! A failure *episode* opens at the first failed write after a success (or since the start) and
//! ends at the next successful write. Its first failure is one WARN line that says whether a
//! previous snapshot is kept (and is what a restart would serve) or there is none; later
//! failures are DEBUG lines; the write that ends it is one INFO line with the count and the
//! duration. A failed write is retried no sooner than `--cache-write-interval`, backing off
//! (doubling) up to [`RETRY_CAP`] while the episode lasts, so a full disk is not hammered.

use std::fmt::Display;
use std::path::Path;
use std::time::{Duration, Instant};

use super::QUIET;

/// Longest wait between two failed writes of one episode (unless `--cache-write-interval` is
/// longer: that is the floor).
pub(crate) const RETRY_CAP: Duration = Duration::from_secs(300);

/// What a restart would find in the directory while the writes fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Previous {
    /// A valid snapshot of this node and upstream, written at `written_unix` (this process wrote
    /// it, or loaded it at startup): a restart would serve it.
    Kept {
        /// Its `written_unix_secs`.
        written_unix: u64,
    },
    /// A snapshot file that was ignored at startup (damaged, or of another node or upstream):
    /// a restart would ignore it again.
    Unusable,
    /// No snapshot file.
    None,
}

impl Previous {
    /// The clause of the WARN line about it.
    pub(crate) fn describe(self, now_unix: u64) -> String {
        match self {
            Previous::Kept { written_unix } => format!(
                "the previous snapshot (written {} s ago) is kept and is what a restart would serve",
                now_unix.saturating_sub(written_unix)
            ),
            Previous::Unusable => "there is no usable previous snapshot (the file there was ignored at startup): a restart now would start empty".to_string(),
            Previous::None => {
                "there is no previous snapshot: a restart now would start empty".to_string()
            }
        }
    }
}

/// The WARN line of an episode's first failure.
pub(crate) fn failure_warning(
    dir: &Path,
    err: &dyn Display,
    previous: Previous,
    now_unix: u64,
) -> String {
    format!(
        "cannot write the snapshot in {}: {err}; {}; retrying (further failures logged at DEBUG until a write succeeds)",
        dir.display(),
        previous.describe(now_unix)
    )
}

/// The line of a failure that is not the episode's first (DEBUG; INFO for the final write).
pub(crate) fn failure_repeated(
    why: &str,
    err: &dyn Display,
    failures: u32,
    lasted: Duration,
    previous: Previous,
    now_unix: u64,
) -> String {
    format!(
        "{why} snapshot not written: {err} ({}); {}",
        attempts(failures, lasted),
        previous.describe(now_unix)
    )
}

/// The INFO line of the write that ends an episode.
pub(crate) fn recovery_note(ended: Ended) -> String {
    format!(
        "snapshot written again after {}",
        attempts(ended.failures, ended.lasted)
    )
}

fn attempts(failures: u32, lasted: Duration) -> String {
    format!(
        "{failures} failed attempt{} over {:.1} s",
        if failures == 1 { "" } else { "s" },
        lasted.as_secs_f64()
    )
}

/// An episode that just ended: how many failures, over how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ended {
    /// Failed writes in the episode.
    pub(crate) failures: u32,
    /// From its first failure to the write that ended it.
    pub(crate) lasted: Duration,
}

/// The bookkeeping; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    /// Failed writes in the open episode; 0 = none open.
    count: u32,
    /// When the open episode began.
    since: Option<Instant>,
}

impl Failures {
    /// Records a failed write at `now`; `true` if it opens an episode (log it at WARN).
    pub(crate) fn failed(&mut self, now: Instant) -> bool {
        let first = self.count == 0;
        if first {
            self.since = Some(now);
        }
        self.count = self.count.saturating_add(1);
        first
    }

    /// Records a successful write at `now`: the episode it ends, if one was open.
    pub(crate) fn succeeded(&mut self, now: Instant) -> Option<Ended> {
        if self.count == 0 {
            return None;
        }
        let ended = Ended {
            failures: self.count,
            lasted: self.lasted(now),
        };
        *self = Failures::default();
        Some(ended)
    }

    /// Failed writes in the open episode (0: none open).
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// How long the open episode has lasted at `now` (zero when none is open).
    pub(crate) fn lasted(&self, now: Instant) -> Duration {
        self.since
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }

    /// Least time from one write attempt to the next: `min_gap` (`--cache-write-interval`)
    /// without failures; during an episode at least that and [`QUIET`], doubling with each
    /// failure up to [`RETRY_CAP`] (or `min_gap`, if longer).
    pub(crate) fn retry_gap(&self, min_gap: Duration) -> Duration {
        if self.count == 0 {
            return min_gap;
        }
        let doublings = (self.count - 1).min(16);
        min_gap
            .max(QUIET)
            .saturating_mul(1 << doublings)
            .min(RETRY_CAP.max(min_gap))
    }
}
