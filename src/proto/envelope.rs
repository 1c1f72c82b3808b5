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
//!
//! The decoders take the same bytes apart without copying them: [`unwrap_body`] (a GET body, a
//! List body, a watch event's object), [`decode_list`] (a List's metadata and items) and
//! [`decode_frame`] (one watch frame); [`event_json`] turns a frame into the JSON watch line the
//! apiserver would have sent. Every length is checked against the bytes at hand (and a frame's
//! against the caller's bound) before anything is read or kept.

use super::decode::{self, DecodeError, Decoded, TypeMeta};
use super::encode::encode_status;
use super::read::{self, Value as Wire};
use super::wire::{put_bytes, put_tag, put_varint, varint_len, LEN};
use crate::k8s::Resource;
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

/// A protobuf body taken apart: what [`MAGIC`] and its `runtime.Unknown` hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Body<'a> {
    /// `typeMeta.apiVersion` (`v1`, `discovery.k8s.io/v1`).
    pub api_version: &'a str,
    /// `typeMeta.kind` (`Service`, `ServiceList`, `Status`).
    pub kind: &'a str,
    /// The object's (or the List's) message.
    pub raw: &'a [u8],
}

impl<'a> Body<'a> {
    /// The typeMeta, for [`decode::decode_object`].
    pub fn type_meta(&self) -> TypeMeta<'a> {
        TypeMeta {
            api_version: self.api_version,
            kind: self.kind,
        }
    }
}

/// A string field of an envelope.
fn utf8<'a>(b: &'a [u8], what: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(b).map_err(|_| DecodeError::Envelope(what))
}

/// The bytes of a length-delimited field.
fn bytes_of<'a>(v: Wire<'a>, what: &'static str) -> Result<&'a [u8], DecodeError> {
    match v {
        Wire::Bytes(b) => Ok(b),
        _ => Err(DecodeError::Envelope(what)),
    }
}

