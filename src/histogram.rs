//! A latency histogram for `/metrics`: fixed bucket bounds, atomics, and its Prometheus text.
//! Pure (the caller passes each duration in); the upstream's request latency and the server's
//! answer latency are both one.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The most bounds a histogram has (`+Inf` comes on top).
pub const MAX_BOUNDS: usize = 11;

/// Per-bucket counts (the last used slot is above every bound) and the sum of what was observed.
#[derive(Debug)]
pub struct Histogram {
    /// Upper bounds in seconds, ascending, at most [`MAX_BOUNDS`].
    bounds: &'static [f64],
    buckets: [AtomicU64; MAX_BOUNDS + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    /// An empty histogram with these upper bounds (seconds, ascending; at most [`MAX_BOUNDS`],
    /// checked at compile time where it is a `const`).
    pub const fn new(bounds: &'static [f64]) -> Histogram {
        assert!(bounds.len() <= MAX_BOUNDS, "too many histogram bounds");
        Histogram {
            bounds,
            buckets: [const { AtomicU64::new(0) }; MAX_BOUNDS + 1],
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Counts one observation.
    pub fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let slot = self
            .bounds
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(self.bounds.len());
        if let Some(b) = self.buckets.get(slot) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Appends the `_bucket` (cumulative, then `+Inf`), `_sum` and `_count` samples of `name`
    /// with the label `key="value"` (the family's `# HELP`/`# TYPE` lines are the caller's).
    pub fn render(&self, out: &mut String, name: &str, key: &str, value: &str) {
        let mut total = 0;
        for (le, b) in self.bounds.iter().zip(&self.buckets) {
            total += b.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{{key}=\"{value}\",le=\"{le}\"}} {total}"
            );
        }
        total += self
            .buckets
            .get(self.bounds.len())
            .map_or(0, |b| b.load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "{name}_bucket{{{key}=\"{value}\",le=\"+Inf\"}} {total}"
        );
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{key}=\"{value}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{{key}=\"{value}\"}} {total}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [f64; 3] = [0.001, 0.01, 1.0];

    #[test]
    fn buckets_are_cumulative_with_the_sum_and_count() {
        let h = Histogram::new(&BOUNDS);
        for micros in [500, 1_000, 5_000, 2_000_000] {
            h.observe(Duration::from_micros(micros));
        }
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "route", "list");
        assert_eq!(
            out,
            "x_seconds_bucket{route=\"list\",le=\"0.001\"} 2\n\
             x_seconds_bucket{route=\"list\",le=\"0.01\"} 3\n\
             x_seconds_bucket{route=\"list\",le=\"1\"} 3\n\
             x_seconds_bucket{route=\"list\",le=\"+Inf\"} 4\n\
             x_seconds_sum{route=\"list\"} 2.0065\n\
             x_seconds_count{route=\"list\"} 4\n"
        );
        assert_eq!(h.count(), 4);
    }
}
