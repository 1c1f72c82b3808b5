//! The reflectors: one thread per upstream resource that lists, then watches, and feeds every
//! change to a [`Sink`] (the cache). All I/O goes through [`ListWatch`] so the state machine is
//! tested against fakes. The thread body is `state = step(state)` over
//!
//! ```text
//! Empty ──list ok──▶ Listed{rv} ──watch ok──▶ Watching{rv, lines} ──event──▶ Watching{rv'}
//! ```
//!
//! | what happens                                   | next state                | wait    |
//! |------------------------------------------------|---------------------------|---------|
//! | list ok                                        | `Listed` (emits `Replace`)| —       |
//! | list 410 / "too large resource version"        | `Empty`, RV omitted next  | —       |
//! | list fails otherwise                           | `Empty`                   | backoff |
//! | watch start 410                                | `Empty` (relist at RV)    | —       |
//! | watch start fails otherwise                    | `Listed`                  | backoff |
//! | ADDED/MODIFIED/DELETED                         | `Watching` (RV advances)  | —       |
//! | BOOKMARK                                       | `Watching` (RV advances)  | —       |
//! | ERROR 410                                      | `Empty` (relist at RV)    | —       |
//! | ERROR other                                    | `Listed`                  | backoff |
//! | stream ends (EOF, or a truncated last line)    | `Listed` (rewatch at RV)  | — (backoff if it lasted < 1 s with no event) |
//! | read error / idle timeout                      | `Listed`                  | backoff |
//! | undecodable or over-long line                  | `Empty` (relist at RV)    | backoff |
//!
//! Only a 410 relists among upstream *answers*; an event we could not decode is also repaired by
//! a relist, since skipping it would silently lose a change. A `Replace` is only ever emitted
//! from a complete, successful list: losing the upstream never empties the cache.

