//! A protobuf LIST body (`application/vnd.kubernetes.protobuf`) split into its items while it
//! is read, as [`crate::upstream::list_split::ListSplitter`] splits a JSON one: the whole body is
//! never held, each item is kept only until it is decoded.
//!
//! The body is [`envelope::MAGIC`] and a `runtime.Unknown` {typeMeta=1, raw=2,
//! contentEncoding=3, contentType=4}; its raw is the List message {metadata=1 (ListMeta),
//! items=2 (repeated)} (see [`crate::proto::envelope`]). The splitter follows the fields' tags
//! and lengths as the bytes arrive: the typeMeta, the content fields and the ListMeta are kept
//! (within [`MAX_ENVELOPE_BYTES`], as a JSON list's envelope) and checked as
//! [`envelope::unwrap_body`] and [`envelope::decode_list`] check them; each item is kept to its
//! end, then written as the JSON the apiserver would have sent for it ([`pdecode::decode_object`])
//! and handed out as a JSON list's item is ([`ProtoListSplitter::take_items`]), so what comes
//! after (the cache's list path) is the JSON path's. The kind of the items is the List's
//! typeMeta (`ServiceList` of `v1`: Services); a List of a kind grid-wrapper does not cache, or
//! items before the typeMeta, are refused.
//!
//! Bounds: an item whose message is longer than the item bound is not kept (its first
//! [`OVERSIZED_PREFIX_BYTES`] are, to name it; the rest streams by) and is reported as an
//! [`Oversized`] entry of its message's length; an item whose JSON is longer than the bound is
//! reported the same way, of its JSON's length (the bound is of the JSON the cache would keep,
//! as for a JSON upstream). A length that runs past the List, or a List over
//! [`MAX_LIST_MESSAGE_BYTES`], fails the list at once, before its bytes arrive. Unknown fields
//! of the envelope and the List are skipped; unknown fields of an item (a newer apiserver's) are
//! skipped by the decoder and reported once per path ([`crate::proto::unknown::note_upstream`]).
//! Pure: no I/O; the client feeds it. Garbage is a [`DecodeError`], never a panic.

use crate::handoff::Oversized;
use crate::k8s::{ObjectKey, Resource};
use crate::proto::decode as pdecode;
use crate::proto::read::{self, PbError, Value as Wire};
use crate::proto::wire::put_bytes;
use crate::proto::{envelope, unknown};
use crate::upstream::decode::{object_ref_from_prefix, DecodeError, ListResult, ObjectRef};
use crate::upstream::list_split::{MAX_ENVELOPE_BYTES, OVERSIZED_PREFIX_BYTES};

/// The longest List message accepted: the body's own bound
/// ([`crate::upstream::client::MAX_LIST_BYTES`]'s value).
pub const MAX_LIST_MESSAGE_BYTES: u64 = 256 * 1024 * 1024;

/// The longest field header: a tag and a length, each a varint of at most ten bytes.
const MAX_HEAD_BYTES: usize = 20;

/// Which message the splitter is between the fields of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// Before the magic (`matched` of its bytes seen).
    Magic { matched: usize },
    /// The `runtime.Unknown`.
    Unknown,
    /// The List (its raw): `left` bytes of it to come.
    List { left: u64 },
}

/// What the bytes of the current field are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload {
    /// Between fields (reading a field header).
    None,
    /// An envelope field kept whole, then checked: `field` of the `Unknown` (or of the List,
    /// `list`).
    Keep { list: bool, field: u32, left: u64 },
    /// A List item: `len` bytes in all, `left` to come; `dropping` once over the bound.
    Item { len: u64, left: u64, dropping: bool },
    /// A field skipped (unknown, or a varint's or fixed value's bytes).
    Skip { left: u64 },
}

/// Splits a protobuf LIST body fed in chunks; see the module docs.
#[derive(Debug)]
pub struct ProtoListSplitter {
    level: Level,
    payload: Payload,
    /// The current field header, until it is whole.
    head: Vec<u8>,
    /// The current kept field or item.
    buf: Vec<u8>,
    /// Longest item kept.
    max_item: u64,
    /// Kept outside the items so far (bounded by [`MAX_ENVELOPE_BYTES`]).
    envelope_bytes: usize,
    /// The items' resource, from the typeMeta.
    res: Option<Resource>,
    /// The List was met (its raw).
    listed: bool,
    /// The List's metadata fields as they came (merged as protobuf merges them at the end).
    meta: Vec<u8>,
    /// Items met so far (for errors).
    index: usize,
    items: Vec<Box<str>>,
    oversized: Vec<Oversized>,
    broken: Option<DecodeError>,
    /// The envelope passed [`MAX_ENVELOPE_BYTES`].
    envelope_full: bool,
    /// A list of Nodes: every Node but this one is decoded as its facts only
    /// ([`ProtoListSplitter::node_facts_except`]).
    facts_except: Option<String>,
}

