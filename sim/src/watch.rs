//! WATCH streams (docs/SEMANTICS.md §6, §6.1): start from a snapshot or a resumable RV (or answer
//! one ERROR 410 event; a too-large RV, once enabled, gets HTTP 504 or one ERROR 504 event), then
//! follow the store's history under the shared `Condvar`, translating each change through the
//! watcher's filter (enter → ADDED, stay → MODIFIED, leave → DELETED with the old object), with
//! periodic BOOKMARKs (none while the watcher's RV is ahead of the store's, as after a silent
//! `/sim/reset-rv`), the `timeoutSeconds` deadline, `/sim/close-watches`, `/sim/reset-rv`, a
//! refusal of its listener (`/sim/refuse`), lagging (history evicted under the watcher) and client disconnects ending the stream
//! cleanly. Events are JSON lines, or length-framed protobuf `WatchEvent`s for a client that
//! prefers protobuf (`WatchSpec::format`). The framing helpers are pure; `run` owns the blocking
//! I/O.

use crate::api::{served, Filter};
use crate::conn::Conn;
use crate::fault::TooLarge;
use crate::httpio::{end_chunked, start_chunked, write_chunk, write_response};
use crate::listen::Listen;
use crate::shared::Shared;
use crate::store::{Event, EventType, Kind, WatchStart};
use grid_wrapper::api::negotiate::Format;
use grid_wrapper::k8s::Resource;
use grid_wrapper::proto::{encode_object, envelope};
use serde_json::{json, Value};
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

/// Lifetime of a watch without a positive `timeoutSeconds`.
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often an idle watch checks whether its client went away.
const PEER_CHECK: Duration = Duration::from_secs(1);

/// One watch request.
#[derive(Clone, Debug)]
pub struct WatchSpec {
    /// Watched resource.
    pub res: Resource,
    /// Selection.
    pub filter: Filter,
    /// `resourceVersion` parameter.
    pub rv: Option<String>,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// Stream lifetime.
    pub timeout: Duration,
    /// The stream's format (JSON lines, or length-framed protobuf events).
    pub format: Format,
}

/// One framed event line: `{"type":T,"object":O}\n`.
pub fn frame(etype: &str, obj: &Value) -> Vec<u8> {
    let mut out = format!("{{\"type\":\"{etype}\",\"object\":").into_bytes();
    out.extend(serde_json::to_vec(obj).unwrap_or_default());
    out.extend_from_slice(b"}\n");
    out
}

/// One event of a `res` watch in `format`: a JSON line ([`frame`]), or a length-framed protobuf
/// `WatchEvent` whose object is the apiserver's envelope around the object's message
/// (`grid_wrapper::proto::envelope::event_head`).
pub fn event(res: Resource, format: Format, etype: &str, obj: &Value) -> Vec<u8> {
    match format {
        Format::Json => frame(etype, obj),
        Format::Protobuf => {
            let bytes = encode_object(res, obj).bytes;
            let mut out = envelope::event_head(etype, res.api_version(), res.kind(), bytes.len());
            out.reserve(bytes.len() + envelope::TAIL.len());
            out.extend_from_slice(&bytes);
            out.extend_from_slice(envelope::TAIL);
            out
        }
    }
}

/// An ERROR event carrying `status` (a `Status` object) in `format`.
pub fn error_event(format: Format, status: &Value) -> Vec<u8> {
    match format {
        Format::Json => frame("ERROR", status),
        Format::Protobuf => envelope::status_event(status),
    }
}

/// A BOOKMARK of the watched kind carrying only the RV.
pub fn bookmark(res: Resource, format: Format, rv: u64) -> Vec<u8> {
    event(
        res,
        format,
        "BOOKMARK",
        &json!({"kind": res.kind(), "apiVersion": res.api_version(),
                "metadata": {"resourceVersion": rv.to_string()}}),
    )
}

fn restamped(obj: &Value, rv: u64) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(rv.to_string()));
    }
    o
}

