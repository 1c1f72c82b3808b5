//! `Retry-After` (docs/SEMANTICS.md §7): parsing the header of a 429 or 5xx answer, the wait
//! it imposes on grid-wrapper's own next attempt at that request (capped, jittered upward only),
//! and the per-request gate that holds any caller to it. Pure: the time comes in as arguments;
//! the caller does the sleeping.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest wait a `Retry-After` imposes: a larger value (or a date further ahead) is taken
/// as this. An apiserver's APF asks for seconds; a value of hours is a misconfigured proxy, and
/// a node agent that stopped asking for that long would serve stale data for no reason.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Upward jitter added to a `Retry-After` wait, as a fraction of it (`1/JITTER_DIVISOR`): a
/// fleet told the same value does not come back in the same instant.
pub const JITTER_DIVISOR: u64 = 10;

/// Whether an answer with this HTTP code may carry a `Retry-After` that is honoured: 429 Too
/// Many Requests (APF) and 5xx (a server shutting down or not ready yet).
pub fn honoured_for(code: u16) -> bool {
    code == 429 || (500..600).contains(&code)
}

/// The wait a `Retry-After` value asks for, at most [`MAX_RETRY_AFTER`]: delta-seconds (digits
/// only, `0` allowed) or an HTTP-date (IMF-fixdate, RFC 9110 §5.6.7) relative to `now` (a date
/// already past is no wait). `None` for anything else (negative, fractional, empty, garbage):
/// the caller then keeps its own backoff.
pub fn parse(value: &[u8], now: SystemTime) -> Option<Duration> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        // Beyond u64 it is still "huge": the cap.
        let secs = text.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let at = parse_imf_fixdate(text)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)).min(MAX_RETRY_AFTER))
}

/// `wait` plus an upward jitter below `wait / JITTER_DIVISOR`, from `random` (any number; the
/// caller's randomness).
pub fn jittered(wait: Duration, random: u64) -> Duration {
    let span = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX) / JITTER_DIVISOR;
    wait + Duration::from_millis(random % span.max(1))
}

/// The wait before the next attempt after a failure: the backoff's `backoff` delay, or the
/// server's `retry_after` (jittered) when that is longer. The backoff sequence itself advanced
/// as for any failure, so it continues from there.
pub fn wait_after(backoff: Duration, retry_after: Option<Duration>, random: u64) -> Duration {
    match retry_after {
        Some(ra) => backoff.max(jittered(ra, random)),
        None => backoff,
    }
}

/// Seconds since the Unix epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn parse_imf_fixdate(s: &str) -> Option<u64> {
    let rest = s.get(3..)?.strip_prefix(", ")?;
    let mut parts = rest.split(' ');
    let (day, month, year, time, zone) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if parts.next().is_some() || zone != "GMT" || day.len() != 2 || year.len() != 4 {
        return None;
    }
    let day: u64 = digits(day)?;
    let year: u64 = digits(year)?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as u64 + 1;
    let mut hms = time.split(':');
    let (h, m, sec) = (
        digits(hms.next()?)?,
        digits(hms.next()?)?,
        digits(hms.next()?)?,
    );
    if hms.next().is_some() || h > 23 || m > 59 || sec > 60 || !(1..=31).contains(&day) {
        return None;
    }
    if year < 1970 {
        return Some(0);
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

fn digits(s: &str) -> Option<u64> {
    (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (`year >= 1970`).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).saturating_sub(719_468)
}

/// The time before which each request (keyed by [`key`]: its path, list or watch) may not be sent
/// again, set by a `Retry-After`. Every caller of the upstream client passes through it, so
/// discovery, the ServiceCIDR re-check and `grid-wrapper check` keep to it as the reflectors do.
#[derive(Debug, Default)]
pub struct Gate {
    until: HashMap<String, Instant>,
}

/// Most requests a [`Gate`] remembers: expired entries are dropped first; past it, the oldest.
const MAX_GATED: usize = 64;

impl Gate {
    /// Holds `key` until `until` (a later hold wins).
    pub fn hold(&mut self, key: &str, until: Instant, now: Instant) {
        self.until.retain(|_, t| *t > now);
        if self.until.len() >= MAX_GATED && !self.until.contains_key(key) {
            if let Some(oldest) = self
                .until
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone())
            {
                self.until.remove(&oldest);
            }
        }
        let t = self.until.entry(key.to_string()).or_insert(until);
        *t = (*t).max(until);
    }

    /// How long a request to `key` must still wait at `now` (`None`: it may go).
    pub fn wait(&self, key: &str, now: Instant) -> Option<Duration> {
        self.until
            .get(key)
            .map(|t| t.saturating_duration_since(now))
            .filter(|d| !d.is_zero())
    }
}

