//! One open watch stream: initial events, then the event log from its cursor, bookmarks and the
//! deadline (docs/SEMANTICS.md §6, §6.1). Frames reuse each served object's shared bytes, and a
//! log entry's event framing is made once per format and shared by all its watchers (the
//! fan-out of one change to many watchers allocates nothing per watcher).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::filter::{Filter, Selection};
use crate::api::handlers::{InitialEnd, Segment, WatchPlan};
use crate::api::negotiate::Format;
use crate::cache::published::Published;
use crate::cache::view::{Entry, Served};
use crate::k8s::status::ApiError;
use crate::k8s::Resource;
use crate::proto::{encode_object, envelope};
use crate::server::counters::{self, EndReason};
use crate::server::outbound::Outbound;
use crate::server::watchers::{query_value, WatchHandle, WatchInfo};

/// Bookmark period on a quiet stream (the apiserver's cadence).
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// The final bookmark is sent this long before the deadline.
pub const FINAL_BOOKMARK_BEFORE: Duration = Duration::from_secs(2);
/// Stop pulling log entries once this many bytes wait unsent.
pub const HIGH_WATER: usize = 256 * 1024;

/// Why a watch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `timeoutSeconds` elapsed.
    Deadline,
    /// The client could not keep up: more than the queue bound waited (never thinned).
    TooSlow,
    /// The log no longer holds the entries after the cursor.
    Evicted,
}

impl End {
    /// The `reason` this end is counted under.
    pub fn reason(self) -> EndReason {
        match self {
            End::Deadline => EndReason::Deadline,
            End::TooSlow => EndReason::TooSlow,
            End::Evicted => EndReason::Evicted,
        }
    }
}

/// State of one watch stream.
#[derive(Debug)]
pub struct Watcher {
    res: Resource,
    /// The events' wire format.
    format: Format,
    filter: Filter,
    /// `filter` selects every served object of `res`: events need no matching.
    everything: bool,
    cursor: u64,
    bookmarks: bool,
    deadline: Instant,
    next_bookmark: Instant,
    final_bookmark_sent: bool,
    /// The current RV when this stream's output last backed up (≥ [`HIGH_WATER`] unsent), or
    /// `None` while it drains. Only entries published after it count against the queue bound.
    blocked_at: Option<u64>,
    /// Events queued before [`Watcher::track`] (the initial ones).
    untracked_events: usize,
    /// The stream's entry in the registry of open watches, once tracked.
    track: Option<WatchHandle>,
}

/// Queues one chunk-framed JSON watch event: `{"type":T,"object":<bytes>}\n`.
pub fn push_event(out: &mut Outbound, kind: &str, object: Segment) {
    out.push_owned(json_head(kind, object.as_bytes().len()));
    out.push(object);
    out.push(Segment::Static(JSON_EVENT_END));
}

/// Queues one chunk-framed protobuf watch frame: the frame's length and `WatchEvent` up to the
/// object's bytes (`head`), the object's protobuf bytes, the envelope's tail.
fn push_frame(out: &mut Outbound, head: Vec<u8>, object: Segment) {
    out.push_owned(protobuf_head(&head, object.as_bytes().len()));
    out.push(object);
    out.push(Segment::Static(PROTOBUF_FRAME_END));
}

/// The end of a chunk-framed JSON watch event: the event's `}`, its newline, the chunk's CRLF.
const JSON_EVENT_END: &[u8] = b"}\n\r\n";
/// The end of a chunk-framed protobuf watch frame: [`envelope::TAIL`], then the chunk's CRLF.
const PROTOBUF_FRAME_END: &[u8] = &[0x1a, 0x00, 0x22, 0x00, b'\r', b'\n'];

/// The chunk size line and a JSON event up to its object: `<hex>\r\n{"type":T,"object":`, for
/// an object of `object_len` bytes.
fn json_head(kind: &str, object_len: usize) -> Vec<u8> {
    const OPEN: &[u8] = b"{\"type\":\"";
    const MID: &[u8] = b"\",\"object\":";
    let prefix = OPEN.len() + kind.len() + MID.len();
    let len = prefix + object_len + 2;
    let mut head = Vec::with_capacity(prefix + 18);
    push_hex(&mut head, len);
    head.extend_from_slice(b"\r\n");
    head.extend_from_slice(OPEN);
    head.extend_from_slice(kind.as_bytes());
    head.extend_from_slice(MID);
    head
}