/// What one logged change means for this watcher (docs/SEMANTICS.md §6, "Selectors on
/// watches"), as a frame, or `None`.
pub fn translate(res: Resource, format: Format, filter: &Filter, ev: &Event) -> Option<Vec<u8>> {
    if ev.kind != Kind::of(res) {
        return None;
    }
    let old_m = ev.old.as_deref().filter(|o| filter.matches(o));
    let new_m = ev.new.as_deref().filter(|o| filter.matches(o));
    let (etype, obj) = match (ev.etype, old_m, new_m) {
        (EventType::Deleted, Some(old), _) => ("DELETED", served(res, old)),
        (EventType::Deleted, None, _) => return None,
        (_, None, Some(new)) => ("ADDED", served(res, new)),
        (_, Some(_), Some(new)) => ("MODIFIED", served(res, new)),
        (_, Some(old), None) => ("DELETED", served(res, &restamped(old, ev.rv))),
        (_, None, None) => return None,
    };
    Some(event(res, format, etype, &obj))
}

enum Step {
    Events(Vec<Arc<Event>>),
    Bookmark(u64),
    CheckPeer,
    End,
    /// The listener went down (`/sim/refuse`), or a reset cuts the open watches: the
    /// connection is cut, not ended cleanly, even when this thread notices before the socket is
    /// shut down.
    Cut,
}

struct OpenGuard<'a>(&'a Shared, &'a Listen);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::SeqCst);
        self.1.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one watch on `conn`, accepted by listener `listener`, until it ends; `Err` for socket
