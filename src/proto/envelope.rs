//! The apiserver's protobuf envelope and watch framing, around messages from
//! [`super::encode`], written so that one object's [`super::Encoded::bytes`] is never copied into
//! a bigger message: a caller writes a head, the shared bytes, then [`TAIL`].
//!
//! From k8s.io/apimachinery:
//! * `pkg/runtime/serializer/protobuf/protobuf.go` (`Serializer.doEncode`, and
//!   `collections.go` for streamed lists, which writes the same bytes): a body is [`MAGIC`]
//!   then a `runtime.Unknown` whose `typeMeta` holds the object's apiVersion and kind;
//! * `pkg/runtime/types_proto.go` (`Unknown.NestedMarshalTo`, `MarshalToWriter`): the fields are
//!   typeMeta (1), raw (2), then contentEncoding (3) and contentType (4), both written even when
//!   empty (`0x1a 0x00 0x22 0x00`): that is [`TAIL`];
//! * `pkg/runtime/generated.pb.go`: `TypeMeta` writes apiVersion (1) and kind (2) always;
//! * `pkg/apis/meta/v1/generated.pb.go`: `ListMeta` writes selfLink (1), resourceVersion (2)
//!   and continue (3) always, remainingItemCount (4) only when set; `WatchEvent` is type (1) and
//!   object (2), a `RawExtension` whose raw (1) is the object's whole body, magic included;
//! * `pkg/util/framer/framer.go` (`lengthDelimitedFrameWriter`): each watch event is preceded
//!   by its length as a 4-byte big-endian integer; the stream has no magic and the events no
//!   `Unknown` of their own (the apiserver's stream serializer is the raw one).

use super::encode::encode_status;
use super::wire::{put_bytes, put_tag, put_varint, varint_len, LEN};
use serde_json::Value;

/// The first bytes of every non-streaming protobuf body.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The media type of protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The media type of protobuf watch streams.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// What follows `raw` in a `runtime.Unknown`: contentEncoding "" (3) and contentType "" (4).
pub const TAIL: &[u8] = &[0x1a, 0x00, 0x22, 0x00];

/// `runtime.TypeMeta` {apiVersion=1, kind=2}.
fn type_meta(api_version: &str, kind: &str) -> Vec<u8> {
    let mut tm = Vec::with_capacity(4 + api_version.len() + kind.len());
    put_bytes(&mut tm, 1, api_version.as_bytes());
    put_bytes(&mut tm, 2, kind.as_bytes());
    tm
}

/// The length of `raw` field bytes whose content is `len` long: tag, varint, content.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// The start of a GET body: [`MAGIC`] and the `Unknown`'s typeMeta field.
/// `object_head(..) ++ encoded.bytes ++ TAIL` is the whole body.
pub fn object_head(api_version: &str, kind: &str) -> Vec<u8> {
    let mut head = MAGIC.to_vec();
    put_bytes(&mut head, 1, &type_meta(api_version, kind));
    head
}

/// The length of a whole object body whose [`super::Encoded::bytes`] are `object_len` long.
fn object_body_len(api_version: &str, kind: &str, object_len: usize) -> usize {
    let tm = field_len(api_version.len()) + field_len(kind.len());
    MAGIC.len() + field_len(tm) + object_len + TAIL.len()
}

/// The start of a List body, up to its items: [`MAGIC`], the `Unknown`'s typeMeta, raw's tag and
/// length, and the List's ListMeta field. `items_len` is the sum of the items'
/// [`super::Encoded::bytes`] lengths; `list_head(..) ++ items... ++ TAIL` is the whole body.
pub fn list_head(
    api_version: &str,
    list_kind: &str,
    resource_version: &str,
    items_len: usize,
) -> Vec<u8> {
    let mut list_meta = Vec::with_capacity(8 + resource_version.len());
    put_bytes(&mut list_meta, 1, b""); // selfLink
    put_bytes(&mut list_meta, 2, resource_version.as_bytes());
    put_bytes(&mut list_meta, 3, b""); // continue
    let list_len = field_len(list_meta.len()) + items_len;
    let mut head = object_head(api_version, list_kind);
    put_tag(&mut head, 2, LEN);
    put_varint(&mut head, list_len as u64);
    put_bytes(&mut head, 1, &list_meta);
    head
}

/// A whole `Status` body. A Status is unversioned: its typeMeta is apiVersion `v1`, kind
/// `Status`, whatever the request's group.
pub fn status_body(status: &Value) -> Vec<u8> {
    let mut body = object_head("v1", "Status");
    put_bytes(&mut body, 2, &encode_status(status));
    body.extend_from_slice(TAIL);
    body
}

/// The start of one watch frame, up to the object's bytes: the 4-byte big-endian length, the
/// `WatchEvent`'s type, the object field's and its raw's tags and lengths, and the object body's
/// [`object_head`]. `object_len` is the object's [`super::Encoded::bytes`] length;
/// `event_head(..) ++ encoded.bytes ++ TAIL` is the whole frame.
///
/// A frame longer than 4 GiB cannot be framed; the length is then wrong (Go truncates too).
pub fn event_head(event_type: &str, api_version: &str, kind: &str, object_len: usize) -> Vec<u8> {
    let body_len = object_body_len(api_version, kind, object_len);
    let raw_ext_len = field_len(body_len);
    let event_len = field_len(event_type.len()) + field_len(raw_ext_len);
    let mut head = Vec::with_capacity(32 + event_type.len() + api_version.len() + kind.len());
    head.extend_from_slice(&(event_len as u32).to_be_bytes());
    put_bytes(&mut head, 1, event_type.as_bytes());
    put_tag(&mut head, 2, LEN);
    put_varint(&mut head, raw_ext_len as u64);
    put_tag(&mut head, 1, LEN);
    put_varint(&mut head, body_len as u64);
    head.extend_from_slice(&object_head(api_version, kind));
    head
}

/// A whole `ERROR` watch frame carrying `status`.
pub fn status_event(status: &Value) -> Vec<u8> {
    let body = status_body(status);
    let raw_ext_len = field_len(body.len());
    let event_len = field_len("ERROR".len()) + field_len(raw_ext_len);
    let mut frame = Vec::with_capacity(4 + event_len);
    frame.extend_from_slice(&(event_len as u32).to_be_bytes());
    put_bytes(&mut frame, 1, b"ERROR");
    put_tag(&mut frame, 2, LEN);
    put_varint(&mut frame, raw_ext_len as u64);
    put_bytes(&mut frame, 1, &body);
    frame
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
mod tests;
