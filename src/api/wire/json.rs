//! The JSON forms: a list's envelope around its items, a watch event's line around its object,
//! the BOOKMARK object. The objects' own bytes are made once, when they are published; this
//! only frames them.

use std::sync::Arc;

use super::{join, EventChunk, Segment};
use crate::cache::collection::Served;
use crate::http::response::{push_chunk_size, CHUNK_END};
use crate::k8s::Resource;

/// A list body: the envelope up to the first item, then each item's shared bytes joined by
/// constant `,` segments (no copy of a served object; the socket takes them with vectored
/// writes).
pub fn list<'a>(
    res: Resource,
    rv: u64,
    items: impl ExactSizeIterator<Item = &'a Arc<Served>>,
) -> Vec<Segment> {
    let mut body = Vec::with_capacity(items.len() * 2 + 2);
    body.push(Segment::Owned(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[",
            res.list_kind(),
            res.api_version(),
            rv
        )
        .into_bytes(),
    ));
    for (i, item) in items.enumerate() {
        if i > 0 {
            body.push(Segment::Static(b","));
        }
        body.push(Segment::Shared(item.json()));
    }
    body.push(Segment::Static(b"]}"));
    body
}

/// What follows a watch event's object: the event's `}`, its newline.
const EVENT_CLOSE: &[u8] = b"}\n";
/// The end of a chunk-framed watch event: the event's `}` and newline, then the chunk's CRLF.
pub const EVENT_END: &[u8] =
    &join::<{ EVENT_CLOSE.len() + CHUNK_END.len() }>(EVENT_CLOSE, CHUNK_END);

/// The chunk-size line and a watch event up to its object: `<hex>\r\n{"type":T,"object":`,
/// for an object of `object_len` bytes.
pub fn event_head(kind: &str, object_len: usize) -> Vec<u8> {
    const OPEN: &[u8] = b"{\"type\":\"";
    const MID: &[u8] = b"\",\"object\":";
    let prefix = OPEN.len() + kind.len() + MID.len();
    let len = prefix + object_len + EVENT_CLOSE.len();
    let mut head = Vec::with_capacity(prefix + 18);
    push_chunk_size(&mut head, len);
    head.extend_from_slice(OPEN);
    head.extend_from_slice(kind.as_bytes());
    head.extend_from_slice(MID);
    head
}

/// One chunk-framed watch event: `{"type":T,"object":<object>}\n`.
pub fn event(kind: &str, object: Segment) -> EventChunk {
    [
        Segment::Owned(event_head(kind, object.as_bytes().len())),
        object,
        Segment::Static(EVENT_END),
    ]
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
