//! The simulator loaded like an apiserver (`--max-in-flight`, `--max-per-second`,
//! `--retry-after`, `POST /sim/load`): API Priority and Fairness' answer to too much work (429
//! `TooManyRequests` with `Retry-After` and a Status carrying `details.retryAfterSeconds`) when
//! more than N short requests are in flight, when more than N requests arrived in the current
//! second, or to the next N requests; and a "shutting down" apiserver's 503 with `Retry-After`.
//! Watches are long-running requests: like an apiserver's `--max-requests-inflight`, they are
//! not counted in flight, but a watch start is refused while the server is over its limit.
//! Counters for the benches (`GET /sim/load`): requests and refusals per second of wall time,
//! totals. The decision is pure given the counters and the time passed in.

use grid_wrapper::k8s::status::ApiError;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Seconds of per-second counts kept (the oldest dropped first).
pub const MAX_SECONDS_KEPT: usize = 3600;
/// Largest `retryAfter` / `shuttingDown` accepted, in seconds.
pub const MAX_LOAD_SECS: u64 = 3600;

/// How the server is loaded (all off by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// 429 when a short request would make more than this many in flight.
    pub max_in_flight: Option<usize>,
    /// 429 when more than this many requests arrived in the current second.
    pub max_per_second: Option<u64>,
    /// 429 to this many next requests.
    pub next: u64,
    /// The `Retry-After` sent, in seconds (default 1).
    pub retry_after: u64,
    /// 503 with `Retry-After` to every request until then.
    pub shutting_down_until: Option<Instant>,
}

/// What to do with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Serve,
    /// 429 with this `Retry-After`.
    TooMany(u64),
    /// 503 with this `Retry-After`.
    ShuttingDown(u64),
}

/// One second's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Second {
    unix: u64,
    requests: u64,
    throttled: u64,
    unavailable: u64,
}

/// The load state shared by the connection threads.
#[derive(Debug)]
pub struct Load {
    settings: Mutex<Settings>,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    throttled: AtomicU64,
    unavailable: AtomicU64,
    seconds: Mutex<VecDeque<Second>>,
}

impl Default for Load {
    fn default() -> Self {
        Load::new(Settings {
            retry_after: 1,
            ..Settings::default()
        })
    }
}

/// A short request in flight: counted until dropped.
pub struct InFlight<'a>(Option<&'a AtomicUsize>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            n.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Load {
    /// A load model with these settings.
    pub fn new(settings: Settings) -> Self {
        Load {
            settings: Mutex::new(settings),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            unavailable: AtomicU64::new(0),
            seconds: Mutex::new(VecDeque::new()),
        }
    }