/// The chunk size line and a protobuf frame up to the object's bytes (`head`, from
/// [`envelope::event_head`]), for an object of `object_len` bytes.
fn protobuf_head(head: &[u8], object_len: usize) -> Vec<u8> {
    let len = head.len() + object_len + envelope::TAIL.len();
    let mut chunk = Vec::with_capacity(head.len() + 18);
    push_hex(&mut chunk, len);
    chunk.extend_from_slice(b"\r\n");
    chunk.extend_from_slice(head);
    chunk
}

/// An event a log entry gives a watcher ([`transition`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The object starts matching: `ADDED` with the new object.
    Added,
    /// The object keeps matching: `MODIFIED` with the new object.
    Modified,
    /// The object stops matching: `DELETED` with the old object stamped with the entry's RV.
    Deleted,
}

impl Event {
    /// The event's `type`.
    pub fn name(self) -> &'static str {
        match self {
            Event::Added => "ADDED",
            Event::Modified => "MODIFIED",
            Event::Deleted => "DELETED",
        }
    }

    /// The object this event carries for `entry`.
    pub fn object(self, entry: &Entry) -> Option<Arc<Served>> {
        match self {
            Event::Added | Event::Modified => entry.new.clone(),
            Event::Deleted => entry.old_restamped(),
        }
    }

    /// Where the frame of this event in `format` is kept in an [`Entry`]'s shared wire slots.
    fn wire_slot(self, format: Format) -> usize {
        let format = match format {
            Format::Json => 0,
            Format::Protobuf => 3,
        };
        format + self as usize
    }
}

/// Queues `entry`'s `event` in `format`. Every watcher that gets this event shares its framing
/// (made by the first one, kept with the entry) and the object's bytes, so a delivery queues
/// three shared segments and allocates nothing.
fn push_entry(out: &mut Outbound, format: Format, res: Resource, entry: &Entry, event: Event) {
    let Some(obj) = event.object(entry) else {
        return;
    };
    let (bytes, end) = match format {
        Format::Json => (obj.bytes.clone(), JSON_EVENT_END),
        Format::Protobuf => (obj.protobuf(res), PROTOBUF_FRAME_END),
    };
    let head = entry.wire(event.wire_slot(format), || {
        match format {
            Format::Json => json_head(event.name(), bytes.len()),
            Format::Protobuf => protobuf_head(
                &envelope::event_head(event.name(), res.api_version(), res.kind(), bytes.len()),
                bytes.len(),
            ),
        }
        .into()
    });
    out.push(Segment::Shared(head));
    out.push(Segment::Shared(bytes));
    out.push(Segment::Static(end));
}

/// Queues a served object's event in `format`, sharing its bytes of that format.
pub fn push_object(out: &mut Outbound, format: Format, res: Resource, kind: &str, obj: &Served) {
    match format {
        Format::Json => push_event(out, kind, Segment::Shared(obj.bytes.clone())),
        Format::Protobuf => {
            let bytes = obj.protobuf(res);
            let head = envelope::event_head(kind, res.api_version(), res.kind(), bytes.len());
            push_frame(out, head, Segment::Shared(bytes));
        }
    }
}

/// Queues a BOOKMARK at `rv` in `format` ([`bookmark_object`]).
fn push_bookmark(out: &mut Outbound, format: Format, res: Resource, rv: u64, initial_end: bool) {
    let json = bookmark_object(res, rv, initial_end);
    match format {
        Format::Json => push_event(out, "BOOKMARK", Segment::Owned(json)),
        Format::Protobuf => {
            // Our own JSON: it parses, and every field of it is in the schema.
            let value = serde_json::from_slice(&json).unwrap_or_default();
            let bytes = encode_object(res, &value).bytes;
            let head = envelope::event_head("BOOKMARK", res.api_version(), res.kind(), bytes.len());
            push_frame(out, head, Segment::Owned(bytes));
        }
    }
}

/// Queues an ERROR event carrying `err`'s `Status` in `format`.
fn push_error(out: &mut Outbound, format: Format, err: &ApiError) {
    match format {
        Format::Json => push_event(out, "ERROR", Segment::Owned(err.to_json())),
        Format::Protobuf => {
            let frame = envelope::status_event(&err.to_value());
            let mut chunk = Vec::with_capacity(frame.len() + 20);
            push_hex(&mut chunk, frame.len());
            chunk.extend_from_slice(b"\r\n");
            chunk.extend_from_slice(&frame);
            chunk.extend_from_slice(b"\r\n");
            out.push_owned(chunk);
        }
    }
}

/// Appends `n` in lower-case hex (a chunk size), without the formatting machinery: this runs
/// once per event and watcher.
fn push_hex(out: &mut Vec<u8>, n: usize) {
    let digits = (usize::BITS - n.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (i * 4)) & 0xf]);
    }
}