fn pb_error(what: impl std::fmt::Display) -> DecodeError {
    DecodeError::Protobuf(what.to_string())
}

impl ProtoListSplitter {
    /// A splitter at the start of a body that keeps no item longer than `max` bytes (see the
    /// module docs); an item of exactly `max` bytes is kept.
    pub fn with_max_item_bytes(max: usize) -> Self {
        ProtoListSplitter {
            level: Level::Magic { matched: 0 },
            payload: Payload::None,
            head: Vec::with_capacity(MAX_HEAD_BYTES),
            buf: Vec::new(),
            max_item: u64::try_from(max).unwrap_or(u64::MAX),
            envelope_bytes: 0,
            res: None,
            listed: false,
            meta: Vec::new(),
            index: 0,
            items: Vec::new(),
            oversized: Vec::new(),
            broken: None,
            envelope_full: false,
            facts_except: None,
        }
    }

    /// The same, decoding of every Node but `local` only its facts (`metadata.name`,
    /// `metadata.labels`, `status.addresses`: [`pdecode::NODE_FACTS`]), for a taker that keeps
    /// no more of them ([`crate::handoff::ListItems::facts_only_except`]); `None`: every item
    /// whole. A Node whose name cannot be read from its first bytes is decoded whole.
    pub fn node_facts_except(mut self, local: Option<&str>) -> Self {
        self.facts_except = local.map(str::to_string);
        self
    }

