//! Fault-injection vocabulary of the simulator (the parts that are not sockets): how a too-large
//! `resourceVersion` is answered (`--too-large`, `/sim/reset-rv`), the Status such an answer
//! carries, what a reset does to the open watches, the bodies of `/sim/reset-rv` and
//! `/sim/refuse` (all listeners, or one), and the `/sim/edge-health` stub
//! (a canned answer plus a poll counter). Pure apart from the stub's `Mutex` and counter.

use grid_wrapper::k8s::status::ApiError;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Longest `/sim/refuse` or `--start-refusing` outage, in seconds.
pub const MAX_REFUSE_SECS: u64 = 600;

/// How a watch whose `resourceVersion` is above the current one is answered once the store has
/// "too large" answers enabled (after `/sim/reset-rv`, or from the start with `--too-large`).
/// A LIST is always answered with the HTTP form (a real apiserver's list "not older than" a
/// future RV waits, then answers 504).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TooLarge {
    /// HTTP 504 with the Status as body.
    #[default]
    Http,
    /// HTTP 200, one `ERROR` event carrying the Status, then the end of the stream.
    Event,
    /// HTTP 200 and nothing: the watch is accepted from the future and stays silent (no event,
    /// no bookmark) until the counter passes its RV — what a real apiserver's watch cache does
    /// (it checks freshness only for `sendInitialEvents`).
    Silent,
}

impl TooLarge {
    /// Parses `http` / `event`.
    pub fn parse(s: &str) -> Option<TooLarge> {
        match s {
            "http" => Some(TooLarge::Http),
            "event" => Some(TooLarge::Event),
            "silent" => Some(TooLarge::Silent),
            _ => None,
        }
    }

    /// Wire name (`http` / `event` / `silent`).
    pub fn as_str(self) -> &'static str {
        match self {
            TooLarge::Http => "http",
            TooLarge::Event => "event",
            TooLarge::Silent => "silent",
        }
    }
}

/// What `/sim/reset-rv` does to the open watches (`watches`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OpenWatches {
    /// They end cleanly (the terminating chunk), as an apiserver shutting down ends them.
    #[default]
    End,
    /// Their connections are cut (no terminating chunk), as a crashed control plane's are.
    Cut,
    /// They stay open, and silent until the new counter passes their RV.
    Keep,
}

impl OpenWatches {
    /// Parses `end` / `cut` / `keep`.
    pub fn parse(s: &str) -> Option<OpenWatches> {
        match s {
            "end" => Some(OpenWatches::End),
            "cut" => Some(OpenWatches::Cut),
            "keep" => Some(OpenWatches::Keep),
            _ => None,
        }
    }

    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpenWatches::End => "end",
            OpenWatches::Cut => "cut",
            OpenWatches::Keep => "keep",
        }
    }
}

/// The Status a real apiserver sends for a `resourceVersion` above its current one (the watch
/// cache's "Too large resource version" after its wait, code 504, reason `Timeout`). Built here,
/// not by the product's `ApiError`, which has no `details.causes`.
pub fn too_large_status(requested: &str, current: u64) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("Too large resource version: {requested}, current: {current}"),
        "reason": "Timeout",
        "details": {
            "causes": [{"reason": "ResourceVersionTooLarge",
                        "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
        "code": 504,
    })
}

fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad_request("a JSON object is required")),
        Err(e) => Err(ApiError::bad_request(format!("invalid JSON: {e}"))),
    }
}

/// A non-negative integer field given as a JSON number or a decimal string.
fn u64_field(m: &serde_json::Map<String, Value>, field: &str) -> Result<Option<u64>, ApiError> {
    let bad = || ApiError::bad_request(format!("field {field:?} must be a non-negative integer"));
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// A parsed `/sim/reset-rv` body: `{"rv": N, "too_large": "http"|"event"|"silent", "watches":
/// "end"|"cut"|"keep"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResetRv {
    /// The counter's new value (`rv`, required).
    pub rv: u64,
    /// `too_large`, when given.
    pub too_large: Option<TooLarge>,
    /// `watches` (default: they end).
    pub watches: OpenWatches,
}

