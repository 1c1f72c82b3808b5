//! The protobuf forms (`application/vnd.kubernetes.protobuf`): a list and a GET body around the
//! objects' shared protobuf bytes, and the watch frames, each one chunk. The message layout
//! (magic, `runtime.Unknown`, `ListMeta`, `WatchEvent`, the length prefix) is
//! [`crate::proto::envelope`]'s; this puts it around the shared bytes and into chunks.

use std::sync::Arc;

use super::{join, EventChunk, Segment};
use crate::cache::collection::Served;
use crate::http::response::{push_chunk_size, CHUNK_END};
use crate::k8s::status::ApiError;
use crate::k8s::Resource;
use crate::proto::{encode_json, envelope};

/// A list body: the envelope and list metadata, then each item's shared protobuf bytes (each
/// already framed as the list's `items` field), then the envelope's tail.
pub fn list<'a>(
    res: Resource,
    rv: u64,
    items: impl ExactSizeIterator<Item = &'a Arc<Served>>,
) -> Vec<Segment> {
    let mut body = Vec::with_capacity(items.len() + 2);
    body.push(Segment::Static(b""));
    let mut len = 0;
    for item in items {
        let bytes = item.protobuf(res);
        len += bytes.len();
        body.push(Segment::Shared(bytes));
    }
    body[0] = Segment::Owned(envelope::list_head(
        res.api_version(),
        res.list_kind(),
        &rv.to_string(),
        len,
    ));
    body.push(Segment::Static(envelope::TAIL));
    body
}

/// A GET body: the envelope, the object's shared protobuf bytes, the envelope's tail.
pub fn object(res: Resource, obj: &Served) -> Vec<Segment> {
    vec![
        Segment::Owned(envelope::object_head(res.api_version(), res.kind())),
        Segment::Shared(obj.protobuf(res)),
        Segment::Static(envelope::TAIL),
    ]
}

/// The end of a chunk-framed watch frame: [`envelope::TAIL`], then the chunk's CRLF.
pub const FRAME_END: &[u8] =
    &join::<{ envelope::TAIL.len() + CHUNK_END.len() }>(envelope::TAIL, CHUNK_END);

/// The chunk-size line and a watch frame of type `kind` up to its object's bytes
/// ([`envelope::event_head`]), for an object of `object_len` bytes.
pub fn event_head(res: Resource, kind: &str, object_len: usize) -> Vec<u8> {
    let head = envelope::event_head(kind, res.api_version(), res.kind(), object_len);
    let len = head.len() + object_len + envelope::TAIL.len();
    let mut chunk = Vec::with_capacity(head.len() + 18);
    push_chunk_size(&mut chunk, len);
    chunk.extend_from_slice(&head);
    chunk
}

/// One chunk-framed watch frame of type `kind` around an object's protobuf bytes.
pub fn event(res: Resource, kind: &str, object: Segment) -> EventChunk {
    [
        Segment::Owned(event_head(res, kind, object.as_bytes().len())),
        object,
        Segment::Static(FRAME_END),
    ]
}

/// A BOOKMARK frame of the object `json` ([`super::json::bookmark_object`]).
pub fn bookmark(res: Resource, json: &[u8]) -> EventChunk {
    // Our own JSON: it parses, and every field of it is in the schema.
    let bytes = encode_json(res, json).bytes;
    event(res, "BOOKMARK", Segment::Owned(bytes))
}

/// An ERROR frame carrying `err`'s `Status` ([`envelope::status_event`]: a `Status` is
/// unversioned, so the frame is whole, not a head around shared bytes).
pub fn error_event(err: &ApiError) -> EventChunk {
    let frame = envelope::status_event(&err.to_value());
    let mut size = Vec::with_capacity(20);
    push_chunk_size(&mut size, frame.len());
    [
        Segment::Owned(size),
        Segment::Owned(frame),
        Segment::Static(CHUNK_END),
    ]
}