/// Takes a body apart: [`MAGIC`], then a `runtime.Unknown` {typeMeta=1, raw=2,
/// contentEncoding=3, contentType=4}. A content encoding, or a content type other than
/// protobuf's, is refused (the apiserver sets neither).
pub fn unwrap_body(body: &[u8]) -> Result<Body<'_>, DecodeError> {
    let unknown = body
        .strip_prefix(&MAGIC[..])
        .ok_or(DecodeError::Envelope("no k8s\\0 magic"))?;
    let mut out = Body {
        api_version: "",
        kind: "",
        raw: &[],
    };
    for f in read::fields(unknown) {
        match f? {
            (1, v) => {
                for f in read::fields(bytes_of(v, "typeMeta is not a message")?) {
                    match f? {
                        (1, v) => {
                            out.api_version =
                                utf8(bytes_of(v, "bad apiVersion")?, "bad apiVersion")?
                        }
                        (2, v) => out.kind = utf8(bytes_of(v, "bad kind")?, "bad kind")?,
                        _ => {}
                    }
                }
            }
            (2, v) => out.raw = bytes_of(v, "raw is not bytes")?,
            (3, v) => {
                let encoding = bytes_of(v, "bad contentEncoding")?;
                if !encoding.is_empty() {
                    return Err(DecodeError::Envelope("a content encoding"));
                }
            }
            (4, v) => {
                let ct = bytes_of(v, "bad contentType")?;
                if !ct.is_empty() && ct != CONTENT_TYPE.as_bytes() {
                    return Err(DecodeError::Envelope("a content type other than protobuf"));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A List message taken apart (the `raw` of a `...List` body).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListBody<'a> {
    /// `metadata.resourceVersion`.
    pub resource_version: &'a str,
    /// `metadata.continue` (empty: the last page).
    pub continue_token: &'a str,
    /// `metadata.remainingItemCount`, when set.
    pub remaining_item_count: Option<i64>,
    /// Each item's message, in order, for [`decode::decode_object`] (no typeMeta: a JSON
    /// List's items have no `kind` or `apiVersion` either).
    pub items: Vec<&'a [u8]>,
}

/// Takes a List message apart: metadata (ListMeta {selfLink=1, resourceVersion=2, continue=3,
/// remainingItemCount=4}) and items (2, repeated). Other fields are skipped.
pub fn decode_list(raw: &[u8]) -> Result<ListBody<'_>, DecodeError> {
    let mut list = ListBody::default();
    for f in read::fields(raw) {
        match f? {
            (1, v) => {
                for f in read::fields(bytes_of(v, "metadata is not a message")?) {
                    match f? {
                        (2, v) => {
                            list.resource_version =
                                utf8(bytes_of(v, "bad resourceVersion")?, "bad resourceVersion")?
                        }
                        (3, v) => {
                            list.continue_token =
                                utf8(bytes_of(v, "bad continue")?, "bad continue")?
                        }
                        (4, Wire::Varint(n)) => list.remaining_item_count = Some(n as i64),
                        (4, _) => return Err(DecodeError::Envelope("bad remainingItemCount")),
                        _ => {}
                    }
                }
            }
            (2, v) => list.items.push(bytes_of(v, "an item is not a message")?),
            _ => {}
        }
    }
    Ok(list)
}

/// One watch event taken apart (`metav1.WatchEvent` {type=1, object=2: RawExtension {raw=1}}).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: &'a str,
    /// The object's body (a `Status` for `ERROR`).
    pub object: Body<'a>,
}

/// Takes the first watch frame of `buf` apart: `None` while `buf` does not hold all of it, else
/// the event and the frame's length (4 + its stated length) to consume. A stated length over
/// `limit` is refused at once, before its bytes arrive.
pub fn decode_frame(buf: &[u8], limit: usize) -> Result<Option<(Event<'_>, usize)>, DecodeError> {
    let Some(head) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*head) as usize;
    if len > limit {
        return Err(DecodeError::FrameTooLong { len, limit });
    }
    let Some(frame) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    let mut event_type = None;
    let mut object = None;
    for f in read::fields(frame) {
        match f? {
            (1, v) => event_type = Some(utf8(bytes_of(v, "bad event type")?, "bad event type")?),
            (2, v) => {
                for f in read::fields(bytes_of(v, "object is not a message")?) {
                    if let (1, v) = f? {
                        object = Some(bytes_of(v, "bad object raw")?);
                    }
                }
            }
            _ => {}
        }
    }
    let event_type = event_type.ok_or(DecodeError::Envelope("watch event without a type"))?;
    let object = object.ok_or(DecodeError::Envelope("watch event without an object"))?;
    Ok(Some((
        Event {
            event_type,
            object: unwrap_body(object)?,
        },
        4 + len,
    )))
}

/// The JSON watch line (`{"type":"ADDED","object":{...}}`, no newline) the apiserver would have
/// sent for `event` of a `res` watch: the object with its `kind` and `apiVersion`, decoded as a
/// `Status` when its kind is `Status` (an `ERROR` event's), else as a `res` object as the cache
/// keeps it ([`decode::decode_object_kept`]: without `metadata.managedFields`).
pub fn event_json(res: Resource, event: &Event<'_>) -> Result<Decoded, DecodeError> {
    let obj = &event.object;
    let object = if obj.kind == "Status" {
        decode::decode_status(obj.raw, Some(obj.type_meta()))?
    } else {
        decode::decode_object_kept(res, obj.raw, Some(obj.type_meta()))?
    };
    let mut json = Vec::with_capacity(object.json.len() + 32 + event.event_type.len());
    json.extend_from_slice(b"{\"type\":");
    decode::go_string(&mut json, event.event_type.as_bytes());
    json.extend_from_slice(b",\"object\":");
    json.extend_from_slice(&object.json);
    json.push(b'}');
    Ok(Decoded {
        json,
        unknown: object.unknown,
    })
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
mod tests;
