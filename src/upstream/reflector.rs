//! The reflectors: one thread per upstream resource that lists, then watches, and feeds every
//! change to a [`Sink`] (the cache). All I/O goes through [`ListWatch`] so the state machine is
//! tested against fakes. The thread body is `state = step(state)` over
//!
//! ```text
//! Empty ──list ok──▶ Listed{rv} ──watch ok──▶ Watching{rv, lines} ──event──▶ Watching{rv'}
//! ```
//!
//! | what happens                                   | next state                      | wait    |
//! |------------------------------------------------|---------------------------------|---------|
//! | list ok                                        | `Listed` (emits `List`)         | —       |
//! | list at an RV: 410 / RV too large              | `Empty`, RV omitted next        | —       |
//! | list fails otherwise (`--max-list-items` passed included: abandoned as it passes, nothing applied) | `Empty` | backoff (growing however long the failed list took) |
//! | watch start 410 / ERROR 410                    | `Empty` (relist at RV)          | — (backoff unless it is the first failure since progress) |
//! | watch start / ERROR: RV too large              | `Empty`, RV omitted (from scratch) | — (backoff if a relist from scratch was already decided since progress) |
//! | watch start fails otherwise / ERROR other      | `Listed`                        | backoff |
//! | ADDED/MODIFIED/DELETED/BOOKMARK                | `Watching` (RV advances)        | —       |
//! | stream ends (EOF, or a truncated last line)    | `Listed` (rewatch at RV)        | —       |
//! | the stream's server is no longer the selected one (`--master=A,B,…`, [`crate::upstream::failover`]): it ends at its next data, or within a tick when quiet | `Listed` (rewatch at RV on the selected server) | — |
//! | watch start or relist at an RV issued by a server of another resourceVersion domain than the selected one (a relay, the cloud: [`crate::upstream::domain`]); nothing is sent | `Empty`, RV omitted (from scratch; INFO, counted as a `server_switch` relist for a watch) | — |
//! | a watch start that is not a renewal (after a failed, silent, short or empty watch: [`crate::upstream::rewatch`]) reads the upstream's current RV first (`limit=1`, no RV); it is below the RV held | `Empty`, RV omitted (from scratch; WARN, counted as a `went_back` relist) | — (backoff if a relist from scratch was already decided since progress) |
//! | that read fails                                | `Listed`                        | backoff |
//! | stream ends < 1 s after start with no event    | `Listed`                        | backoff |
//! | read error, or silence past the idle limit      | `Listed`                        | backoff |
//! | silence past `--watch-progress-timeout` after a bookmark on the stream | `Listed` (counted as a stall) | backoff |
//! | silence past it without any bookmark on the stream | `Listed` (later watches get the idle limit until a bookmark comes) | — |
//! | a line over the object bound, its object named in its first bytes | `Watching` (`Change::Oversized`: the cache keeps serving the version it holds, stale; a `DELETED` deletes) | — |
//! | undecodable line (or protobuf frame: `upstream::proto_watch`), or one over the bound whose object its first bytes do not name | `Empty` (relist at RV) | backoff |
//! | an object that does not fit the resource (kind, apiVersion, scope) or older than the stream's RV ([`decode::refusal_of`], read from the object's text: [`decode::object_head`]) | `Watching` (refused: not applied, RV unchanged; WARN once per stream, counted) | — |
//! | the [`MAX_FAILURES_WITHOUT_PROGRESS`]th failure in a row without progress of a request naming an RV | `Empty`, RV omitted (from scratch) | backoff |
//!
//! *Progress* is an event or bookmark, or a watch that ended normally; a list is not (a watch
//! that the upstream refuses right after every list is still stuck). Failures that count toward
//! the limit are those of requests naming an RV: watch starts, watch streams (ERROR events, 410
//! included; breaks; empty or undecodable streams) and relists at an RV. Deciding to relist from
//! scratch restarts the count, and only the first such relist since progress skips the backoff,
//! so no answer of the upstream can make a hot loop or pin one RV forever. "RV too large" is a
//! `Status` with the cause `ResourceVersionTooLarge` or a message containing "too large resource
//! version" (HTTP 504 or an ERROR event): the upstream's RVs went backwards (etcd restored,
//! control plane replaced, a cache in between), and a relist at our RV would be refused again.
//!
//! | logging and stats ([`crate::upstream::stats`])  | when                                                  |
//! |-------------------------------------------------|-------------------------------------------------------|
//! | failure episode opens: WARN with the error and a hint (RBAC for 401/403, kubeconfig CA/client certificate for TLS); `failing` = 1 | first failure after a success (or at startup). No failures: a 410 and an RV refused to a relist (INFO with the relist), a stream that ends normally |
//! | later failures in the episode: DEBUG, but WARN once for each new kind (auth, TLS, refused or broken connection, a silent connection, an undecodable body, each HTTP status) | until the episode ends |
//! | INFO "recovered after N failures in X s"; `failing` = 0 | watch progress, or a successful list if no watch failed in the episode |
//! | INFO "relisting …" with the reason; `relists_total` + 1 | each decision of a listed reflector to relist (at the RV or from scratch); dropping the RV of a pending relist logs INFO but is no new relist |
//! | `watch_errors_total` + 1                        | each failed watch (start refused, ERROR event, break, empty or undecodable stream) |
//! | `last_contact_timestamp_seconds` = now          | each successful list and each watch line received |
//!
//! Among upstream *answers* only a 410 or an RV refusal relists at once; an event we could not
//! decode is also repaired by a relist, since skipping it would silently lose a change. A
//! `List` is only ever emitted from a complete, successful list: losing the upstream never
//! empties the cache, and the cache diffs each list, so a relist from scratch only turns real
//! changes into events.

