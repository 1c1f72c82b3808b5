//! The wall clock, read by the I/O shell only (the pure core is handed the time it needs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Wall-clock seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How often [`sleep_until`] looks at its stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Sleeps until `at`, or until `stop` is set (looked at every 100 ms): the wait between two polls
/// of a poller thread that must end promptly at shutdown.
pub fn sleep_until(at: Instant, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(STOP_POLL.min(left));
    }
}