impl ResetRv {
    /// Parses the body; range checks against the store are the store's.
    pub fn parse(body: &[u8]) -> Result<ResetRv, ApiError> {
        let m = parse_object(body)?;
        let rv = u64_field(&m, "rv")?
            .ok_or_else(|| ApiError::bad_request("field \"rv\" (an integer) is required"))?;
        let too_large = match m.get("too_large") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_str().and_then(TooLarge::parse).ok_or_else(|| {
                ApiError::bad_request(
                    "field \"too_large\" must be \"http\", \"event\" or \"silent\"",
                )
            })?),
        };
        let watches = match m.get("watches") {
            None | Some(Value::Null) => OpenWatches::default(),
            Some(v) => v.as_str().and_then(OpenWatches::parse).ok_or_else(|| {
                ApiError::bad_request("field \"watches\" must be \"end\", \"cut\" or \"keep\"")
            })?,
        };
        Ok(ResetRv {
            rv,
            too_large,
            watches,
        })
    }
}

/// A parsed `/sim/refuse` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refuse {
    /// How long (`seconds`, 1..=[`MAX_REFUSE_SECS`]).
    pub duration: Duration,
    /// `listen`: the one listener address (`host:port`) to take down; `None` = every listener.
    pub listen: Option<String>,
}

/// Parses a `/sim/refuse` body `{"seconds": S, "listen": "HOST:PORT"}` (`listen` optional).
pub fn parse_refuse(body: &[u8]) -> Result<Refuse, ApiError> {
    let m = parse_object(body)?;
    let duration = match u64_field(&m, "seconds")? {
        Some(s) if (1..=MAX_REFUSE_SECS).contains(&s) => Duration::from_secs(s),
        _ => {
            return Err(ApiError::bad_request(format!(
                "field \"seconds\" must be an integer in 1..={MAX_REFUSE_SECS}"
            )))
        }
    };
    let listen = match m.get("listen") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "field \"listen\" must be a listen address (HOST:PORT)",
            ))
        }
    };
    Ok(Refuse { duration, listen })
}

/// What `GET /sim/edge-health` answers: a status code and the body as set.
#[derive(Clone, Debug, PartialEq)]
struct Canned {
    status: u16,
    /// Bytes sent: a JSON string verbatim, anything else serialized.
    bytes: Vec<u8>,
}

impl Default for Canned {
    fn default() -> Self {
        Canned {
            status: 200,
            bytes: b"{}".to_vec(),
        }
    }
}

/// The edge-health stub: `POST /sim/edge-health` sets the answer, `GET` serves and counts it.
#[derive(Debug, Default)]
pub struct EdgeHealthStub {
    canned: Mutex<Canned>,
    polls: AtomicU64,
}

impl EdgeHealthStub {
    /// One poll: counts it and returns (status, body bytes).
    pub fn poll(&self) -> (u16, Vec<u8>) {
        self.polls.fetch_add(1, Ordering::SeqCst);
        let c = self.canned.lock().unwrap_or_else(PoisonError::into_inner);
        (c.status, c.bytes.clone())
    }