use crate::clock::unix_now;
use crate::handoff::refused;
use crate::handoff::{Change, ListItems, Oversized, Sink, Watched};
use crate::k8s::{ObjectKey, Resource};
use crate::upstream::backoff::{random_below, Backoff};
use crate::upstream::client::{is_stall, Upstream, UpstreamError, WatchStream};
use crate::upstream::decode::{self, Line, ListResult, TextEvent, WATCH_EVENT_ENVELOPE_BYTES};
pub use crate::upstream::discovery::{
    discover_cidr_kind, discover_slice_kind, discover_slice_kind_checked, discovered_slice_kind,
    recheck_cidr_kind,
};
use crate::upstream::domain::RvOrigin;
pub use crate::upstream::episode::MAX_FAILURES_WITHOUT_PROGRESS;
use crate::upstream::episode::{Cause, Ended, Episode, Phase, WatchFailure};
use crate::upstream::kind::with_query;
pub use crate::upstream::kind::SERVICE_PROXY_SELECTOR;
pub use crate::upstream::list::{list_all, list_all_into};
use crate::upstream::proto_watch;
use crate::upstream::retry_after;
use crate::upstream::rewatch::{self, Rewatch};
use crate::upstream::stats::{self, KindStats, RelistReason};
use serde_json::Value;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Watch `timeoutSeconds` is drawn from `[MIN, MAX)` (client-go's range).
pub const WATCH_TIMEOUT_SECONDS: (u64, u64) = (300, 600);
/// A watch that ends sooner than this without any event counts as a failure (backoff).
const SHORT_WATCH: Duration = Duration::from_secs(1);
/// Objects a reflector names in a WARN for their size; past that, at DEBUG.
const MAX_WARNED_OVERSIZED: usize = 1024;
/// Granularity of the interruptible backoff sleep.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The upstream calls a reflector makes; implemented by [`Upstream`] and by test fakes.
/// `rv_from` is the server that issued the resourceVersion (or `continue` token) the query
/// names: the request goes only to a server of its domain, else it fails with
/// [`UpstreamError::ForeignResourceVersion`] without being sent ([`crate::upstream::domain`]).
pub trait ListWatch {
    /// A LIST, decoded; its [`ListResult::origin`] says which server answered.
    fn list(
        &self,
        path_and_query: &str,
        rv_from: Option<RvOrigin>,
    ) -> Result<ListResult, UpstreamError>;
    /// The same, each item handed to `items` (cleared first) instead of the answer's `items`.
    fn list_into(
        &self,
        path_and_query: &str,
        items: &mut dyn ListItems,
        rv_from: Option<RvOrigin>,
    ) -> Result<ListResult, UpstreamError> {
        let mut list = self.list(path_and_query, rv_from)?;
        items.clear();
        let max = self.max_object_bytes();
        for text in list.items.drain(..) {
            if text.len() > max {
                let at = decode::object_ref_from_prefix(text.as_bytes());
                items.skipped(Oversized {
                    namespace: at.namespace,
                    name: at.name,
                    bytes: text.len() as u64,
                });
            } else {
                items.push(text);
            }
        }
        Ok(list)
    }
    /// A WATCH, as a line source. `bookmarks_expected`: the upstream is known to send
    /// bookmarks, so the stream may be held to the short progress deadline (a read that times
    /// out then fails with an error [`is_stall`] recognises). The stream says which server it
    /// comes from.
    fn watch(
        &self,
        path_and_query: &str,
        bookmarks_expected: bool,
        rv_from: Option<RvOrigin>,
    ) -> Result<WatchStream, UpstreamError>;
    /// A JSON GET (API discovery).
    fn get_json(&self, path: &str) -> Result<Value, UpstreamError>;
    /// The upstream's current resourceVersion of `kind`'s collection, read fresh: a list of one
    /// item (`limit=1`) without `resourceVersion`, a quorum read, sent only to a server of
    /// `rv_from`'s domain (else [`UpstreamError::ForeignResourceVersion`], nothing sent). What
    /// a re-watch reads first ([`crate::upstream::rewatch`]). Its items are counted, not kept:
    /// an upstream that ignores `limit` costs its list's bytes, within the list bounds
    /// (`--max-list-items` passed fails it as it would fail a list).
    fn current_resource_version(
        &self,
        kind: Resource,
        rv_from: Option<RvOrigin>,
    ) -> Result<String, UpstreamError> {
        let q = with_query(kind.path(), &[("limit", "1")]);
        let mut items = Counted {
            taken: 0,
            limit: self.max_list_items(),
        };
        let listed = self.list_into(&q, &mut items, rv_from);
        // Passing the bound stops the read, which then fails for a body cut short.
        if items.full() {
            return Err(UpstreamError::TooManyItems { limit: items.limit });
        }
        listed.map(|l| l.resource_version)
    }
    /// The largest upstream object taken into the cache: a bigger one in a list or a watch is
    /// skipped. Fakes keep the watch line cap of [`decode::MAX_WATCH_LINE_BYTES`].
    fn max_object_bytes(&self) -> usize {
        decode::MAX_WATCH_LINE_BYTES - WATCH_EVENT_ENVELOPE_BYTES
    }
    /// The most items of one list, all its pages (`--max-list-items`): a longer list is
    /// abandoned ([`UpstreamError::TooManyItems`]).
    fn max_list_items(&self) -> usize {
        crate::upstream::client::DEFAULT_MAX_LIST_ITEMS
    }
    /// The read limit of a watch held to the progress deadline (for logs).
    fn progress_deadline(&self) -> Duration {
        crate::upstream::client::WATCH_PROGRESS_TIMEOUT
    }
    /// The read limit of any other watch (for logs).
    fn idle_limit(&self) -> Duration {
        crate::upstream::client::WATCH_IDLE_TIMEOUT
    }
}

impl ListWatch for Upstream {
    fn list(
        &self,
        path_and_query: &str,
        rv_from: Option<RvOrigin>,
    ) -> Result<ListResult, UpstreamError> {
        let mut texts = crate::handoff::Texts::default();
        let mut list = Upstream::list_into_from(self, path_and_query, &mut texts, rv_from)?;
        list.items = texts.0;
        Ok(list)
    }
    fn list_into(
        &self,
        path_and_query: &str,
        items: &mut dyn ListItems,
        rv_from: Option<RvOrigin>,
    ) -> Result<ListResult, UpstreamError> {
        Upstream::list_into_from(self, path_and_query, items, rv_from)
    }
    fn watch(
        &self,
        path_and_query: &str,
        bookmarks_expected: bool,
        rv_from: Option<RvOrigin>,
    ) -> Result<WatchStream, UpstreamError> {
        Upstream::watch_from(self, path_and_query, bookmarks_expected, rv_from)
    }
    fn get_json(&self, path: &str) -> Result<Value, UpstreamError> {
        Upstream::get_json(self, path)
    }
    fn max_object_bytes(&self) -> usize {
        Upstream::max_object_bytes(self)
    }
    fn max_list_items(&self) -> usize {
        Upstream::max_list_items(self)
    }
    fn progress_deadline(&self) -> Duration {
        self.timeouts().watch_progress
    }
    fn idle_limit(&self) -> Duration {
        self.timeouts().idle
    }
}

/// Which resourceVersion the next LIST asks for, chosen as client-go's reflector chooses it:
/// `0` first, the last seen RV on a relist, none once that RV was refused or kept failing (the
/// table in the module docs; docs/SEMANTICS.md §7).
#[derive(Clone, Debug, PartialEq, Eq)]
enum ListFrom {
    /// `resourceVersion=0`: any cached state (initial list).
    Any,
    /// `resourceVersion=<rv>`: not older than the last seen RV (relist).
    NotOlderThan(String),
    /// No `resourceVersion`: a consistent read (after the RV was refused or kept failing).
    Latest,
}

/// Reflector state: the explicit state machine of the module docs (kube-runtime's watcher's
/// shape, in blocking form).
pub(crate) enum Stage {
    /// Needs a (re)list.
    Empty,
    /// Listed or interrupted: watch from `rv`.
    Listed { rv: String },
    /// Reading a watch stream.
    Watching { rv: String, stream: Stream },
}

/// An open watch stream and what the reflector knows of it.
pub(crate) struct Stream {
    lines: Box<dyn BufRead + Send>,
    started: Instant,
    /// The `timeoutSeconds` it asked for.
    term: Duration,
    /// Lines applied (events and bookmarks).
    events: u64,
    /// When the last line came (or the stream started).
    last_line: Instant,
    /// Opened with the short progress deadline (bookmarks were expected).
    deadline: bool,
    /// A bookmark came on this stream.
    bookmarked: bool,
    /// An event of this stream was refused and named in a WARN (the others at DEBUG).
    warned_refusal: bool,
}

impl Stream {
    fn new(lines: Box<dyn BufRead + Send>, deadline: bool, term: Duration) -> Stream {
        let now = Instant::now();
        Stream {
            lines,
            started: now,
            term,
            events: 0,
            last_line: now,
            deadline,
            bookmarked: false,
            warned_refusal: false,
        }
    }

    fn last_byte_age(&self) -> Duration {
        self.last_line.elapsed()
    }
}

impl Stage {
    /// Watching `stream` at `rv`; a line just came.
    fn watching(rv: String, mut stream: Stream) -> Stage {
        stream.last_line = Instant::now();
        Stage::Watching { rv, stream }
    }
}

#[cfg(test)]
impl Stage {
    /// Short description for tests: state name and RV.
    pub(crate) fn describe(&self) -> (&'static str, &str) {
        match self {
            Stage::Empty => ("Empty", ""),
            Stage::Listed { rv } => ("Listed", rv),
            Stage::Watching { rv, .. } => ("Watching", rv),
        }
    }
}

/// One reflector: its I/O, sink and retry bookkeeping.
pub(crate) struct Reflector<L> {
    lw: L,
    kind: Resource,
    sink: Arc<dyn Sink>,
    backoff: Backoff,
    list_from: ListFrom,
    line: Vec<u8>,
    episode: Episode,
    stats: Arc<KindStats>,
    /// Undecodable or nameless upstream objects seen (logged and counted).
    pub(crate) dropped: u64,
    /// Objects already named in a WARN for their size (at most [`MAX_WARNED_OVERSIZED`]).
    warned_oversized: std::collections::HashSet<String>,
    /// The upstream sends bookmarks (assumed until a stream held to the short deadline timed
    /// out without one; learnt again from the next bookmark).
    bookmarks_expected: bool,
    /// The server that issued the resourceVersion held (the last list's; a watch stays in its
    /// domain): a relist at it or a watch from it goes only to a server of the same domain.
    rv_from: Option<RvOrigin>,
    /// The `Retry-After` of the last failed request: the next step waits at least that long
    /// (docs/SEMANTICS.md §7).
    retry_after: Option<Duration>,
    /// Why the next watch starts from the RV held: whether it reads the upstream's current RV
    /// first ([`rewatch::read_current_first`]).
    rewatch: Rewatch,
}

/// A list's taker that counts the items and keeps none, up to one past `limit`.
struct Counted {
    taken: usize,
    limit: usize,
}

impl ListItems for Counted {
    fn push(&mut self, _: Box<str>) {
        self.taken = self.taken.saturating_add(1);
    }
    fn clear(&mut self) {
        self.taken = 0;
    }
    fn len(&self) -> usize {
        self.taken
    }
    fn full(&self) -> bool {
        self.taken > self.limit
    }
}

/// A list's taker that keeps aside the items skipped for their size.
struct Skipping<'a> {
    items: &'a mut dyn ListItems,
    skipped: Vec<Oversized>,
}