/// errors and for a cut stream (the connection is then closed without the terminating chunk). `close` is the request's `Connection: close` (only a non-streamed answer, the
/// HTTP 504, needs it).
pub fn run(
    conn: &mut Conn,
    shared: &Shared,
    spec: &WatchSpec,
    close: bool,
    listener: usize,
) -> io::Result<()> {
    let listen = shared.listen(listener);
    let generation = listen.generation();
    shared.served_watches.fetch_add(1, Ordering::Relaxed);
    shared.open_watches.fetch_add(1, Ordering::SeqCst);
    listen.open_watches.fetch_add(1, Ordering::SeqCst);
    let _guard = OpenGuard(shared, listen);
    let kind = Kind::of(spec.res);
    let (start, epoch, cuts) = {
        let store = shared.store.lock().unwrap_or_else(PoisonError::into_inner);
        let start = store.start_watch(kind, spec.rv.as_deref());
        (start, store.epoch(), store.cuts())
    };
    if let WatchStart::TooLarge {
        mode: TooLarge::Http,
        status,
    } = &start
    {
        let body = serde_json::to_vec(status).unwrap_or_default();
        return write_response(conn, 504, "application/json", &body, close);
    }
    start_chunked(conn, spec.format.watch_content_type())?;
    let write_chunk = |conn: &mut Conn, frame: &[u8]| {
        shared
            .watch_bytes
            .fetch_add(frame.len() as u64, Ordering::Relaxed);
        write_chunk(conn, frame)
    };
    let mut cursor = match start {
        WatchStart::Expired(e) => {
            write_chunk(conn, &error_event(spec.format, &e.to_value()))?;
            return end_chunked(conn);
        }
        WatchStart::TooLarge { status, .. } => {
            write_chunk(conn, &error_event(spec.format, &status))?;
            return end_chunked(conn);
        }
        WatchStart::Resume { cursor } => cursor,
        WatchStart::Snapshot { objects, cursor } => {
            for o in objects.iter().filter(|o| spec.filter.matches(o)) {
                let added = event(spec.res, spec.format, "ADDED", &served(spec.res, o));
                write_chunk(conn, &added)?;
            }
            conn.flush()?;
            cursor
        }
    };
    let now = Instant::now();
    let deadline = now + spec.timeout;
    let interval = shared.bookmark_interval.filter(|_| spec.bookmarks);
    let mut next_bookmark = interval.map(|i| now + i);
    let mut next_peer_check = now + PEER_CHECK;
    loop {
        let step = {
            let mut store = shared.store.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if listen.generation() != generation || store.cuts() != cuts {
                    break Step::Cut;
                }
                if store.epoch() != epoch {
                    break Step::End;
                }
                match store.events_after(cursor) {
                    None => break Step::End,
                    Some((evs, cur)) => {
                        cursor = cur;
                        if !evs.is_empty() {
                            break Step::Events(evs);
                        }
                    }
                }
                let now = Instant::now();
                if now >= deadline {
                    break Step::End;
                }
                if next_bookmark.is_some_and(|t| now >= t) {
                    if cursor <= store.rv() {
                        break Step::Bookmark(cursor);
                    }
                    // Ahead of the store (its counter went back): no bookmark, as an
                    // apiserver sends none below a watcher's RV.
                    next_bookmark = interval.map(|i| now + i);
                }
                if now >= next_peer_check {
                    break Step::CheckPeer;
                }
                let wake = [Some(deadline), next_bookmark, Some(next_peer_check)]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(deadline);
                store = shared
                    .changed
                    .wait_timeout(store, wake.saturating_duration_since(now))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        match step {
            Step::End => return end_chunked(conn),
            // An error, so that the connection is closed, not read for a next request.
            Step::Cut => {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "watch cut",
                ));
            }
            Step::Events(evs) => {
                for ev in &evs {
                    if let Some(f) = translate(spec.res, spec.format, &spec.filter, ev) {
                        write_chunk(conn, &f)?;
                    }
                }
                conn.flush()?;
            }
            Step::Bookmark(rv) => {
                write_chunk(conn, &bookmark(spec.res, spec.format, rv))?;
                conn.flush()?;
                next_bookmark = interval.map(|i| Instant::now() + i);
            }
            Step::CheckPeer => {
                if conn.peer_closed() {
                    return Ok(());
                }
                next_peer_check = Instant::now() + PEER_CHECK;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::Query;
    use crate::store::Store;

    fn parse(frame: &[u8]) -> Value {
        assert_eq!(frame.last(), Some(&b'\n'));
        serde_json::from_slice(frame).expect("frame is JSON")
    }

    #[test]
    fn selector_transitions() {
        let mut s = Store::new(100);
        let svc = |app: &str| {
            json!({"kind": "Service", "metadata": {"name": "web", "namespace": "default",
                   "labels": {"app": app}}})
        };
        let f = Filter::new(
            Resource::Services,
            None,
            &Query::parse("labelSelector=app%3Dweb"),
        )
        .expect("filter");
        let evs = [
            s.apply(svc("other")).expect("add"),   // not matching: nothing
            s.apply(svc("web")).expect("enter"),   // enters: ADDED
            s.apply(svc("web")).expect("stay"),    // stays: MODIFIED
            s.apply(svc("other")).expect("leave"), // leaves: DELETED old @ new RV
        ];
        let got: Vec<Option<Value>> = evs
            .iter()
            .map(|e| translate(Resource::Services, Format::Json, &f, e).map(|b| parse(&b)))
            .collect();
        assert!(got[0].is_none());
        let types: Vec<_> = got.iter().flatten().map(|v| v["type"].clone()).collect();
        assert_eq!(
            types,
            vec![json!("ADDED"), json!("MODIFIED"), json!("DELETED")]
        );
        let del = got[3].as_ref().expect("deleted");
        assert_eq!(
            del["object"]["metadata"]["labels"]["app"], "web",
            "old object"
        );
        assert_eq!(
            del["object"]["metadata"]["resourceVersion"],
            evs[3].rv.to_string()
        );
        assert_eq!(del["object"]["kind"], "Service");
        let gone = s
            .delete(
                Kind::Service,
                &grid_wrapper::k8s::ObjectKey::new("default", "web"),
            )
            .expect("delete");
        assert!(
            translate(Resource::Services, Format::Json, &f, &gone).is_none(),
            "already left"
        );
        let all = Filter::default();
        let d = parse(&translate(Resource::Services, Format::Json, &all, &gone).expect("deleted"));
        assert_eq!(
            d["object"]["metadata"]["resourceVersion"],
            gone.rv.to_string()
        );
        assert!(
            translate(Resource::Nodes, Format::Json, &all, &gone).is_none(),
            "other kind"
        );
    }

    #[test]
    fn frames_carry_kind_and_api_version() {
        let b = parse(&bookmark(Resource::SlicesV1beta1, Format::Json, 123));
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(b["object"]["kind"], "EndpointSlice");
        assert_eq!(b["object"]["apiVersion"], "discovery.k8s.io/v1beta1");
        assert_eq!(b["object"]["metadata"]["resourceVersion"], "123");
    }
}