    /// Feeds the next bytes of the body.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() && self.broken.is_none() {
            let n = match self.level {
                Level::Magic { matched } => self.magic(chunk, matched),
                _ => match self.payload {
                    Payload::None => self.head_byte(chunk),
                    _ => self.payload_bytes(chunk),
                },
            };
            chunk = chunk.get(n..).unwrap_or_default();
            if self.payload == Payload::None {
                if let Level::List { left: 0 } = self.level {
                    if self.head.is_empty() {
                        self.level = Level::Unknown;
                    } else {
                        self.fail(pb_error("a field header runs past the end of the list"));
                    }
                }
            }
        }
    }

    /// `n` bytes were taken: inside the List, that many fewer of it are to come.
    fn consumed(&mut self, n: usize) {
        if let Level::List { left } = &mut self.level {
            *left = left.saturating_sub(n as u64);
        }
    }

    fn fail(&mut self, e: DecodeError) {
        if self.broken.is_none() {
            self.broken = Some(e);
        }
    }

    /// The magic's bytes; answers how many of `chunk` it took.
    fn magic(&mut self, chunk: &[u8], matched: usize) -> usize {
        let want = envelope::MAGIC.get(matched..).unwrap_or_default();
        let n = want.len().min(chunk.len());
        if chunk.get(..n) != want.get(..n) {
            self.fail(pb_error(
                "a body of the protobuf content type without its k8s\\0 magic",
            ));
            return chunk.len();
        }
        self.level = if matched + n == envelope::MAGIC.len() {
            Level::Unknown
        } else {
            Level::Magic {
                matched: matched + n,
            }
        };
        n
    }

    /// One byte of a field header; once the header is whole, the field's payload starts.
    fn head_byte(&mut self, chunk: &[u8]) -> usize {
        let Some(&b) = chunk.first() else {
            return 0;
        };
        self.head.push(b);
        self.consumed(1);
        let mut pos = 0;
        let parsed = read::varint(&self.head, &mut pos).and_then(|key| {
            let wire = (key & 7) as u8;
            let len = match wire {
                0 => read::varint(&self.head, &mut pos).map(|_| 0)?,
                1 => 8,
                2 => read::varint(&self.head, &mut pos)?,
                5 => 4,
                w => return Err(PbError::BadWireType(w)),
            };
            let field = u32::try_from(key >> 3).map_err(|_| PbError::BadFieldNumber)?;
            if field == 0 {
                return Err(PbError::BadFieldNumber);
            }
            Ok((field, wire, len))
        });
        match parsed {
            Err(PbError::Truncated) if self.head.len() < MAX_HEAD_BYTES => {}
            Err(e) => self.fail(DecodeError::Protobuf(e.to_string())),
            Ok((field, wire, len)) => {
                self.head.clear();
                self.start(field, wire, len);
            }
        }
        1
    }

    /// A field header is whole: what its `len` bytes are for.
    fn start(&mut self, field: u32, wire: u8, len: u64) {
        if let Level::List { left } = self.level {
            if len > left {
                return self.fail(pb_error(format_args!(
                    "a field of {len} bytes runs past the end of the list ({left} bytes left)"
                )));
            }
        }
        let keep = |list: bool| Payload::Keep {
            list,
            field,
            left: len,
        };
        self.payload = match (self.level, field, wire) {
            (Level::Unknown, 2, 2) => {
                if self.listed {
                    return self.fail(pb_error("a second list in the body"));
                }
                if self.res.is_none() {
                    return self.fail(pb_error("the list comes before its typeMeta"));
                }
                if len > MAX_LIST_MESSAGE_BYTES {
                    return self.fail(pb_error(format_args!(
                        "a list of {len} bytes, over {MAX_LIST_MESSAGE_BYTES}"
                    )));
                }
                self.listed = true;
                self.level = Level::List { left: len };
                Payload::None
            }
            (Level::Unknown, 1 | 3 | 4, 2) => keep(false),
            (Level::List { .. }, 1, 2) => keep(true),
            (Level::List { .. }, 2, 2) => {
                self.index += 1;
                self.buf.clear();
                Payload::Item {
                    len,
                    left: len,
                    dropping: len > self.max_item,
                }
            }
            (Level::Unknown, 1..=4, _) | (Level::List { .. }, 1 | 2, _) => {
                return self.fail(pb_error(format_args!(
                    "field {field} of the {} has wire type {wire}",
                    if matches!(self.level, Level::Unknown) {
                        "envelope"
                    } else {
                        "list"
                    }
                )));
            }
            _ => Payload::Skip { left: len },
        };
        if let Payload::Keep { .. } = self.payload {
            let total = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(self.envelope_bytes));
            match total {
                Some(t) if t <= MAX_ENVELOPE_BYTES => self.envelope_bytes = t,
                _ => {
                    self.envelope_full = true;
                    return self.fail(pb_error(format_args!(
                        "list: more than {MAX_ENVELOPE_BYTES} bytes outside its items: no list \
                         an apiserver sends"
                    )));
                }
            }
            self.buf.clear();
        }
        self.end_if_done();
    }

    /// Bytes of the current field's payload; answers how many of `chunk` it took.
    fn payload_bytes(&mut self, chunk: &[u8]) -> usize {
        let left = match self.payload {
            Payload::None => return 0,
            Payload::Keep { left, .. } | Payload::Item { left, .. } | Payload::Skip { left } => {
                left
            }
        };
        let n = usize::try_from(left).map_or(chunk.len(), |l| l.min(chunk.len()));
        let bytes = chunk.get(..n).unwrap_or_default();
        self.consumed(n);
        let keep = match &mut self.payload {
            Payload::None => 0,
            Payload::Keep { left, .. } => {
                *left -= n as u64;
                n
            }
            Payload::Skip { left } => {
                *left -= n as u64;
                0
            }
            Payload::Item { left, dropping, .. } => {
                *left -= n as u64;
                if *dropping {
                    OVERSIZED_PREFIX_BYTES.saturating_sub(self.buf.len()).min(n)
                } else {
                    n
                }
            }
        };
        self.buf
            .extend_from_slice(bytes.get(..keep).unwrap_or_default());
        self.end_if_done();
        n
    }

    /// Ends the current field when all its bytes are in.
    fn end_if_done(&mut self) {
        match self.payload {
            Payload::Keep {
                list,
                field,
                left: 0,
            } => {
                self.payload = Payload::None;
                let buf = std::mem::take(&mut self.buf);
                if let Err(e) = self.kept(list, field, &buf) {
                    self.fail(e);
                }
            }
            Payload::Item {
                len,
                left: 0,
                dropping,
            } => {
                self.payload = Payload::None;
                self.end_item(len, dropping);
            }
            Payload::Skip { left: 0 } => self.payload = Payload::None,
            _ => {}
        }
    }

    /// An envelope field, whole: checked as the whole-body decoders check it.
    fn kept(&mut self, list: bool, field: u32, bytes: &[u8]) -> Result<(), DecodeError> {
        let mut msg = Vec::with_capacity(bytes.len() + 16);
        if list {
            // Checked now, read at the end with the others (a field met twice is merged).
            put_bytes(&mut msg, field, bytes);
            envelope::decode_list(&msg).map_err(pb_error)?;
            self.meta.extend_from_slice(&msg);
            return Ok(());
        }
        msg.extend_from_slice(&envelope::MAGIC);
        put_bytes(&mut msg, field, bytes);
        let body = envelope::unwrap_body(&msg).map_err(pb_error)?;
        if field == 1 {
            let res = Resource::ALL
                .iter()
                .find(|r| r.api_version() == body.api_version && r.list_kind() == body.kind)
                .ok_or_else(|| {
                    pb_error(format_args!(
                        "a list of kind {:?} of {:?}: not a kind grid-wrapper caches",
                        body.kind, body.api_version
                    ))
                })?;
            self.res = Some(*res);
        }
        Ok(())
    }

    /// An item, whole (or its prefix, over the bound): its JSON handed out, or named as
    /// oversized.
    fn end_item(&mut self, len: u64, dropping: bool) {
        let buf = std::mem::take(&mut self.buf);
        if dropping {
            let r = object_ref_from_proto_prefix(&buf);
            self.oversized.push(Oversized {
                namespace: r.namespace,
                name: r.name,
                bytes: len,
            });
            return;
        }
        let Some(res) = self.res else {
            return self.fail(pb_error("an item before the typeMeta"));
        };
        let facts_only = res == Resource::Nodes
            && self.facts_except.as_deref().is_some_and(|local| {
                object_ref_from_proto_prefix(&buf)
                    .name
                    .is_some_and(|name| name != local)
            });
        let decoded = if facts_only {
            pdecode::decode_object_only(res, &buf, None, &pdecode::NODE_FACTS)
        } else {
            pdecode::decode_object_kept(res, &buf, None)
        };
        let decoded = match decoded {
            Ok(d) => d,
            Err(e) => return self.fail(pb_error(format_args!("list item {}: {e}", self.index))),
        };
        if decoded.json.len() as u64 > self.max_item {
            let r = object_ref_from_prefix(&decoded.json);
            self.oversized.push(Oversized {
                namespace: r.namespace,
                name: r.name,
                bytes: decoded.json.len() as u64,
            });
            return;
        }
        if !decoded.unknown.is_empty() {
            let r = object_ref_from_prefix(&decoded.json);
            let key = ObjectKey::new(
                r.namespace.as_deref().unwrap_or_default(),
                r.name.as_deref().unwrap_or_default(),
            );
            unknown::note_upstream(res, &key, &decoded.unknown);
        }
        match String::from_utf8(decoded.json) {
            Ok(text) => self.items.push(text.into_boxed_str()),
            Err(_) => self.fail(pb_error("an item's JSON is not UTF-8")),
        }
    }

    /// Whether the list has already failed for its bytes outside the items (see
    /// [`crate::upstream::list_split::ListSplitter::failed`]).
    pub fn failed(&self) -> bool {
        self.envelope_full
    }

    /// The items split so far and not yet taken (their JSON).
    pub fn take_items(&mut self) -> std::vec::Drain<'_, Box<str>> {
        self.items.drain(..)
    }

    /// The items over the bound found so far and not yet taken.
    pub fn take_oversized(&mut self) -> std::vec::Drain<'_, Oversized> {
        self.oversized.drain(..)
    }

    /// The decoded list (the items not taken yet, the ListMeta), or why the body is no list;
    /// and the [`Oversized`] entries not taken yet.
    pub fn finish_with_oversized(mut self) -> (Result<ListResult, DecodeError>, Vec<Oversized>) {
        let oversized = std::mem::take(&mut self.oversized);
        (self.decode(), oversized)
    }

    fn decode(&mut self) -> Result<ListResult, DecodeError> {
        if let Some(e) = self.broken.take() {
            return Err(e);
        }
        let cut = match (self.level, self.payload) {
            (Level::Magic { .. }, _) => Some("before its k8s\\0 magic"),
            (Level::List { .. }, _) => Some("inside the list"),
            (_, Payload::None) if self.head.is_empty() => None,
            _ => Some("inside a field"),
        };
        if let Some(cut) = cut {
            return Err(pb_error(format_args!("the protobuf body ended {cut}")));
        }
        if !self.listed {
            return Err(pb_error("a protobuf body without a list"));
        }
        let meta = envelope::decode_list(&self.meta).map_err(pb_error)?;
        Ok(ListResult {
            items: std::mem::take(&mut self.items),
            resource_version: meta.resource_version.to_string(),
            continue_token: Some(meta.continue_token)
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            origin: None,
        })
    }
}