impl ListItems for Skipping<'_> {
    fn push(&mut self, text: Box<str>) {
        self.items.push(text);
    }
    fn clear(&mut self) {
        self.items.clear();
        self.skipped.clear();
    }
    fn len(&self) -> usize {
        self.items.len()
    }
    fn skipped(&mut self, item: Oversized) {
        // The taker too: the cache keeps serving the version it holds of that key.
        self.items.skipped(item.clone());
        self.skipped.push(item);
    }
    fn facts_only_except(&self) -> Option<&str> {
        self.items.facts_only_except()
    }
}

/// The upstream no longer serves the RV we asked for (410, or our RV is beyond its newest).
fn is_rv_unavailable(e: &UpstreamError) -> bool {
    e.status_code() == Some(410) || e.is_rv_too_large()
}

impl<L: ListWatch> Reflector<L> {
    pub(crate) fn new(
        lw: L,
        kind: Resource,
        sink: Arc<dyn Sink>,
        backoff: Backoff,
        stats: Arc<KindStats>,
    ) -> Self {
        Reflector {
            lw,
            kind,
            sink,
            backoff,
            list_from: ListFrom::Any,
            line: Vec::new(),
            episode: Episode::default(),
            stats,
            dropped: 0,
            bookmarks_expected: true,
            warned_oversized: std::collections::HashSet::new(),
            rv_from: None,
            retry_after: None,
            rewatch: Rewatch::Fresh,
        }
    }