/// A BOOKMARK object of the watched kind at `rv`, optionally marking the end of initial events.
pub fn bookmark_object(res: Resource, rv: u64, initial_end: bool) -> Vec<u8> {
    let annotations = if initial_end {
        ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
    } else {
        ""
    };
    format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{annotations}}}}}",
        res.kind(),
        res.api_version()
    )
    .into_bytes()
}

/// The event a watcher with `filter` gets for `entry` (docs/SEMANTICS.md §6, "Selectors on
/// watches"), if any.
///
/// `everything`: the filter selects every served object ([`Selection::Everything`], e.g.
/// kube-proxy's selector), so no object is matched.
pub fn transition(entry: &Entry, filter: &Filter, everything: bool) -> Option<Event> {
    let matches =
        |o: &Option<Arc<Served>>| o.as_ref().is_some_and(|s| everything || filter.matches(s));
    match (matches(&entry.old), matches(&entry.new)) {
        (false, true) => Some(Event::Added),
        (true, true) => Some(Event::Modified),
        // The old object stamped with the entry's RV (a real deletion's already is).
        (true, false) => Some(Event::Deleted),
        (false, false) => None,
    }
}

impl Watcher {
    /// Starts a stream: queues the initial events and marker. Returns `None` (after queueing the
    /// ERROR event and the stream's end) when the plan is expired.
    pub fn start(plan: WatchPlan, now: Instant, out: &mut Outbound) -> Option<Watcher> {
        if let Some(err) = &plan.expired {
            push_error(out, plan.format, err);
            counters::global().watch_ended(EndReason::Expired);
            return None;
        }
        for obj in &plan.initial {
            push_object(out, plan.format, plan.res, "ADDED", obj);
        }
        counters::global().watch_events(plan.res, plan.initial.len());
        match plan.initial_end {
            InitialEnd::None => {}
            InitialEnd::Bookmark => push_bookmark(out, plan.format, plan.res, plan.cursor, false),
            InitialEnd::InitialEventsEnd => {
                push_bookmark(out, plan.format, plan.res, plan.cursor, true)
            }
        }
        Some(Watcher {
            res: plan.res,
            format: plan.format,
            everything: plan.filter.selection(plan.res) == Selection::Everything,
            filter: plan.filter,
            cursor: plan.cursor,
            bookmarks: plan.bookmarks,
            deadline: now + Duration::from_secs(plan.timeout_secs),
            next_bookmark: now + BOOKMARK_EVERY,
            final_bookmark_sent: false,
            blocked_at: None,
            untracked_events: plan.initial.len(),
            track: None,
        })
    }

    /// Attaches the stream's registry entry (see `server::watchers`): from now on the cursor
    /// and event count are published there, and dropping the watcher unregisters it.
    pub fn track(&mut self, handle: WatchHandle) {
        handle.set_cursor(self.cursor);
        handle.add_events(std::mem::take(&mut self.untracked_events));
        self.track = Some(handle);
    }

    /// Publishes the bytes waiting for the client (to the registry, if tracked).
    pub fn set_unsent(&self, bytes: usize) {
        if let Some(t) = &self.track {
            t.set_unsent(bytes);
        }
    }

    /// Counts the stream ended for `reason` (if tracked; otherwise dropping it says nothing).
    pub fn ended(&self, reason: EndReason) {
        if let Some(t) = &self.track {
            t.end(reason);
        }
    }

    /// The watched resource.
    pub fn resource(&self) -> Resource {
        self.res
    }

    /// The last log entry (resourceVersion) queued to the stream.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// What the registry of open streams keeps about this one, started by `peer` with the raw
    /// `query` (selectors shown as given).
    pub fn info(&self, peer: &str, query: &str, now_unix: u64, relay: bool) -> WatchInfo {
        WatchInfo {
            peer: peer.to_string(),
            resource: self.res,
            namespace: self.filter.namespace.clone(),
            label_selector: query_value(query, "labelSelector"),
            field_selector: query_value(query, "fieldSelector"),
            started_unix: now_unix,
            cursor: self.cursor,
            relay,
        }
    }

    /// When [`Watcher::tick`] next has something to do.
    pub fn next_timer(&self) -> Instant {
        let mut t = self.deadline;
        if self.bookmarks {
            t = t.min(self.next_bookmark);
            if !self.final_bookmark_sent {
                t = t.min(
                    self.deadline
                        .checked_sub(FINAL_BOOKMARK_BEFORE)
                        .unwrap_or(self.deadline),
                );
            }
        }
        t
    }