use crate::upstream::backoff::{random_below, Backoff};
use crate::upstream::client::{Upstream, UpstreamError};
use crate::upstream::decode::{self, DecodeError, Line, ListResult, WatchEvent};
pub use crate::upstream::discovery::{
    discover_slice_kind, discover_slice_kind_checked, discovered_slice_kind,
};
use crate::upstream::kind::with_query;
pub use crate::upstream::kind::{Change, Sink, UpstreamKind, SERVICE_PROXY_SELECTOR};
use serde_json::Value;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Watch `timeoutSeconds` is drawn from `[MIN, MAX)` (client-go's range).
pub const WATCH_TIMEOUT_SECONDS: (u64, u64) = (300, 600);
/// A watch that ends sooner than this without any event counts as a failure (backoff).
const SHORT_WATCH: Duration = Duration::from_secs(1);
/// Most pages followed in one list (only if the upstream paginates unasked).
const MAX_LIST_PAGES: usize = 10_000;
/// Serializes LIST + decode + apply across reflectors (see `step_list`).
static LIST_GATE: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// Granularity of the interruptible backoff sleep.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The upstream calls a reflector makes; implemented by [`Upstream`] and by test fakes.
pub trait ListWatch {
    /// A LIST, decoded.
    fn list(&self, path_and_query: &str) -> Result<ListResult, UpstreamError>;
    /// A WATCH, as a line source.
    fn watch(&self, path_and_query: &str) -> Result<Box<dyn BufRead + Send>, UpstreamError>;
    /// A JSON GET (API discovery).
    fn get_json(&self, path: &str) -> Result<Value, UpstreamError>;
}

impl ListWatch for Upstream {
    fn list(&self, path_and_query: &str) -> Result<ListResult, UpstreamError> {
        Upstream::list(self, path_and_query)
    }
    fn watch(&self, path_and_query: &str) -> Result<Box<dyn BufRead + Send>, UpstreamError> {
        Upstream::watch(self, path_and_query)
    }
    fn get_json(&self, path: &str) -> Result<Value, UpstreamError> {
        Upstream::get_json(self, path)
    }
}

/// Which resourceVersion the next LIST asks for (PROTOCOL.md §3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
enum ListFrom {
    /// `resourceVersion=0`: any cached state (initial list).
    Any,
    /// `resourceVersion=<rv>`: not older than the last seen RV (relist).
    NotOlderThan(String),
    /// No `resourceVersion`: a consistent read (after the RV was refused).
    Latest,
}

/// Reflector state (STYLE.md §5).
pub(crate) enum State {
    /// Needs a (re)list.
    Empty,
    /// Listed or interrupted: watch from `rv`.
    Listed { rv: String },
    /// Reading a watch stream.
    Watching {
        rv: String,
        lines: Box<dyn BufRead + Send>,
        started: Instant,
        events: u64,
    },
}

#[cfg(test)]
impl State {
    /// Short description for tests: state name and RV.
    pub(crate) fn describe(&self) -> (&'static str, &str) {
        match self {
            State::Empty => ("Empty", ""),
            State::Listed { rv } => ("Listed", rv),
            State::Watching { rv, .. } => ("Watching", rv),
        }
    }
}

/// One reflector: its I/O, sink and retry bookkeeping.
pub(crate) struct Reflector<L> {
    lw: L,
    kind: UpstreamKind,
    sink: Arc<dyn Sink>,
    backoff: Backoff,
    list_from: ListFrom,
    line: Vec<u8>,
    /// Undecodable or nameless upstream objects seen (logged and counted).
    pub(crate) dropped: u64,
}

fn is_rv_unavailable(e: &UpstreamError) -> bool {
    match e {
        UpstreamError::Status { code: 410, .. } => true,
        UpstreamError::Status {
            code: 504, message, ..
        } => message
            .to_ascii_lowercase()
            .contains("too large resource version"),
        _ => false,
    }
}

fn is_auth(e: &UpstreamError) -> bool {
    matches!(e.status_code(), Some(401 | 403))
}

impl<L: ListWatch> Reflector<L> {
    pub(crate) fn new(lw: L, kind: UpstreamKind, sink: Arc<dyn Sink>, backoff: Backoff) -> Self {
        Reflector {
            lw,
            kind,
            sink,
            backoff,
            list_from: ListFrom::Any,
            line: Vec::new(),
            dropped: 0,
        }
    }

    fn delay(&mut self) -> Option<Duration> {
        Some(self.backoff.next_delay(Instant::now()))
    }

    /// Fills in `kind`/`apiVersion`; `None` (and counted) for objects without a name.
    fn normalize(&mut self, mut obj: Value) -> Option<Value> {
        let has_name = obj
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let Some(map) = obj.as_object_mut().filter(|_| has_name) else {
            self.dropped += 1;
            log::warn!(
                "{:?}: dropping upstream object without metadata.name",
                self.kind
            );
            return None;
        };
        let r = self.kind.resource();
        map.entry("kind").or_insert_with(|| Value::from(r.kind()));
        map.entry("apiVersion")
            .or_insert_with(|| Value::from(r.api_version()));
        Some(obj)
    }

    fn list_all(&mut self) -> Result<ListResult, UpstreamError> {
        let sel = self.kind.label_selector().unwrap_or("");
        let rv = match &self.list_from {
            ListFrom::Any => "0".to_string(),
            ListFrom::NotOlderThan(rv) => rv.clone(),
            ListFrom::Latest => String::new(),
        };
        let mut all = self.lw.list(&with_query(
            self.kind.path(),
            &[("labelSelector", sel), ("resourceVersion", &rv)],
        ))?;
        let mut pages = 1;
        while let Some(token) = all.continue_token.take() {
            if pages >= MAX_LIST_PAGES {
                return Err(UpstreamError::Decode(DecodeError::Missing(
                    "end of paginated list",
                )));
            }
            let page = self.lw.list(&with_query(
                self.kind.path(),
                &[("continue", &token), ("labelSelector", sel)],
            ))?;
            all.items.extend(page.items);
            all.resource_version = page.resource_version;
            all.continue_token = page.continue_token;
            pages += 1;
        }
        Ok(all)
    }

    fn step_list(&mut self) -> (State, Option<Duration>) {
        // One full list in memory at a time, process-wide: a decoded list costs several times
        // its JSON size, and four reflectors listing at once set the process's peak memory.
        let gate = LIST_GATE.lock().unwrap_or_else(|p| p.into_inner());
        let result = self.step_list_gated();
        drop(gate);
        result
    }

    fn step_list_gated(&mut self) -> (State, Option<Duration>) {
        match self.list_all() {
            Ok(list) => {
                let relist = self.list_from != ListFrom::Any;
                let items = list.items;
                let what = if relist { "relisted" } else { "listed" };
                log::info!(
                    "{what} {:?}: {} objects at resourceVersion {:?}",
                    self.kind,
                    items.len(),
                    list.resource_version
                );
                self.sink.apply(self.kind, Change::List(items));
                self.list_from = ListFrom::NotOlderThan(list.resource_version.clone());
                (
                    State::Listed {
                        rv: list.resource_version,
                    },
                    None,
                )
            }
            Err(e) if is_rv_unavailable(&e) && self.list_from != ListFrom::Latest => {
                log::info!(
                    "{:?}: list resourceVersion unavailable ({e}); listing the latest state",
                    self.kind
                );
                self.list_from = ListFrom::Latest;
                (State::Empty, None)
            }
            Err(e) => {
                if is_auth(&e) {
                    log::warn!("{:?}: list forbidden, check RBAC: {e}", self.kind);
                } else if matches!(e, UpstreamError::Tls(_)) {
                    // Fix (tests/tls_upstream.rs): a TLS/certificate failure (wrong CA, rejected
                    // client certificate) does not heal by retrying; like RBAC it is the
                    // operator's to fix, so it must not hide among routine `info` lines.
                    log::warn!(
                        "{:?}: list failed, check the kubeconfig's certificate-authority and client certificate: {e}",
                        self.kind
                    );
                } else {
                    log::info!("{:?}: list failed: {e}", self.kind);
                }
                (State::Empty, self.delay())
            }
        }
    }

    fn step_watch_start(&mut self, rv: String) -> (State, Option<Duration>) {
        let (lo, hi) = WATCH_TIMEOUT_SECONDS;
        let timeout = (lo + random_below(hi - lo)).to_string();
        let sel = self.kind.label_selector().unwrap_or("");
        let q = with_query(
            self.kind.path(),
            &[
                ("allowWatchBookmarks", "true"),
                ("labelSelector", sel),
                ("resourceVersion", &rv),
                ("timeoutSeconds", &timeout),
                ("watch", "true"),
            ],
        );
        match self.lw.watch(&q) {
            Ok(lines) => (
                State::Watching {
                    rv,
                    lines,
                    started: Instant::now(),
                    events: 0,
                },
                None,
            ),
            Err(e) if is_rv_unavailable(&e) => self.relist_at(rv, &e.to_string(), false),
            Err(e) => {
                if is_auth(&e) {
                    log::warn!("{:?}: watch forbidden, check RBAC: {e}", self.kind);
                } else {
                    log::debug!("{:?}: watch failed to start: {e}", self.kind);
                }
                (State::Listed { rv }, self.delay())
            }
        }
    }

    fn relist_at(&mut self, rv: String, why: &str, wait: bool) -> (State, Option<Duration>) {
        log::info!(
            "{:?}: relisting from resourceVersion {rv:?}: {why}",
            self.kind
        );
        self.list_from = ListFrom::NotOlderThan(rv);
        (State::Empty, if wait { self.delay() } else { None })
    }

    fn step_watching(
        &mut self,
        rv: String,
        mut lines: Box<dyn BufRead + Send>,
        started: Instant,
        events: u64,
    ) -> (State, Option<Duration>) {
        let read = decode::read_line(&mut *lines, &mut self.line, decode::MAX_WATCH_LINE_BYTES);
        let ended = |this: &mut Self, rv: String| {
            if events == 0 && started.elapsed() < SHORT_WATCH {
                log::debug!("{:?}: very short watch, backing off", this.kind);
                (State::Listed { rv }, this.delay())
            } else {
                log::debug!(
                    "{:?}: watch ended after {events} events; rewatching",
                    this.kind
                );
                (State::Listed { rv }, None)
            }
        };
        match read {
            Ok(Line::Complete) if self.line.iter().all(u8::is_ascii_whitespace) => {
                return (
                    State::Watching {
                        rv,
                        lines,
                        started,
                        events,
                    },
                    None,
                );
            }
            Ok(Line::Complete) => {}
            Ok(Line::Eof | Line::Truncated) => return ended(self, rv),
            Ok(Line::TooLong) => {
                self.dropped += 1;
                return self.relist_at(rv, "watch event longer than the line cap", true);
            }
            Err(e) => {
                log::debug!("{:?}: watch stream broke: {e}", self.kind);
                return (State::Listed { rv }, self.delay());
            }
        }
        let event = match decode::decode_event(&self.line) {
            Ok(ev) => ev,
            Err(e) => {
                self.dropped += 1;
                log::warn!("{:?}: undecodable watch event: {e}", self.kind);
                return self.relist_at(rv, "undecodable watch event", true);
            }
        };
        let (change, new_rv) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let new_rv = decode::resource_version_of(&o).map(str::to_string);
                (self.normalize(o).map(Change::Upsert), new_rv)
            }
            WatchEvent::Deleted(o) => {
                let new_rv = decode::resource_version_of(&o).map(str::to_string);
                (self.normalize(o).map(Change::Delete), new_rv)
            }
            WatchEvent::Bookmark { resource_version } => (None, Some(resource_version)),
            WatchEvent::Error(s) if s.code == 410 => {
                return self.relist_at(rv, &format!("watch expired: {}", s.message), false)
            }
            WatchEvent::Error(s) => {
                if matches!(s.code, 401 | 403) {
                    log::warn!(
                        "{:?}: watch error {} {}: {}",
                        self.kind,
                        s.code,
                        s.reason,
                        s.message
                    );
                } else {
                    log::debug!(
                        "{:?}: watch error {} {}: {}",
                        self.kind,
                        s.code,
                        s.reason,
                        s.message
                    );
                }
                return (State::Listed { rv }, self.delay());
            }
        };
        if let Some(change) = change {
            self.sink.apply(self.kind, change);
        }
        let rv = new_rv.filter(|r| !r.is_empty()).unwrap_or(rv);
        (
            State::Watching {
                rv,
                lines,
                started,
                events: events + 1,
            },
            None,
        )
    }

    /// Advances the state machine by one I/O step; returns the next state and how long to wait
    /// before the next step.
    pub(crate) fn step(&mut self, state: State) -> (State, Option<Duration>) {
        match state {
            State::Empty => self.step_list(),
            State::Listed { rv } => self.step_watch_start(rv),
            State::Watching {
                rv,
                lines,
                started,
                events,
            } => self.step_watching(rv, lines, started, events),
        }
    }

    /// The thread body: steps until `stop` is set (checked between steps and during waits).
    pub(crate) fn run(mut self, stop: &AtomicBool) {
        let mut state = State::Empty;
        while !stop.load(Ordering::Relaxed) {
            let (next, wait) = self.step(state);
            state = next;
            if let Some(d) = wait {
                let until = Instant::now() + d;
                while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(
                        STOP_POLL.min(until.saturating_duration_since(Instant::now())),
                    );
                }
            }
        }
        log::debug!("{:?}: reflector stopped", self.kind);
    }
}

/// Starts a reflector thread for `kind`; it runs until `stop` is set.
pub fn spawn(
    upstream: Upstream,
    kind: UpstreamKind,
    sink: Arc<dyn Sink>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    spawn_with(upstream, kind, sink, stop)
}

pub(crate) fn spawn_with<L: ListWatch + Send + 'static>(
    lw: L,
    kind: UpstreamKind,
    sink: Arc<dyn Sink>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("reflect-{kind:?}"))
        .spawn(move || Reflector::new(lw, kind, sink, Backoff::new()).run(&stop))
}

#[cfg(test)]
#[path = "reflector_tests.rs"]
mod tests;