    /// Decides one request arriving at `now` (`unix`: its wall-clock second); `long_running`:
    /// a watch. A request to serve that is not long-running is counted in flight until the
    /// guard drops.
    pub fn admit(&self, long_running: bool, now: Instant, unix: u64) -> (Verdict, InFlight<'_>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let this_second = self.count_second(unix, |s| s.requests += 1);
        let verdict = {
            let mut st = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
            let in_flight = self.in_flight.load(Ordering::SeqCst);
            if st.shutting_down_until.is_some_and(|t| now < t) {
                Verdict::ShuttingDown(st.retry_after)
            } else if st.next > 0 {
                st.next -= 1;
                Verdict::TooMany(st.retry_after)
            } else if st.max_in_flight.is_some_and(|m| in_flight >= m)
                || st.max_per_second.is_some_and(|m| this_second > m)
            {
                Verdict::TooMany(st.retry_after)
            } else {
                Verdict::Serve
            }
        };
        match verdict {
            Verdict::Serve if !long_running => {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                return (verdict, InFlight(Some(&self.in_flight)));
            }
            Verdict::Serve => {}
            Verdict::TooMany(_) => {
                self.throttled.fetch_add(1, Ordering::Relaxed);
                self.count_second(unix, |s| s.throttled += 1);
            }
            Verdict::ShuttingDown(_) => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
                self.count_second(unix, |s| s.unavailable += 1);
            }
        }
        (verdict, InFlight(None))
    }

    /// Applies `f` to second `unix`'s counts; returns its request count.
    fn count_second(&self, unix: u64, f: impl FnOnce(&mut Second)) -> u64 {
        let mut secs = self.seconds.lock().unwrap_or_else(PoisonError::into_inner);
        if secs.back().is_none_or(|s| s.unix < unix) {
            if secs.len() >= MAX_SECONDS_KEPT {
                secs.pop_front();
            }
            secs.push_back(Second {
                unix,
                ..Second::default()
            });
        }
        // A clock that stepped back counts into the newest second at or before it.
        let last = secs.len().saturating_sub(1);
        let i = secs.iter().rposition(|s| s.unix <= unix).unwrap_or(last);
        secs.get_mut(i).map_or(0, |s| {
            f(s);
            s.requests
        })
    }

    /// `POST /sim/load`: changes the settings given in `body` (`maxInFlight`, `maxPerSecond`:
    /// a number, or null/0 for off; `next`; `retryAfter` seconds; `shuttingDown` seconds from
    /// now, 0 = no longer); answers [`Load::report`].
    pub fn set(&self, body: &[u8], now: Instant) -> Result<Value, ApiError> {
        let m = match serde_json::from_slice(body) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(ApiError::bad_request("a JSON object is required")),
            Err(e) => return Err(ApiError::bad_request(format!("invalid JSON: {e}"))),
        };
        let num = |field: &str, max: u64| -> Result<Option<Option<u64>>, ApiError> {
            match m.get(field) {
                None => Ok(None),
                Some(Value::Null) => Ok(Some(None)),
                Some(v) => match v.as_u64().filter(|n| *n <= max) {
                    Some(n) => Ok(Some(Some(n))),
                    None => Err(ApiError::bad_request(format!(
                        "field {field:?} must be an integer from 0 to {max}, or null"
                    ))),
                },
            }
        };
        let max_in_flight = num("maxInFlight", 1_000_000)?;
        let max_per_second = num("maxPerSecond", 1_000_000)?;
        let next = num("next", 1_000_000_000)?;
        let retry_after = num("retryAfter", MAX_LOAD_SECS)?;
        let shutting_down = num("shuttingDown", MAX_LOAD_SECS)?;
        if let Some(k) = m.keys().find(|k| {
            ![
                "maxInFlight",
                "maxPerSecond",
                "next",
                "retryAfter",
                "shuttingDown",
            ]
            .contains(&k.as_str())
        }) {
            return Err(ApiError::bad_request(format!("unknown field {k:?}")));
        }
        {
            let mut st = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(v) = max_in_flight {
                st.max_in_flight = v.filter(|n| *n > 0).map(|n| n as usize);
            }
            if let Some(v) = max_per_second {
                st.max_per_second = v.filter(|n| *n > 0);
            }
            if let Some(v) = next {
                st.next = v.unwrap_or(0);
            }
            if let Some(v) = retry_after {
                st.retry_after = v.unwrap_or(1);
            }
            if let Some(v) = shutting_down {
                st.shutting_down_until = v.filter(|n| *n > 0).map(|n| now + Duration::from_secs(n));
            }
        }
        Ok(self.report(now))
    }

    /// `GET /sim/load`: the settings, the totals and the per-second counts.
    pub fn report(&self, now: Instant) -> Value {
        let st = self
            .settings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let secs: Vec<Value> = self
            .seconds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|s| json!([s.unix, s.requests, s.throttled, s.unavailable]))
            .collect();
        json!({
            "maxInFlight": st.max_in_flight,
            "maxPerSecond": st.max_per_second,
            "next": st.next,
            "retryAfter": st.retry_after,
            "shuttingDown": st.shutting_down_until
                .map(|t| t.saturating_duration_since(now).as_secs()).filter(|s| *s > 0),
            "inFlight": self.in_flight.load(Ordering::SeqCst),
            "requests": self.requests.load(Ordering::Relaxed),
            "throttled": self.throttled.load(Ordering::Relaxed),
            "unavailable": self.unavailable.load(Ordering::Relaxed),
            "perSecondColumns": ["unix", "requests", "throttled", "unavailable"],
            "perSecond": secs,
        })
    }
}