    /// GETs answered so far.
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::SeqCst)
    }

    /// Sets the answer from a body `{"status": 200..=599 (not 204/304), "body": <any JSON>}`
    /// (`status` defaults to 200, `body` to `{}`; a JSON string is sent verbatim). Returns
    /// what is now served.
    pub fn set(&self, body: &[u8]) -> Result<Value, ApiError> {
        let m = parse_object(body)?;
        let status = match u64_field(&m, "status")? {
            None => 200,
            Some(s) => u16::try_from(s)
                .ok()
                .filter(|s| (200..=599).contains(s) && *s != 204 && *s != 304)
                .ok_or_else(|| {
                    ApiError::bad_request("field \"status\" must be in 200..=599 (not 204/304)")
                })?,
        };
        let given = m.get("body").cloned().unwrap_or_else(|| json!({}));
        let bytes = match &given {
            Value::String(s) => s.clone().into_bytes(),
            v => serde_json::to_vec(v).unwrap_or_default(),
        };
        *self.canned.lock().unwrap_or_else(PoisonError::into_inner) = Canned { status, bytes };
        let answer = json!({"status": status, "body": given, "polls": self.polls()});
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_status_has_the_apiserver_shape() {
        let s = too_large_status("250", 120);
        assert_eq!(
            s.to_string(),
            r#"{"apiVersion":"v1","code":504,"details":{"causes":[{"message":"Too large resource version","reason":"ResourceVersionTooLarge"}],"retryAfterSeconds":1},"kind":"Status","message":"Too large resource version: 250, current: 120","metadata":{},"reason":"Timeout","status":"Failure"}"#
        );
        assert_eq!(TooLarge::parse("event"), Some(TooLarge::Event));
        assert_eq!(
            TooLarge::parse("silent").map(TooLarge::as_str),
            Some("silent")
        );
        assert_eq!(TooLarge::parse("HTTP"), None);
        assert_eq!(TooLarge::default().as_str(), "http");
    }

    #[test]
    fn reset_and_refuse_bodies() {
        assert_eq!(
            ResetRv::parse(br#"{"rv": 5}"#).expect("ok"),
            ResetRv {
                rv: 5,
                too_large: None,
                watches: OpenWatches::End,
            }
        );
        assert_eq!(
            ResetRv::parse(br#"{"rv": "7", "too_large": "event"}"#).expect("ok"),
            ResetRv {
                rv: 7,
                too_large: Some(TooLarge::Event),
                watches: OpenWatches::End,
            }
        );
        assert_eq!(
            ResetRv::parse(br#"{"rv": 7, "too_large": "silent", "watches": "keep"}"#).expect("ok"),
            ResetRv {
                rv: 7,
                too_large: Some(TooLarge::Silent),
                watches: OpenWatches::Keep,
            }
        );
        assert_eq!(
            OpenWatches::parse("cut").map(OpenWatches::as_str),
            Some("cut")
        );
        for bad in [
            &b"{}"[..],
            b"[]",
            b"{\"rv\": -1}",
            b"{\"rv\": 1.5}",
            b"{\"rv\": 3, \"too_large\": \"gone\"}",
            b"{\"rv\": 3, \"watches\": \"linger\"}",
            b"nope",
        ] {
            assert_eq!(ResetRv::parse(bad).expect_err("bad").code, 400);
        }
        assert_eq!(
            parse_refuse(br#"{"seconds": 2}"#).expect("ok"),
            Refuse {
                duration: Duration::from_secs(2),
                listen: None
            }
        );
        assert_eq!(
            parse_refuse(br#"{"seconds": "3", "listen": "127.0.0.1:8080"}"#).expect("ok"),
            Refuse {
                duration: Duration::from_secs(3),
                listen: Some("127.0.0.1:8080".into())
            }
        );
        for bad in [
            &b"{}"[..],
            b"{\"seconds\": 0}",
            b"{\"seconds\": 601}",
            b"{\"seconds\": 1, \"listen\": 8080}",
            b"{\"seconds\": 1, \"listen\": \"\"}",
        ] {
            assert_eq!(parse_refuse(bad).expect_err("bad").code, 400);
        }
    }

    #[test]
    fn edge_health_stub_counts_and_serves_what_was_set() {
        let s = EdgeHealthStub::default();
        assert_eq!(s.poll(), (200, b"{}".to_vec()));
        let v = s
            .set(br#"{"status": 503, "body": {"n1": {"normal": false}}}"#)
            .expect("set");
        assert_eq!(v["status"], 503);
        assert_eq!(s.poll(), (503, br#"{"n1":{"normal":false}}"#.to_vec()));
        s.set(br#"{"body": "not json{"}"#).expect("raw");
        assert_eq!(s.poll(), (200, b"not json{".to_vec()));
        assert_eq!(s.polls(), 3);
        for bad in [&br#"{"status": 204}"#[..], br#"{"status": 99}"#, b"x"] {
            assert_eq!(s.set(bad).expect_err("bad").code, 400);
        }
    }
}