    /// Moves log entries after the cursor into `out` until it holds [`HIGH_WATER`] bytes.
    /// `queue` is the watcher's bound (`--notify-channel-size`): when the socket is backed up and
    /// more entries than that wait, the watch ends.
    pub fn pump(
        &mut self,
        state: &Published,
        out: &mut Outbound,
        queue: usize,
        now: Instant,
    ) -> Result<(), End> {
        let coll = state.collection(self.res);
        // Fix (protocol_slow test): the slow-consumer rule (docs/SEMANTICS.md §6) counted the
        // whole backlog after the cursor, so a watch resuming into more than `queue` large
        // entries was ended as "too slow" as soon as its socket filled, although it was reading
        // at full speed — the replay it is entitled to (§6, "Starting a watch") is not a queue
        // overflow. Now only entries published while the stream stays backed up count, like the
        // original's channel.
        if out.len() >= HIGH_WATER {
            let since = *self.blocked_at.get_or_insert(state.current_rv());
            if coll.pending(self.cursor.max(since)) > queue {
                return Err(End::TooSlow);
            }
        } else {
            self.blocked_at = None;
        }
        let mut sent = 0;
        let mut result = Ok(());
        match coll.entries_after(self.cursor) {
            Ok(entries) => {
                for entry in entries {
                    if out.len() >= HIGH_WATER {
                        break;
                    }
                    if let Some(event) = transition(entry, &self.filter, self.everything) {
                        push_entry(out, self.format, self.res, entry, event);
                        sent += 1;
                        self.next_bookmark = now + BOOKMARK_EVERY;
                    }
                    self.cursor = entry.rv;
                }
            }
            Err(_) => result = Err(End::Evicted),
        }
        if sent > 0 {
            counters::global().watch_events(self.res, sent);
        }
        if let Some(t) = &self.track {
            t.add_events(sent);
            t.set_cursor(self.cursor);
        }
        result
    }