    /// Keeps a failed request's `Retry-After` for the next wait, and counts a 429.
    fn note_refusal(&mut self, e: &UpstreamError) {
        self.retry_after = e.retry_after();
        if e.is_throttled() {
            self.stats.record_throttled();
        }
    }

    fn delay(&mut self) -> Option<Duration> {
        Some(self.backoff.next_delay(Instant::now()))
    }

    /// A failure: WARN if it opens an episode or is of a kind not yet seen in it, else DEBUG;
    /// kept in the stats.
    fn failed(&mut self, phase: Phase, cause: Cause, text: &str) {
        if self.episode.fail(Instant::now(), phase, cause) {
            log::warn!(
                "{:?}: {text}{}; retrying (further failures of this kind are logged at debug level until it recovers)",
                self.kind,
                cause.hint()
            );
        } else {
            log::debug!("{:?}: {text}", self.kind);
        }
        if cause == Cause::Stalled {
            self.stats.record_stall();
        }
        self.stats.set_failing(true);
        self.stats.record_failing_since(unix_now());
        self.stats.record_error(text);
    }

    /// Logs the end of a failure episode, if one ended.
    fn recovered(&mut self, ended: Option<Ended>) {
        if let Some(Ended { failures, lasted }) = ended {
            log::info!(
                "{:?}: recovered after {failures} failure{} in {:.1} s",
                self.kind,
                if failures == 1 { "" } else { "s" },
                lasted.as_secs_f64()
            );
        }
        self.stats.set_failing(self.episode.failing());
    }

    /// Watch progress: an event or bookmark, or a watch that ended normally.
    fn progressed(&mut self) {
        let ended = self.episode.progressed(Instant::now());
        self.recovered(ended);
    }

    /// The key of a watched object; `None` (and counted) for objects without a name.
    fn named(&mut self, head: &decode::ObjectHead) -> Option<ObjectKey> {
        let key = head.key();
        if key.is_none() {
            self.dropped += 1;
            log::warn!(
                "{:?}: dropping upstream object without metadata.name",
                self.kind
            );
        }
        key
    }

    /// The list from the upstream, each item handed to `items`; the items skipped for their
    /// size are reported once the list is complete (a list that fails reports none).
    fn list_all(&mut self, items: &mut dyn ListItems) -> Result<ListResult, UpstreamError> {
        let (rv, rv_from) = match &self.list_from {
            ListFrom::Any => ("0", None),
            ListFrom::NotOlderThan(rv) => (rv.as_str(), self.rv_from),
            ListFrom::Latest => ("", None),
        };
        let mut taker = Skipping {
            items,
            skipped: Vec::new(),
        };
        let list = list_all_into(&self.lw, self.kind, rv, rv_from, &mut taker)?;
        for o in std::mem::take(&mut taker.skipped) {
            self.skip_oversized(o.namespace.as_deref(), o.name.as_deref(), o.bytes);
        }
        Ok(list)
    }

