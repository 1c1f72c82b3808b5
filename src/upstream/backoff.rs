//! Capped exponential backoff with jitter and a reset timer (after kube-runtime's
//! `DefaultBackoff` + `ResetTimerBackoff`): 800 ms, ×2 per failure, capped at 30 s, each delay
//! jittered into [½, 1½) of its base (still capped), and back to 800 ms once 120 s pass without a
//! backoff being asked for. Pure std; the caller does the sleeping.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// First delay.
pub const INITIAL: Duration = Duration::from_millis(800);
/// Largest delay.
pub const MAX: Duration = Duration::from_secs(30);
/// Calm period after which the sequence restarts at [`INITIAL`].
pub const RESET_AFTER: Duration = Duration::from_secs(120);

/// Backoff state of one retry loop.
#[derive(Debug)]
pub struct Backoff {
    next_base: Duration,
    last: Option<Instant>,
    jitter: bool,
}

impl Backoff {
    /// The jittered sequence used in production.
    pub fn new() -> Self {
        Backoff {
            next_base: INITIAL,
            last: None,
            jitter: true,
        }
    }

    /// The bare sequence 0.8, 1.6, 3.2, … 30 s (tests, logs).
    pub fn without_jitter() -> Self {
        Backoff {
            jitter: false,
            ..Backoff::new()
        }
    }

    /// The delay to wait before the next attempt, given the current time.
    pub fn next_delay(&mut self, now: Instant) -> Duration {
        self.next_delay_after(now, now)
    }

    /// [`Backoff::next_delay`] for an attempt that began at `started` and failed at `now`: the
    /// calm period that restarts the sequence ends where the attempt began, so an attempt that
    /// runs long before it fails (a large list read to its bound) is no calm, and the delays
    /// between such attempts keep growing.
    pub fn next_delay_after(&mut self, started: Instant, now: Instant) -> Duration {
        if self
            .last
            .is_some_and(|t| started.saturating_duration_since(t) >= RESET_AFTER)
        {
            self.next_base = INITIAL;
        }
        self.last = Some(now);
        let base = self.next_base;
        self.next_base = (base * 2).min(MAX);
        if !self.jitter {
            return base;
        }
        let millis = u64::try_from(base.as_millis()).unwrap_or(u64::MAX);
        (Duration::from_millis(millis / 2 + random_below(millis.max(1)))).min(MAX)
    }

    /// Starts over at [`INITIAL`] (e.g. after a successful list).
    pub fn reset(&mut self) {
        self.next_base = INITIAL;
        self.last = None;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

/// A random number in `0..n` (`n > 0`), from std's per-process random hasher keys. Not for
/// cryptography; good enough for jitter and watch timeouts.
pub(crate) fn random_below(n: u64) -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() % n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_without_jitter() {
        let mut b = Backoff::without_jitter();
        let t0 = Instant::now();
        let got: Vec<u128> = (0..8)
            .map(|i| b.next_delay(t0 + Duration::from_secs(i)).as_millis())
            .collect();
        assert_eq!(got, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    }

    #[test]
    fn resets_after_calm_period_and_on_demand() {
        let mut b = Backoff::without_jitter();
        let t0 = Instant::now();
        b.next_delay(t0);
        b.next_delay(t0);
        assert_eq!(
            b.next_delay(t0 + Duration::from_secs(119)),
            Duration::from_millis(3200)
        );
        // 120 s after the last backoff: back to the start.
        assert_eq!(b.next_delay(t0 + Duration::from_secs(239)), INITIAL);
        assert_eq!(
            b.next_delay(t0 + Duration::from_secs(240)),
            Duration::from_millis(1600)
        );
        b.reset();
        assert_eq!(b.next_delay(t0 + Duration::from_secs(241)), INITIAL);
    }

    #[test]
    fn attempts_that_fail_after_a_long_time_do_not_restart_the_sequence() {
        // Each attempt (a list) runs 150 s before it fails, right after the previous delay.
        let mut b = Backoff::without_jitter();
        let mut t = Instant::now();
        let mut got = Vec::new();
        for _ in 0..6 {
            let started = t;
            t += Duration::from_secs(150);
            let d = b.next_delay_after(started, t);
            got.push(d.as_millis());
            t += d;
        }
        assert_eq!(got, [800, 1600, 3200, 6400, 12800, 25600]);
        // A calm period before an attempt still restarts it.
        let started = t + RESET_AFTER;
        assert_eq!(b.next_delay_after(started, started), INITIAL);
    }

    #[test]
    fn jitter_stays_within_half_to_one_and_a_half_and_the_cap() {
        let mut b = Backoff::new();
        let t0 = Instant::now();
        for base in [800u64, 1600, 3200, 6400, 12800, 25600, 30000, 30000] {
            let d = b.next_delay(t0).as_millis() as u64;
            assert!(d >= base / 2 && d < base + base / 2, "{d} vs {base}");
            assert!(d <= 30_000);
        }
    }
}