/// The gate's key of a request: its path, and whether it is a watch (a list and a watch of one
/// resource are two requests), without the rest of the query.
pub fn key(path_and_query: &str) -> String {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    format!("{}{path}", if watch { "WATCH " } else { "GET " })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix)
    }

    #[test]
    fn delta_seconds() {
        let now = at(1_000);
        assert_eq!(parse(b"3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse(b" 4 ", now), Some(Duration::from_secs(4)));
        assert_eq!(parse(b"0", now), Some(Duration::ZERO));
        assert_eq!(parse(b"60", now), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn huge_values_are_capped() {
        let now = at(1_000);
        assert_eq!(parse(b"61", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse(b"86400", now), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse(b"99999999999999999999999999", now),
            Some(MAX_RETRY_AFTER)
        );
        // A date a year ahead.
        assert_eq!(
            parse(b"Mon, 06 Nov 1995 08:49:37 GMT", at(784_111_777)),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn invalid_negative_or_fractional_values_are_not_honoured() {
        let now = at(1_000);
        for bad in [
            &b""[..],
            b"-1",
            b"-0",
            b"1.5",
            b"3s",
            b"soon",
            b"\xff\xfe",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sunday, 06-Nov-94 08:49:37 GMT",
            b"Sun, 32 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 25:49:37 GMT",
            b"Sun, 06 Foo 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse(bad, now), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn http_dates_relative_to_now() {
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777 (RFC 9110's example).
        let date = b"Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(
            parse(date, at(784_111_777 - 5)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(parse(date, at(784_111_777)), Some(Duration::ZERO));
        // Already past: no wait.
        assert_eq!(parse(date, at(784_111_777 + 100)), Some(Duration::ZERO));
        // Leap day, month boundaries.
        assert_eq!(
            parse_imf_fixdate("Thu, 29 Feb 2024 00:00:00 GMT"),
            Some(1_709_164_800)
        );
        assert_eq!(parse_imf_fixdate("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    }

    #[test]
    fn the_wait_is_jittered_upward_only_and_never_below_the_backoff() {
        let ra = Duration::from_secs(3);
        for r in [0, 1, 299, 300, 12_345, u64::MAX] {
            let w = jittered(ra, r);
            assert!(w >= ra && w < ra + ra / 10, "{w:?}");
        }
        assert_eq!(jittered(Duration::ZERO, 7), Duration::ZERO);
        let backoff = Duration::from_millis(800);
        assert_eq!(wait_after(backoff, None, 5), backoff);
        assert!(wait_after(backoff, Some(ra), 5) >= ra);
        assert_eq!(
            wait_after(Duration::from_secs(30), Some(ra), 5),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn codes_whose_retry_after_is_honoured() {
        assert!(honoured_for(429) && honoured_for(503) && honoured_for(500));
        assert!(!honoured_for(200) && !honoured_for(404) && !honoured_for(410));
    }

    #[test]
    fn the_gate_holds_a_request_until_its_time() {
        let t0 = Instant::now();
        let mut g = Gate::default();
        assert_eq!(g.wait("/api/v1/nodes", t0), None);
        g.hold("/api/v1/nodes", t0 + Duration::from_secs(3), t0);
        assert_eq!(
            g.wait("/api/v1/nodes", t0 + Duration::from_secs(1)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(g.wait("/api/v1/services", t0), None);
        assert_eq!(g.wait("/api/v1/nodes", t0 + Duration::from_secs(3)), None);
        // A shorter hold does not shorten a longer one.
        g.hold("/api/v1/nodes", t0 + Duration::from_secs(1), t0);
        assert!(g
            .wait("/api/v1/nodes", t0 + Duration::from_secs(2))
            .is_some());
        // Bounded.
        for i in 0..200 {
            g.hold(&format!("/k{i}"), t0 + Duration::from_secs(10), t0);
        }
        assert!(g.until.len() <= MAX_GATED);
        assert_eq!(
            key("/api/v1/nodes?resourceVersion=5&watch=true"),
            "WATCH /api/v1/nodes"
        );
        assert_eq!(key("/api/v1/nodes?limit=1"), "GET /api/v1/nodes");
        assert_eq!(key("/version"), "GET /version");
    }
}
