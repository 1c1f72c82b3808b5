//! Client-side request pacing for `--kube-qps` / `--kube-burst`: a token bucket, pure (the
//! caller passes the time and does the sleeping).

use std::time::{Duration, Instant};

/// Token bucket for `--kube-qps` / `--kube-burst`. `qps <= 0` disables it.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` (at least 1) tokens refilled at `qps` per second.
    pub(crate) fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token: `None` if one was available, else how long to wait (the token is then
    /// reserved, so concurrent callers queue up).
    pub(crate) fn take(&mut self, now: Instant) -> Option<Duration> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return None;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst) - 1.0;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / self.qps))
    }
}
