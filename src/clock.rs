//! The wall clock, read by the I/O shell only (the pure core is handed the time it needs).

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