/// The Status of a refusal (429 `TooManyRequests` or 503 `ServiceUnavailable`), with
/// `details.retryAfterSeconds` as an apiserver sends it.
pub fn refusal_status(verdict: Verdict) -> Option<(u16, u64, Value)> {
    let (code, reason, message, secs) = match verdict {
        Verdict::Serve => return None,
        Verdict::TooMany(s) => (
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            s,
        ),
        Verdict::ShuttingDown(s) => (503, "ServiceUnavailable", "apiserver is shutting down", s),
    };
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason,
        "details": {"retryAfterSeconds": secs}, "code": code,
    });
    Some((code, secs, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_limit_counts_short_requests_only() {
        let load = Load::new(Settings {
            max_in_flight: Some(1),
            retry_after: 3,
            ..Settings::default()
        });
        let t = Instant::now();
        let (v1, g1) = load.admit(false, t, 100);
        assert_eq!(v1, Verdict::Serve);
        // A second short request and a watch start are refused while one is in flight.
        assert_eq!(load.admit(false, t, 100).0, Verdict::TooMany(3));
        assert_eq!(load.admit(true, t, 100).0, Verdict::TooMany(3));
        drop(g1);
        let (v, _w) = load.admit(true, t, 100);
        assert_eq!(v, Verdict::Serve);
        // A watch is not in flight.
        assert_eq!(load.admit(false, t, 100).0, Verdict::Serve);
        let r = load.report(t);
        assert_eq!(
            (r["requests"].as_u64(), r["throttled"].as_u64()),
            (Some(5), Some(2))
        );
        assert_eq!(r["perSecond"][0], json!([100, 5, 2, 0]));
    }

    #[test]
    fn the_next_n_requests_and_a_shutdown() {
        let load = Load::default();
        let t = Instant::now();
        let r = load.set(br#"{"next": 2, "retryAfter": 4}"#, t).unwrap();
        assert_eq!(r["next"], 2);
        assert_eq!(load.admit(false, t, 1).0, Verdict::TooMany(4));
        assert_eq!(load.admit(true, t, 1).0, Verdict::TooMany(4));
        assert_eq!(load.admit(false, t, 2).0, Verdict::Serve);
        load.set(br#"{"shuttingDown": 5}"#, t).unwrap();
        assert_eq!(load.admit(false, t, 2).0, Verdict::ShuttingDown(4));
        assert_eq!(
            load.admit(false, t + Duration::from_secs(5), 7).0,
            Verdict::Serve
        );
        let r = load.report(t);
        assert_eq!(r["unavailable"], 1);
        assert_eq!(r["perSecond"].as_array().map(Vec::len), Some(3));
        let (code, secs, body) = refusal_status(Verdict::ShuttingDown(4)).unwrap();
        assert_eq!((code, secs), (503, 4));
        assert_eq!(body["details"]["retryAfterSeconds"], 4);
        assert_eq!(
            refusal_status(Verdict::TooMany(2)).unwrap().2["reason"],
            "TooManyRequests"
        );
    }

    #[test]
    fn per_second_limit_and_bad_bodies() {
        let load = Load::default();
        let t = Instant::now();
        load.set(br#"{"maxPerSecond": 2}"#, t).unwrap();
        let got: Vec<Verdict> = (0..4).map(|_| load.admit(true, t, 9).0).collect();
        assert_eq!(
            got,
            [
                Verdict::Serve,
                Verdict::Serve,
                Verdict::TooMany(1),
                Verdict::TooMany(1)
            ]
        );
        assert_eq!(load.admit(true, t, 10).0, Verdict::Serve);
        for bad in [
            &br#"[1]"#[..],
            br#"{"next": -1}"#,
            br#"{"retryAfter": 99999}"#,
            br#"{"nope": 1}"#,
            b"{",
        ] {
            assert!(
                load.set(bad, t).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        load.set(br#"{"maxPerSecond": null}"#, t).unwrap();
        assert_eq!(load.admit(true, t, 10).0, Verdict::Serve);
    }
}
