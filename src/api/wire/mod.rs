//! The bytes of every cache-backed answer, one home per format: the JSON forms in [`json`],
//! the protobuf forms in [`protobuf`] (around [`crate::proto::envelope`]'s message layout),
//! and here what picks between them by [`Format`]. Pure.
//!
//! A body is a list of [`Segment`]s: framing bytes of its own, and each served object's shared
//! serialization, never copied (the server writes them with vectored I/O). A watch event is
//! one HTTP chunk in three segments ([`EventChunk`]): the chunk-size line with the event up to
//! its object, the object's shared bytes, and the event's end with the chunk's CRLF; the
//! chunk framing itself is [`crate::http::response`]'s. What an event is (ADDED, MODIFIED,
//! DELETED for a selection) is decided by [`crate::api::transition`], not here.
//!
//! It does not queue or write anything: `server::watch` and `server::conn` hand the segments
//! to the connection's queue.

pub mod json;
pub mod protobuf;

use std::sync::Arc;

use crate::api::negotiate::Format;
use crate::api::transition::Event;
use crate::cache::collection::{Entry, Served};
use crate::http::response::CHUNK_END;
use crate::k8s::status::ApiError;
use crate::k8s::Resource;

/// A piece of a response body: our own bytes, or a served object's shared serialization.
#[derive(Clone, Debug)]
pub enum Segment {
    /// Bytes owned by this response.
    Owned(Vec<u8>),
    /// A served object's bytes, shared with every other list and watcher.
    Shared(Arc<[u8]>),
    /// Constant framing bytes.
    Static(&'static [u8]),
}

impl Segment {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Segment::Owned(v) => v,
            Segment::Shared(b) => b,
            Segment::Static(b) => b,
        }
    }
}

/// One chunk-framed watch event: the chunk-size line and the event up to its object, the
/// object's bytes, then the event's end and the chunk's CRLF.
pub type EventChunk = [Segment; 3];

/// A list body of `items` (in key order) at resourceVersion `rv`.
pub fn list<'a>(
    format: Format,
    res: Resource,
    rv: u64,
    items: impl ExactSizeIterator<Item = &'a Arc<Served>>,
) -> Vec<Segment> {
    match format {
        Format::Json => json::list(res, rv, items),
        Format::Protobuf => protobuf::list(res, rv, items),
    }
}

/// A GET body: the object's shared bytes (enveloped for protobuf).
pub fn object(format: Format, res: Resource, obj: &Served) -> Vec<Segment> {
    match format {
        Format::Json => vec![Segment::Shared(obj.json())],
        Format::Protobuf => protobuf::object(res, obj),
    }
}

/// A `Status` body for `err`, as the apiserver answers errors in the negotiated format.
pub fn status(format: Format, err: &ApiError) -> Vec<u8> {
    match format {
        Format::Json => err.to_json(),
        Format::Protobuf => crate::proto::envelope::status_body(&err.to_value()),
    }
}

/// A served object's watch event of type `kind`, sharing its bytes of that format.
pub fn event(format: Format, res: Resource, kind: &str, obj: &Served) -> EventChunk {
    match format {
        Format::Json => json::event(kind, Segment::Shared(obj.json())),
        Format::Protobuf => protobuf::event(res, kind, Segment::Shared(obj.protobuf(res))),
    }
}

/// `entry`'s `event` ([`crate::api::transition::transition`]). Every watcher that gets this
/// event shares its framing (made by the first one, kept with the entry, [`Entry::wire`]) and
/// the object's bytes: a delivery allocates nothing. `None` when the entry has no object for
/// the event.
pub fn entry_event(
    format: Format,
    res: Resource,
    entry: &Entry,
    event: Event,
) -> Option<EventChunk> {
    let obj = event.object(entry)?;
    let (bytes, end) = match format {
        // Kept with the entry too: an object held in protobuf form only is decoded for the
        // first JSON watcher, not for each (the log's retention bounds what entries keep).
        Format::Json => (
            entry.wire(json_body_slot(event), || obj.json()),
            json::EVENT_END,
        ),
        Format::Protobuf => (obj.protobuf(res), protobuf::FRAME_END),
    };
    let head = entry.wire(slot(format, event), || {
        match format {
            Format::Json => json::event_head(event.name(), bytes.len()),
            Format::Protobuf => protobuf::event_head(res, event.name(), bytes.len()),
        }
        .into()
    });
    Some([
        Segment::Shared(head),
        Segment::Shared(bytes),
        Segment::Static(end),
    ])
}

/// Where the framing of `event` in `format` is kept among an [`Entry`]'s shared slots: one per
/// event type and format.
fn slot(format: Format, event: Event) -> usize {
    let format = match format {
        Format::Json => 0,
        Format::Protobuf => Event::ALL.len(),
    };
    format + event as usize
}

/// Where the JSON of `event`'s object is kept among an [`Entry`]'s shared slots: after the
/// framings ([`slot`]).
fn json_body_slot(event: Event) -> usize {
    2 * Event::ALL.len() + event as usize
}

const _: () = assert!(3 * Event::ALL.len() == crate::cache::collection::WIRE_SLOTS);

/// A BOOKMARK at `rv` ([`json::bookmark_object`]), optionally marking the end of the initial
/// events.
pub fn bookmark(format: Format, res: Resource, rv: u64, initial_end: bool) -> EventChunk {
    let json = json::bookmark_object(res, rv, initial_end);
    match format {
        Format::Json => json::event("BOOKMARK", Segment::Owned(json)),
        Format::Protobuf => protobuf::bookmark(res, &json),
    }
}

/// `event` without its HTTP chunk framing: what a close-delimited body carries (an HTTP/1.0
/// client's watch, which must not be chunked). The head's few bytes are copied past their
/// chunk-size line; the object's stay shared.
pub fn unchunked([head, object, end]: EventChunk) -> EventChunk {
    let bytes = head.as_bytes();
    let start = bytes
        .windows(CHUNK_END.len())
        .position(|w| w == CHUNK_END)
        .map_or(0, |i| i + CHUNK_END.len());
    let end = match end {
        Segment::Static(b) => Segment::Static(b.strip_suffix(CHUNK_END).unwrap_or(b)),
        other => {
            let b = other.as_bytes();
            Segment::Owned(b.strip_suffix(CHUNK_END).unwrap_or(b).to_vec())
        }
    };
    [Segment::Owned(bytes[start..].to_vec()), object, end]
}

/// An ERROR event carrying `err`'s `Status`.
pub fn error_event(format: Format, err: &ApiError) -> EventChunk {
    match format {
        Format::Json => json::event("ERROR", Segment::Owned(err.to_json())),
        Format::Protobuf => protobuf::error_event(err),
    }
}

/// `a` then `b`, as a constant: an end of framing that is one segment although two formats
/// own its parts (a protobuf frame's tail and the chunk's CRLF).
const fn join<const N: usize>(a: &[u8], b: &[u8]) -> [u8; N] {
    assert!(a.len() + b.len() == N, "join: wrong length");
    let mut out = [0; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    while i < N {
        out[i] = b[i - a.len()];
        i += 1;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