    fn step_list(&mut self) -> (Stage, Option<Duration>) {
        // Endpoint objects after Nodes and Services the first time (`list_order`: each is then
        // served right at once, not recomputed when its Service arrives).
        let sink = self.sink.clone();
        let order = sink.list_order();
        if let Some(o) = order.filter(|o| o.wait_turn(self.kind)) {
            log::warn!(
                "{:?}: listing before Nodes and Services: neither started or ended a list for {:.0?}",
                self.kind,
                o.patience()
            );
        }
        // No lock is held across the list's I/O: a list that stalls delays no other resource
        // (its items are prepared as they are read, so lists read at once cost what each
        // holds prepared, not their bodies).
        if let Some(o) = order {
            o.listing(self.kind);
        }
        let result = self.step_list_read();
        if let Some(o) = order {
            o.tried(self.kind);
        }
        result
    }

    fn step_list_read(&mut self) -> (Stage, Option<Duration>) {
        // The sink takes each item as it is read (the cache prepares it at once), so the list
        // is never held as the texts of all its items.
        let sink = self.sink.clone();
        let mut items = sink.list_items(self.kind);
        let started = Instant::now();
        match self.list_all(&mut *items) {
            Ok(list) => {
                self.stats.record_contact(unix_now());
                let relist = self.list_from != ListFrom::Any;
                let what = if relist { "relisted" } else { "listed" };
                log::info!(
                    "{what} {:?}: {} objects at resourceVersion {:?}",
                    self.kind,
                    items.len(),
                    list.resource_version
                );
                items.apply();
                self.rv_from = list.origin;
                if let Some(o) = list.origin {
                    self.stats.set_server(o.server);
                }
                self.list_from = ListFrom::NotOlderThan(list.resource_version.clone());
                self.rewatch = Rewatch::Fresh;
                let ended = self.episode.listed(Instant::now());
                self.recovered(ended);
                (
                    Stage::Listed {
                        rv: list.resource_version,
                    },
                    None,
                )
            }
            Err(UpstreamError::ForeignResourceVersion { issued_by, now }) => {
                let rv = match &self.list_from {
                    ListFrom::NotOlderThan(rv) => rv.as_str(),
                    _ => "",
                };
                log::info!(
                    "{:?}: relisting from scratch: resourceVersion {rv:?} was issued by {issued_by}, now reading from {now}",
                    self.kind
                );
                self.episode.scratch();
                self.list_from = ListFrom::Latest;
                (Stage::Empty, None)
            }
            Err(e) if is_rv_unavailable(&e) && self.list_from != ListFrom::Latest => {
                log::info!(
                    "{:?}: list resourceVersion unavailable ({e}); listing the latest state",
                    self.kind
                );
                self.episode.scratch();
                self.list_from = ListFrom::Latest;
                (Stage::Empty, None)
            }
            Err(e) => {
                self.note_refusal(&e);
                self.failed(Phase::List, Cause::of(&e), &format!("list failed: {e}"));
                if let ListFrom::NotOlderThan(rv) = &self.list_from {
                    let stuck = self.episode.stuck();
                    if stuck >= MAX_FAILURES_WITHOUT_PROGRESS {
                        log::info!(
                            "{:?}: relisting from scratch (without resourceVersion): {stuck} failures in a row at resourceVersion {rv:?}, the last: {e}",
                            self.kind
                        );
                        self.episode.scratch();
                        self.list_from = ListFrom::Latest;
                    }
                }
                // The time spent reading the list is no calm: the delay keeps growing when
                // each list fails only after a long read.
                let delay = self.backoff.next_delay_after(started, Instant::now());
                (Stage::Empty, Some(delay))
            }
        }
    }

    fn step_watch_start(&mut self, rv: String) -> (Stage, Option<Duration>) {
        if rewatch::read_current_first(self.rewatch, &rv, self.rv_from) {
            if let Some(next) = self.read_current(&rv) {
                return next;
            }
        }
        let (lo, hi) = WATCH_TIMEOUT_SECONDS;
        let term = lo + random_below(hi - lo);
        let timeout = term.to_string();
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
        let deadline = self.bookmarks_expected;
        match self.lw.watch(&q, deadline, self.rv_from) {
            Ok(w) => {
                if let Some(o) = w.origin {
                    self.stats.set_server(o.server);
                }
                (
                    Stage::Watching {
                        rv,
                        stream: Stream::new(w.lines, deadline, Duration::from_secs(term)),
                    },
                    None,
                )
            }
            Err(UpstreamError::ForeignResourceVersion { issued_by, now }) => {
                self.server_switch(&rv, &issued_by, &now)
            }
            Err(e) => {
                self.note_refusal(&e);
                self.watch_failed(rv, WatchFailure::of_error(&e))
            }
        }
    }

    /// Reads the upstream's current RV before watching from `rv` ([`crate::upstream::rewatch`]):
    /// `None` to go on with the watch, or the next step: a relist from scratch when the
    /// upstream's RVs went back (or the selected server is of another domain), a failure like
    /// a watch's when the read fails (backoff; it counts toward the failures without progress).
    fn read_current(&mut self, rv: &str) -> Option<(Stage, Option<Duration>)> {
        match self.lw.current_resource_version(self.kind, self.rv_from) {
            Ok(current) => {
                self.stats.record_contact(unix_now());
                if rewatch::went_back(rv, &current) {
                    return Some(self.relist_from_scratch(
                        RelistReason::WentBack,
                        &format!(
                            "the upstream's resourceVersion went back from {rv:?} to {current:?} (etcd restored or control plane replaced?)"
                        ),
                    ));
                }
                self.rewatch = Rewatch::Fresh;
                None
            }
            Err(UpstreamError::ForeignResourceVersion { issued_by, now }) => {
                Some(self.server_switch(rv, &issued_by, &now))
            }
            Err(e) => {
                self.note_refusal(&e);
                let text = format!(
                    "reading the upstream's current resourceVersion before watching from {rv:?} failed: {e}"
                );
                Some(self.watch_failed(rv.to_string(), WatchFailure::Other(Cause::of(&e), text)))
            }
        }
    }