/// Splits a whole protobuf body at once (tests, fuzzing).
pub fn split_proto_list(body: &[u8], max_item: usize) -> Result<ListResult, DecodeError> {
    let mut s = ProtoListSplitter::with_max_item_bytes(max_item);
    s.feed(body);
    let (list, oversized) = s.finish_with_oversized();
    let _ = oversized;
    list
}

/// The fields of the first bytes of a message, as far as they go: each with its value, and
/// whether a length-delimited one is whole (`false`: cut off by the end of the bytes, its
/// value is what there is of it). Stops at the first thing that is not a field.
fn prefix_fields(buf: &[u8]) -> impl Iterator<Item = (u32, Wire<'_>, bool)> + '_ {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        let key = read::varint(buf, &mut pos).ok()?;
        let field = u32::try_from(key >> 3).ok()?;
        match key & 7 {
            0 => Some((field, Wire::Varint(read::varint(buf, &mut pos).ok()?), true)),
            2 => {
                let len = usize::try_from(read::varint(buf, &mut pos).ok()?).ok()?;
                let end = pos.saturating_add(len);
                let whole = end <= buf.len();
                let bytes = buf.get(pos..end.min(buf.len()))?;
                pos = end.min(buf.len());
                Some((field, Wire::Bytes(bytes), whole))
            }
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                pos = pos.checked_add(n).filter(|&p| p <= buf.len())?;
                Some((field, Wire::Fixed(0), true))
            }
            _ => None,
        }
    })
}