    /// Bookmarks and the deadline. Call after [`Watcher::pump`]; bookmarks are only sent when
    /// the watcher has consumed every entry (so the bookmark RV is true for it).
    pub fn tick(&mut self, state: &Published, out: &mut Outbound, now: Instant) -> Result<(), End> {
        if now >= self.deadline {
            return Err(End::Deadline);
        }
        if !self.bookmarks || state.collection(self.res).pending(self.cursor) > 0 {
            return Ok(());
        }
        let final_due = !self.final_bookmark_sent && now + FINAL_BOOKMARK_BEFORE >= self.deadline;
        if now >= self.next_bookmark || final_due {
            self.cursor = self.cursor.max(state.current_rv());
            if let Some(t) = &self.track {
                t.set_cursor(self.cursor);
            }
            push_bookmark(out, self.format, self.res, self.cursor, false);
            self.next_bookmark = now + BOOKMARK_EVERY;
            self.final_bookmark_sent |= final_due;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::query;
    use crate::cache::store::test_support;
    use crate::handoff::Change;

    const L: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

    fn slice(name: &str, gen: u32, extra: Option<(&str, &str)>) -> serde_json::Value {
        let mut labels = json!({"kubernetes.io/service-name": "web", "gen": gen.to_string()});
        if let Some((k, v)) = extra {
            labels[k] = json!(v);
        }
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"namespace": "default", "name": name, "labels": labels},
            "addressType": "IPv4", "endpoints": []})
    }

    #[test]
    fn chunk_sizes_are_lower_case_hex() {
        for n in [
            0usize,
            1,
            9,
            10,
            15,
            16,
            255,
            256,
            4095,
            65_536,
            3_500_000,
            usize::MAX,
        ] {
            let mut v = Vec::new();
            push_hex(&mut v, n);
            assert_eq!(String::from_utf8(v).ok(), Some(format!("{n:x}")), "{n}");
        }
        let mut out = Outbound::default();
        push_event(&mut out, "MODIFIED", Segment::Static(b"{}"));
        let mut bytes = Vec::new();
        out.write_to(&mut bytes).unwrap_or_else(|e| panic!("{e}"));
        let body = "{\"type\":\"MODIFIED\",\"object\":{}}\n";
        assert_eq!(
            String::from_utf8(bytes).ok(),
            Some(format!("{:x}\r\n{body}\r\n", body.len()))
        );
    }

    /// The wire bytes of what `push` queues.
    fn wire(push: impl FnOnce(&mut Outbound)) -> Vec<u8> {
        let mut out = Outbound::default();
        push(&mut out);
        let mut bytes = Vec::new();
        out.write_to(&mut bytes).unwrap_or_else(|e| panic!("{e}"));
        bytes
    }

    /// The v1 slices' log entries of `changes`, applied to a ready cache that serves slice "a".
    fn logged(changes: Vec<Change>) -> (Resource, Vec<Entry>) {
        let mut st = test_support::state("edge-1", 1);
        let res = Resource::SlicesV1;
        for k in [Resource::Nodes, Resource::Services, Resource::Endpoints] {
            st.apply(k, Change::Replace(vec![]), 0);
        }
        st.apply(res, Change::Replace(vec![slice("a", 0, None)]), 0);
        let ready_at = st.current_rv();
        let n = changes.len();
        for change in changes {
            st.apply(res, change, 0);
        }
        let entries = st.collection(res).after(ready_at, 100).unwrap_or_default();
        assert_eq!(entries.len(), n);
        (res, entries)
    }

    /// Logged entries of slice changes: two updates (a watcher whose selection the second stops
    /// matching gets its old content with the change's RV) and a deletion.
    fn slice_entries() -> (Resource, Vec<Entry>) {
        logged(vec![
            Change::Upsert(slice("a", 1, None)),
            Change::Upsert(slice("a", 2, Some(("gen-old", "")))),
            Change::Delete(slice("a", 2, None)),
        ])
    }

    #[test]
    fn an_entry_is_framed_once_and_shared_by_every_watcher() {
        let (res, entries) = slice_entries();
        for format in [Format::Json, Format::Protobuf] {
            for entry in &entries {
                for event in [Event::Added, Event::Modified, Event::Deleted] {
                    let Some(obj) = event.object(entry) else {
                        continue;
                    };
                    let first = wire(|o| push_entry(o, format, res, entry, event));
                    // A second watcher reuses the first one's framing: nothing is made again.
                    let head = entry.wire(event.wire_slot(format), || {
                        panic!("{event:?} in {format:?} was framed again")
                    });
                    let second = wire(|o| push_entry(o, format, res, entry, event));
                    assert_eq!(first, second);
                    assert!(first.starts_with(&head));
                    // The same bytes as framing the event for one watcher alone.
                    let alone = wire(|o| push_object(o, format, res, event.name(), &obj));
                    assert_eq!(first, alone, "{event:?} {format:?}");
                }
            }
        }
    }

    #[test]
    fn a_selector_leaver_is_restamped_once_per_entry() {
        let (_, entries) = slice_entries();
        let leaver = &entries[1];
        let (Some(old), Some(_)) = (&leaver.old, &leaver.new) else {
            panic!("not an update");
        };
        assert_ne!(old.rv, leaver.rv);
        let a = leaver.old_restamped().unwrap_or_else(|| panic!("no old"));
        let b = leaver.old_restamped().unwrap_or_else(|| panic!("no old"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.rv, leaver.rv);
        assert_eq!(a.bytes[..], old.restamped(leaver.rv).bytes[..]);
        // A deletion's old content already carries the deletion's RV.
        let deletion = &entries[2];
        let d = deletion.old_restamped().unwrap_or_else(|| panic!("no old"));
        assert!(deletion.old.as_ref().is_some_and(|o| Arc::ptr_eq(o, &d)));
    }

    #[test]
    fn events_for_everything_selections_skip_matching_but_are_the_same() {
        let (res, entries) = logged(vec![
            Change::Upsert(slice("b", 0, None)),
            Change::Upsert(slice("a", 1, None)),
            // Gains an excluding label: leaves the view (a deletion).
            Change::Upsert(slice("b", 1, Some(("service.kubernetes.io/headless", "")))),
            Change::Delete(slice("a", 1, None)),
        ]);
        for q in [
            L,
            "",
            "labelSelector=gen%3D1",
            "fieldSelector=metadata.name%3Da",
        ] {
            let opts = query::parse(q, res.selectable_fields()).unwrap_or_else(|e| panic!("{e:?}"));
            let filter = Filter {
                namespace: None,
                labels: opts.label_selector,
                fields: opts.field_selector,
            };
            let everything = filter.selection(res) == Selection::Everything;
            assert_eq!(everything, q == L || q.is_empty(), "{q}");
            let events = |skip: bool| -> Vec<Option<(&'static str, Vec<u8>)>> {
                entries
                    .iter()
                    .map(|e| {
                        let event = transition(e, &filter, skip)?;
                        Some((event.name(), event.object(e)?.bytes.to_vec()))
                    })
                    .collect()
            };
            assert_eq!(events(everything), events(false), "{q}");
        }
    }
}