    /// The RV held was issued by a server of another domain than the selected one: relisted
    /// from scratch at once (nothing was sent).
    fn server_switch(&mut self, rv: &str, issued_by: &str, now: &str) -> (Stage, Option<Duration>) {
        self.relist_from_scratch(
            RelistReason::ServerSwitch,
            &format!("resourceVersion {rv:?} was issued by {issued_by}, now reading from {now}"),
        )
    }

    /// Counts, logs and reacts to a failed watch at `rv` (see the module's tables).
    fn watch_failed(&mut self, rv: String, failure: WatchFailure) -> (Stage, Option<Duration>) {
        self.rewatch = Rewatch::Interrupted;
        self.stats.record_watch_error();
        let stuck = self.episode.stuck();
        match &failure {
            // Routine (the upstream's watch window moved on): the relist line says it.
            WatchFailure::Expired(_) => {}
            WatchFailure::TooLarge(t) | WatchFailure::Undecodable(t) => {
                self.failed(Phase::Watch, Cause::Other, t);
            }
            WatchFailure::Other(cause, t) => self.failed(Phase::Watch, *cause, t),
        }
        match failure {
            WatchFailure::TooLarge(t) => self.relist_from_scratch(
                RelistReason::TooLarge,
                &format!("the upstream's resourceVersions went backwards ({t})"),
            ),
            f if stuck >= MAX_FAILURES_WITHOUT_PROGRESS => self.relist_from_scratch(
                RelistReason::Repeated,
                &format!(
                    "{stuck} failures in a row at resourceVersion {rv:?}, the last: {}",
                    f.text()
                ),
            ),
            WatchFailure::Expired(t) => self.relist_at(rv, RelistReason::Expired, &t, stuck > 1),
            WatchFailure::Undecodable(t) => self.relist_at(rv, RelistReason::Undecodable, &t, true),
            WatchFailure::Other(..) => (Stage::Listed { rv }, self.delay()),
        }
    }

    fn relist_at(
        &mut self,
        rv: String,
        reason: RelistReason,
        why: &str,
        wait: bool,
    ) -> (Stage, Option<Duration>) {
        log::info!(
            "{:?}: relisting from resourceVersion {rv:?}: {why}",
            self.kind
        );
        self.stats.record_relist(reason);
        self.list_from = ListFrom::NotOlderThan(rv);
        (Stage::Empty, if wait { self.delay() } else { None })
    }

    /// Drops the RV: the next list has no `resourceVersion` (a consistent read of the latest
    /// state). Immediate only for an RV refusal and only once per progress.
    fn relist_from_scratch(
        &mut self,
        reason: RelistReason,
        why: &str,
    ) -> (Stage, Option<Duration>) {
        let first = self.episode.scratch();
        let text = format!(
            "{:?}: relisting from scratch (without resourceVersion): {why}",
            self.kind
        );
        if reason == RelistReason::WentBack {
            log::warn!("{text}");
        } else {
            log::info!("{text}");
        }
        self.stats.record_relist(reason);
        self.list_from = ListFrom::Latest;
        // A move to another resourceVersion domain is no failure: relisted at once.
        let wait = match reason {
            RelistReason::ServerSwitch => false,
            RelistReason::TooLarge | RelistReason::WentBack => !first,
            _ => true,
        };
        (Stage::Empty, if wait { self.delay() } else { None })
    }