/// Who an object is, read from the first bytes of its message (an item too long to be kept):
/// its ObjectMeta (field 1) name (1), namespace (3) and resourceVersion (6), when they are
/// whole there. Lenient; never panics.
pub fn object_ref_from_proto_prefix(msg: &[u8]) -> ObjectRef {
    let mut r = ObjectRef::default();
    for (field, v, _) in prefix_fields(msg) {
        let (1, Wire::Bytes(meta)) = (field, v) else {
            continue;
        };
        for (f, v, whole) in prefix_fields(meta) {
            let Wire::Bytes(b) = v else { continue };
            let text = || Some(String::from_utf8_lossy(b).into_owned()).filter(|_| whole);
            match f {
                1 => r.name = text(),
                3 => r.namespace = text(),
                6 => r.resource_version = text(),
                _ => {}
            }
        }
    }
    r
}

/// The event type and the object's [`ObjectRef`] from the first bytes of a protobuf watch frame
/// (its 4-byte length excluded): `WatchEvent` {type=1, object=2 {raw=1: [`envelope::MAGIC`],
/// `Unknown` {raw=2: the object's message}}}.
pub fn event_ref_from_proto_prefix(frame: &[u8]) -> (Option<String>, ObjectRef) {
    let mut kind = None;
    let mut r = ObjectRef::default();
    for (field, v, whole) in prefix_fields(frame) {
        match (field, v) {
            (1, Wire::Bytes(t)) if whole => kind = std::str::from_utf8(t).ok().map(str::to_string),
            (2, Wire::Bytes(ext)) => {
                for (f, v, _) in prefix_fields(ext) {
                    let (1, Wire::Bytes(body)) = (f, v) else {
                        continue;
                    };
                    let Some(unknown) = body.strip_prefix(&envelope::MAGIC[..]) else {
                        continue;
                    };
                    for (f, v, _) in prefix_fields(unknown) {
                        if let (2, Wire::Bytes(obj)) = (f, v) {
                            r = object_ref_from_proto_prefix(obj);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    (kind, r)
}

#[cfg(test)]
#[path = "proto_list_tests.rs"]
mod tests;