    fn step_watching(&mut self, rv: String, mut stream: Stream) -> (Stage, Option<Duration>) {
        let cap = self.line_cap();
        let read = decode::read_line(&mut *stream.lines, &mut self.line, cap);
        if matches!(read, Ok(Line::Complete | Line::TooLong)) {
            self.stats.record_contact(unix_now());
        }
        match read {
            Ok(Line::Complete) if self.line.iter().all(u8::is_ascii_whitespace) => {
                return (Stage::watching(rv, stream), None);
            }
            Ok(Line::Complete) => {}
            Ok(Line::Eof | Line::Truncated)
                if stream.events == 0 && stream.started.elapsed() < SHORT_WATCH =>
            {
                let f = WatchFailure::Other(Cause::Other, "watch ended at once, empty".into());
                return self.watch_failed(rv, f);
            }
            Ok(Line::Eof | Line::Truncated) => {
                log::debug!(
                    "{:?}: watch ended after {} events; rewatching",
                    self.kind,
                    stream.events
                );
                self.rewatch = Rewatch::Ended {
                    lasted: stream.started.elapsed(),
                    term: stream.term,
                    lines: stream.events,
                };
                self.progressed();
                return (Stage::Listed { rv }, None);
            }
            Ok(Line::TooLong) => return self.oversized_event(rv, stream),
            Err(e) if is_stall(&e) => return self.watch_stalled(rv, &stream),
            Err(e) if proto_watch::undecodable(&e).is_some() => {
                self.dropped += 1;
                let f = WatchFailure::Undecodable(format!("undecodable watch event: {e}"));
                return self.watch_failed(rv, f);
            }
            Err(e) => {
                let f = WatchFailure::Other(Cause::Unreachable, format!("watch stream broke: {e}"));
                return self.watch_failed(rv, f);
            }
        }
        let event = match decode::decode_event_text(&self.line) {
            Ok(ev) => ev,
            Err(e) => {
                self.dropped += 1;
                let f = WatchFailure::Undecodable(format!("undecodable watch event: {e}"));
                return self.watch_failed(rv, f);
            }
        };
        if let TextEvent::Added(o) | TextEvent::Modified(o) | TextEvent::Deleted(o) = &event {
            if let Some(reason) = decode::refusal_of(self.kind, &o.head, &rv) {
                return self.refused(rv, stream, &o.head, reason);
            }
        }
        let (change, new_rv) = match event {
            TextEvent::Added(o) | TextEvent::Modified(o) => {
                let new_rv = o.head.meta.resource_version.clone();
                let change = self
                    .named(&o.head)
                    .map(|key| Change::Upsert(Watched { key, text: o.text }));
                (change, new_rv)
            }
            TextEvent::Deleted(o) => {
                let new_rv = o.head.meta.resource_version.clone();
                (self.named(&o.head).map(Change::Delete), new_rv)
            }
            TextEvent::Bookmark { resource_version } => {
                if !self.bookmarks_expected {
                    log::info!(
                        "{:?}: the upstream sends bookmarks again: its watches are held to the {} s progress deadline from the next one",
                        self.kind,
                        self.lw.progress_deadline().as_secs()
                    );
                }
                self.bookmarks_expected = true;
                stream.bookmarked = true;
                (None, Some(resource_version))
            }
            TextEvent::Error(s) => {
                let text = format!("watch error {} {}: {}", s.code, s.reason, s.message);
                let f = if s.is_rv_too_large() {
                    WatchFailure::TooLarge(text)
                } else if s.code == 410 {
                    WatchFailure::Expired(text)
                } else if matches!(s.code, 401 | 403) {
                    WatchFailure::Other(Cause::Auth, text)
                } else {
                    WatchFailure::Other(Cause::Status(s.code), text)
                };
                return self.watch_failed(rv, f);
            }
        };
        self.progressed();
        if let Some(change) = change {
            self.sink.apply(self.kind, change);
        }
        let rv = new_rv.filter(|r| !r.is_empty()).unwrap_or(rv);
        stream.events += 1;
        (Stage::watching(rv, stream), None)
    }

    /// A watch event whose object does not fit the resource, or is older than the stream's
    /// position ([`decode::refusal_of`]): not applied, counted, named in one WARN per stream; the
    /// stream goes on at the same resourceVersion (a relist from the same upstream would not
    /// make it tell the truth, and the version the cache holds is the newer one).
    fn refused(
        &mut self,
        rv: String,
        mut stream: Stream,
        head: &decode::ObjectHead,
        reason: refused::Reason,
    ) -> (Stage, Option<Duration>) {
        refused::record(self.kind, reason);
        let text = format!(
            "{:?}: refusing a watch event's object {:?} {}/{} at resourceVersion {:?} ({}; the stream is at {rv:?}): not served",
            self.kind,
            head.kind.clone().flatten().unwrap_or_default(),
            head.meta.namespace.as_deref().unwrap_or(""),
            head.meta.name.as_deref().unwrap_or(""),
            head.meta.resource_version.as_deref().unwrap_or(""),
            reason.label(),
        );
        if std::mem::replace(&mut stream.warned_refusal, true) {
            log::debug!("{text}");
        } else {
            log::warn!("{text} (further ones on this stream at debug level; counted in grid_wrapper_objects_refused_total)");
        }
        self.progressed();
        stream.events += 1;
        (Stage::watching(rv, stream), None)
    }

    /// A watch line longer than the line cap: an object over the bound. Named from its first
    /// bytes, the rest skipped, it goes to the sink as [`Change::Oversized`] (the cache keeps
    /// the version it holds, stale; a new object is not served, as a list skips it), or as the
    /// deletion it is for a `DELETED`, and the stream goes on. Unnamed, the stream is
    /// given up and the resource relisted, as for an undecodable event.
    fn oversized_event(&mut self, rv: String, mut stream: Stream) -> (Stage, Option<Duration>) {
        let (kind, obj) = decode::event_ref_from_prefix(&self.line);
        let skipped = decode::skip_line(&mut *stream.lines);
        let read = self.line.len() as u64;
        self.line = Vec::new(); // do not keep the capped buffer for the rest of the stream
        let (more, found_end) = match skipped {
            Ok(s) => s,
            Err(e) => {
                let f = WatchFailure::Other(Cause::Unreachable, format!("watch stream broke: {e}"));
                return self.watch_failed(rv, f);
            }
        };
        let named = matches!(kind.as_deref(), Some("ADDED" | "MODIFIED" | "DELETED"));
        let (Some(name), true, true) = (obj.name.clone(), named, found_end) else {
            self.dropped += 1;
            let f = WatchFailure::Undecodable(format!(
                "watch event longer than the line cap ({} bytes) and not named in its first bytes",
                self.line_cap()
            ));
            return self.watch_failed(rv, f);
        };
        let bytes = read + more;
        self.skip_oversized(obj.namespace.as_deref(), Some(&name), bytes);
        if kind.as_deref() == Some("DELETED") {
            let head = decode::ObjectHead {
                meta: decode::ObjectRef {
                    namespace: obj.namespace,
                    name: Some(name),
                    resource_version: None,
                },
                ..Default::default()
            };
            if let Some(key) = self.named(&head) {
                self.sink.apply(self.kind, Change::Delete(key));
            }
        } else {
            // The cache keeps serving the version it holds (stale), or leaves a new one out.
            let item = Oversized {
                namespace: obj.namespace,
                name: Some(name),
                bytes,
            };
            self.sink.apply(self.kind, Change::Oversized(item));
        }
        self.progressed();
        // The stream's position never goes back (as for a refused event: `decode::refusal_of`).
        let rv = obj
            .resource_version
            .filter(|r| !r.is_empty() && !refused::older(r, &rv))
            .unwrap_or(rv);
        stream.events += 1;
        (Stage::watching(rv, stream), None)
    }

    /// Counts an object skipped for its size, and logs it: named, the sink (the cache) says what
    /// it serves instead, so DEBUG here; not named in its first bytes, a WARN once per reflector.
    fn skip_oversized(&mut self, namespace: Option<&str>, name: Option<&str>, bytes: u64) {
        self.stats.record_oversized();
        let named = name.is_some();
        let name = name.unwrap_or("(unnamed in its first bytes)");
        let key = match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        };
        let first = !named
            && self.warned_oversized.len() < MAX_WARNED_OVERSIZED
            && self.warned_oversized.insert(key.clone());
        let text = format!(
            "{:?}: skipping upstream object {key:?} of {bytes} bytes (over --max-object-bytes={}): it is not served",
            self.kind,
            self.lw.max_object_bytes()
        );
        if first {
            log::warn!("{text}");
        } else {
            log::debug!("{text}");
        }
    }

    /// The longest watch line read: the largest accepted object and its event's envelope.
    fn line_cap(&self) -> usize {
        self.lw
            .max_object_bytes()
            .saturating_add(WATCH_EVENT_ENVELOPE_BYTES)
    }

    /// No byte came within the stream's read limit. Held to the short deadline after a
    /// bookmark: the connection is presumed dead (a failure; rewatch after a backoff). Held to
    /// it without any bookmark yet: this upstream may not send bookmarks at all, so its
    /// watches get the long idle limit from now on, and the quiet stream is simply renewed.
    fn watch_stalled(&mut self, rv: String, stream: &Stream) -> (Stage, Option<Duration>) {
        let silent = stream.last_byte_age();
        if stream.deadline && !stream.bookmarked {
            self.bookmarks_expected = false;
            log::info!(
                "{:?}: no bookmark and no byte on the watch for {:.0} s: the upstream does not seem to send bookmarks; its watches get the {} s idle limit until a bookmark comes",
                self.kind,
                silent.as_secs_f64(),
                self.lw.idle_limit().as_secs()
            );
            self.rewatch = Rewatch::Interrupted;
            return (Stage::Listed { rv }, None);
        }
        let why = if stream.deadline {
            "although the upstream sends bookmarks"
        } else {
            "(idle limit)"
        };
        let text = format!(
            "watch stream silent for {:.0} s {why}",
            silent.as_secs_f64()
        );
        self.watch_failed(rv, WatchFailure::Other(Cause::Stalled, text))
    }

    /// Advances the state machine by one I/O step; returns the next state and how long to wait
    /// before the next step.
    /// A request answered with `Retry-After` is not repeated before it (capped, jittered
    /// upward); the backoff sequence advanced as for any failure and continues from there.
    pub(crate) fn step(&mut self, stage: Stage) -> (Stage, Option<Duration>) {
        let (next, wait) = match stage {
            Stage::Empty => self.step_list(),
            Stage::Listed { rv } => self.step_watch_start(rv),
            Stage::Watching { rv, stream } => self.step_watching(rv, stream),
        };
        match self.retry_after.take() {
            Some(ra) => {
                let backoff = wait.unwrap_or(Duration::ZERO);
                let random = random_below(u64::MAX);
                (
                    next,
                    Some(retry_after::wait_after(backoff, Some(ra), random)),
                )
            }
            None => (next, wait),
        }
    }

    /// The thread body: steps until `stop` is set (checked between steps and during waits).
    /// The stats are marked active while it runs.
    pub(crate) fn run(mut self, stop: &AtomicBool) {
        self.stats.set_active(true);
        let mut stage = Stage::Empty;
        while !stop.load(Ordering::Relaxed) {
            let (next, wait) = self.step(stage);
            stage = next;
            let (name, rv) = match &stage {
                Stage::Empty => ("Empty", ""),
                Stage::Listed { rv } => ("Listed", rv.as_str()),
                Stage::Watching { rv, .. } => ("Watching", rv.as_str()),
            };
            self.stats.set_position(name, rv);
            if let Some(d) = wait {
                let until = Instant::now() + d;
                while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(
                        STOP_POLL.min(until.saturating_duration_since(Instant::now())),
                    );
                }
            }
        }
        self.stats.set_active(false);
        self.stats.set_failing(false);
        log::debug!("{:?}: reflector stopped", self.kind);
    }
}

/// Starts a reflector thread for `kind`; it runs until `stop` is set. It records into [`stats::global`].
pub fn spawn(
    upstream: Upstream,
    kind: Resource,
    sink: Arc<dyn Sink>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let stats = stats::global().kind(kind).clone();
    spawn_with(upstream, kind, sink, stop, stats)
}

pub(crate) fn spawn_with<L: ListWatch + Send + 'static>(
    lw: L,
    kind: Resource,
    sink: Arc<dyn Sink>,
    stop: Arc<AtomicBool>,
    stats: Arc<KindStats>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("reflect-{kind:?}"))
        .spawn(move || Reflector::new(lw, kind, sink, Backoff::new(), stats).run(&stop))
}

#[cfg(test)]
#[path = "reflector_tests.rs"]
mod tests;
