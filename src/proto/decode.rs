//! An object's protobuf message into the JSON the apiserver would have sent for it, following
//! the tables of [`super::schema`]: the inverse of [`super::encode`], written as JSON bytes
//! directly (no `serde_json::Value`).
//!
//! The JSON is Go's `encoding/json` output for the Go struct gogo's generated code decodes the
//! message into (what the apiserver's JSON serializer writes):
//! * keys in the Go struct's field order ([`Message::json_order`]), `kind` and `apiVersion` first
//!   when a type is given (a GET body or a watch event's object; a List's items have none);
//! * a field left out as its `json` tag says ([`Omit`]); without `omitempty`, an absent pointer,
//!   slice or map is `null`; a struct is never left out by `omitempty`;
//! * maps with their keys sorted (byte order); a repeated map key keeps its last value;
//! * strings escaped as Go escapes them (`<`, `>`, `&`, U+2028 and U+2029 as `\u....`, `\b`,
//!   `\f`, other control characters as `\u00xx`; each byte of invalid UTF-8 as `\ufffd`);
//! * `metav1.Time` as `2006-01-02T15:04:05Z` (UTC, whole seconds; `null` when zero),
//!   `metav1.MicroTime` with six fractional digits, `intstr.IntOrString` as a number or a
//!   string, `metav1.FieldsV1` as its raw JSON, compacted;
//! * protobuf's merge rules: a scalar field met twice keeps its last value, a message field met
//!   twice is the merge of both (as gogo decodes them).
//!
//! What is approximate: a `resource.Quantity` is written as the text it was sent with, where Go
//! would write its canonical form (the apiserver only sends canonical text, so its own
//! messages come out exact); a `FieldsV1` in CBOR (an alpha apiserver feature) is refused, not
//! converted, and one that is not UTF-8 is refused where Go would pass its bytes through; times beyond the years Go's `time.Time` holds without overflow are not formatted
//! as Go would.
//!
//! [`decode_object_sorted`] writes the same object in the form the cache serves JSON in instead
//! (every object's keys in byte order, strings as serde_json escapes them: `sorted.rs`),
//! the bytes that Go's JSON parsed into a `serde_json::Value` and serialized gives, without
//! writing Go's text first; the same walk, decoding and errors.
//!
//! Unknown fields (a field number the schema does not know: a newer apiserver's field) are
//! skipped and reported in [`Decoded::unknown`] by path and number (`spec.#30`), as the encoder
//! reports JSON keys it does not know: a JSON client made from these bytes does not get them.
//! Garbage is a [`DecodeError`], never a panic; nesting is bounded by the schema (no message
//! reaches itself), so is the recursion.

use super::encode::message_of;
use super::read::{self, PbError, Value as Wire};
use super::{schema, sorted, Card, Field, Kind, Message, Omit};
use crate::k8s::Resource;
use std::fmt;

/// One object's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The object's JSON text (no trailing newline).
    pub json: Vec<u8>,
    /// Paths of the fields skipped as unknown (`metadata.#18`, `spec.ports[].#9`), each once.
    pub unknown: Vec<String>,
}

/// The `kind` and `apiVersion` an object's JSON starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeMeta<'a> {
    /// `apiVersion`, e.g. `discovery.k8s.io/v1`.
    pub api_version: &'a str,
    /// `kind`, e.g. `EndpointSlice`.
    pub kind: &'a str,
}

/// Why a protobuf message (or its envelope) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The wire format itself: truncated, an overlong varint, a group, field number 0.
    Wire(PbError),
    /// A known field with a wire type its Go type cannot have.
    WireType {
        /// The JSON path of the field.
        path: String,
        /// The wire type met.
        wire: u8,
    },
    /// A value Go's decoding or JSON encoding refuses (an empty Quantity, an IntOrString of
    /// an unknown type, a FieldsV1 that is not JSON).
    Invalid {
        /// The JSON path of the field.
        path: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Not the apiserver's envelope (no `k8s\0`, a content encoding, a missing object).
    Envelope(&'static str),
    /// What [`decode_object_sorted`] leaves to the longer way (a `FieldsV1`, a map key that is
    /// not UTF-8): Go's JSON of the object, sorted, is its form.
    NotSorted(&'static str),
    /// A watch frame longer than the caller's bound.
    FrameTooLong {
        /// The frame's length.
        len: usize,
        /// The bound.
        limit: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Wire(e) => e.fmt(f),
            DecodeError::WireType { path, wire } => {
                write!(f, "protobuf field {path} has wire type {wire}")
            }
            DecodeError::Invalid { path, why } => write!(f, "protobuf field {path}: {why}"),
            DecodeError::Envelope(why) => write!(f, "protobuf envelope: {why}"),
            DecodeError::NotSorted(why) => write!(f, "not written with sorted keys: {why}"),
            DecodeError::FrameTooLong { len, limit } => {
                write!(f, "protobuf watch frame of {len} bytes, over {limit}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

impl From<PbError> for DecodeError {
    fn from(e: PbError) -> Self {
        DecodeError::Wire(e)
    }
}

/// Decodes `msg`, a `res` object's message (a List item, or an `Unknown`'s raw), into its JSON;
/// `type_meta` is written first when given.
pub fn decode_object(
    res: Resource,
    msg: &[u8],
    type_meta: Option<TypeMeta<'_>>,
) -> Result<Decoded, DecodeError> {
    decode_message(message_of(res), msg, type_meta)
}

/// [`decode_object`]'s JSON in the form the cache serves JSON in: the bytes that parsing it
/// into a `serde_json::Value` and serializing that give (every object's keys in byte order, a
/// repeated map key's last value, strings and numbers as serde_json writes them; see
/// `proto/sorted.rs`), written straight from the message. [`DecodeError::NotSorted`] for what it
/// leaves to that longer way (a `FieldsV1`, a map key that is not UTF-8 or that serde_json would
/// read as its `RawValue` token, a field named as a TypeMeta key); any other error is
/// [`decode_object`]'s.
pub fn decode_object_sorted(
    res: Resource,
    msg: &[u8],
    type_meta: Option<TypeMeta<'_>>,
) -> Result<Decoded, DecodeError> {
    let msg_table = message_of(res);
    if type_meta.is_some()
        && msg_table
            .fields
            .iter()
            .any(|f| f.json == "kind" || f.json == "apiVersion")
    {
        return Err(DecodeError::NotSorted("a field named as a TypeMeta key"));
    }
    decode_in(msg_table, msg, type_meta, false, &Keep::All, Form::Sorted)
}

/// [`decode_object`] of an upstream object as the cache keeps it: `metadata.managedFields`
/// (which the cache drops, docs/SEMANTICS.md §1) is skipped unread, neither decoded nor
/// written, nor checked beyond the wire format. The rest is [`decode_object`]'s JSON.
pub fn decode_object_kept(
    res: Resource,
    msg: &[u8],
    type_meta: Option<TypeMeta<'_>>,
) -> Result<Decoded, DecodeError> {
    decode_with(message_of(res), msg, type_meta, true, &Keep::All)
}

/// [`decode_object_kept`] of only the fields `keep` names: every other field is skipped unread,
/// as if absent (Go's zero value, written as Go writes it). For a reader that needs a few
/// fields of a big object ([`NODE_FACTS`]).
pub fn decode_object_only(
    res: Resource,
    msg: &[u8],
    type_meta: Option<TypeMeta<'_>>,
    keep: &'static Keep,
) -> Result<Decoded, DecodeError> {
    decode_with(message_of(res), msg, type_meta, true, keep)
}

/// Which fields of a message are decoded.
#[derive(Debug)]
pub enum Keep {
    /// Every field.
    All,
    /// Only these, by JSON name, each with what is decoded of it.
    Only(&'static [(&'static str, Keep)]),
}

impl Keep {
    /// What is decoded of the field `json` (`None`: skipped).
    fn field(&'static self, json: &str) -> Option<&'static Keep> {
        match self {
            Keep::All => Some(self),
            Keep::Only(fields) => fields.iter().find(|(k, _)| *k == json).map(|(_, k)| k),
        }
    }
}

/// A Node's facts, what the cache keeps of a Node other than the local one: `metadata.name`,
/// `metadata.labels` and `status.addresses`.
pub static NODE_FACTS: Keep = Keep::Only(&[
    (
        "metadata",
        Keep::Only(&[("name", Keep::All), ("labels", Keep::All)]),
    ),
    ("status", Keep::Only(&[("addresses", Keep::All)])),
]);

/// Decodes a meta/v1 `Status` message (an ERROR watch event's object, an error body).
pub fn decode_status(msg: &[u8], type_meta: Option<TypeMeta<'_>>) -> Result<Decoded, DecodeError> {
    decode_message(&schema::META_V1_STATUS, msg, type_meta)
}

/// Decodes `bytes` as a `msg` into its JSON.
pub fn decode_message(
    msg: &'static Message,
    bytes: &[u8],
    type_meta: Option<TypeMeta<'_>>,
) -> Result<Decoded, DecodeError> {
    decode_with(msg, bytes, type_meta, false, &Keep::All)
}

fn decode_with(
    msg: &'static Message,
    bytes: &[u8],
    type_meta: Option<TypeMeta<'_>>,
    skip_managed_fields: bool,
    keep: &'static Keep,
) -> Result<Decoded, DecodeError> {
    decode_in(msg, bytes, type_meta, skip_managed_fields, keep, Form::Go)
}

fn decode_in(
    msg: &'static Message,
    bytes: &[u8],
    type_meta: Option<TypeMeta<'_>>,
    skip_managed_fields: bool,
    keep: &'static Keep,
    form: Form,
) -> Result<Decoded, DecodeError> {
    let mut dec = Decoder {
        form,
        out: Vec::with_capacity(bytes.len() * 2 + 64),
        path: Vec::new(),
        unknown: Vec::new(),
        scratch: Vec::new(),
        skip_managed_fields,
        keep,
        next: keep,
    };
    dec.message(msg, &[bytes], type_meta)?;
    Ok(Decoded {
        json: dec.out,
        unknown: dec.unknown,
    })
}

/// `ObjectMeta.managedFields`' field number.
const MANAGED_FIELDS: u32 = 17;

/// The JSON written: Go's, or the cache's ([`decode_object_sorted`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Go,
    Sorted,
}

/// The object key by which serde_json's `Value` recognizes an embedded `RawValue` (when it is an
/// object's first key; the cache's `sorted` refuses a text with it anywhere).
const RAW_VALUE_TOKEN: &[u8] = b"$serde_json::private::RawValue";

/// One path segment: a field's JSON name, or an element of a list or a map.
#[derive(Clone, Copy)]
enum Seg {
    Key(&'static str),
    Elem,
    Entry,
}

struct Decoder<'a> {
    /// The JSON written.
    form: Form,
    out: Vec<u8>,
    path: Vec<Seg>,
    unknown: Vec<String>,
    /// The fields met in each message being decoded, one list per nesting level (reused).
    scratch: Vec<Vec<(usize, Wire<'a>)>>,
    /// Whether `metadata.managedFields` is skipped ([`decode_object_kept`]).
    skip_managed_fields: bool,
    /// What is decoded of the message being decoded ([`decode_object_only`]).
    keep: &'static Keep,
    /// What is decoded of the next message entered: the field being written's.
    next: &'static Keep,
}

impl<'a> Decoder<'a> {
    /// The current path, e.g. `spec.ports[].port`.
    fn path(&self) -> String {
        let mut s = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Seg::Elem => s.push_str("[]"),
                Seg::Entry => s.push_str("{}"),
            }
        }
        s
    }

    /// Appends a JSON string in the form being written.
    fn string(&mut self, s: &[u8]) {
        match self.form {
            Form::Go => go_string(&mut self.out, s),
            Form::Sorted => sorted::serde_string(&mut self.out, s),
        }
    }

    fn unknown_field(&mut self, number: u32) {
        let mut p = self.path();
        if !p.is_empty() {
            p.push('.');
        }
        p.push('#');
        p.push_str(&number.to_string());
        if !self.unknown.contains(&p) {
            self.unknown.push(p);
        }
    }

    fn invalid(&self, why: &'static str) -> DecodeError {
        DecodeError::Invalid {
            path: self.path(),
            why,
        }
    }

    fn wire_type(&self, v: &Wire<'_>) -> DecodeError {
        let wire = match v {
            Wire::Varint(_) => 0,
            Wire::Fixed(_) => 1,
            Wire::Bytes(_) => 2,
        };
        DecodeError::WireType {
            path: self.path(),
            wire,
        }
    }

    fn bytes_of(&self, v: &Wire<'a>) -> Result<&'a [u8], DecodeError> {
        match v {
            Wire::Bytes(b) => Ok(b),
            other => Err(self.wire_type(other)),
        }
    }

    fn varint_of(&self, v: &Wire<'a>) -> Result<u64, DecodeError> {
        match v {
            Wire::Varint(n) => Ok(*n),
            other => Err(self.wire_type(other)),
        }
    }

    /// Writes `{...}` for the message whose encoding is the concatenation of `parts` (one part
    /// but for a message field met more than once).
    fn message(
        &mut self,
        msg: &'static Message,
        parts: &[&'a [u8]],
        type_meta: Option<TypeMeta<'_>>,
    ) -> Result<(), DecodeError> {
        let depth = self.path.len();
        let mut met = match self.scratch.get_mut(depth) {
            Some(v) => std::mem::take(v),
            None => Vec::new(),
        };
        met.clear();
        let (outer, outer_next) = (self.keep, self.next);
        self.keep = self.next;
        let result = self.message_with(msg, parts, type_meta, &mut met);
        (self.keep, self.next) = (outer, outer_next);
        met.clear();
        if self.scratch.len() <= depth {
            self.scratch.resize_with(depth + 1, Vec::new);
        }
        self.scratch[depth] = met;
        result
    }

    fn message_with(
        &mut self,
        msg: &'static Message,
        parts: &[&'a [u8]],
        type_meta: Option<TypeMeta<'_>>,
        met: &mut Vec<(usize, Wire<'a>)>,
    ) -> Result<(), DecodeError> {
        let skip = self.skip_managed_fields && std::ptr::eq(msg, &schema::META_V1_OBJECT_META);
        for part in parts {
            for field in read::fields(part) {
                let (number, value) = field?;
                if skip && number == MANAGED_FIELDS {
                    continue;
                }
                match msg.fields.binary_search_by_key(&number, |f| f.number) {
                    Ok(i) if self.keep.field(msg.fields[i].json).is_none() => {}
                    Ok(i) => met.push((i, value)),
                    Err(_) => self.unknown_field(number),
                }
            }
        }
        self.out.push(b'{');
        let mut first = true;
        // metav1.TypeMeta, each omitempty: kind, then apiVersion (Go's order); or, sorted,
        // each before the first field whose name comes after it.
        let mut type_keys: &[(&str, &str)] = &[];
        let type_meta_keys;
        let order = match self.form {
            Form::Go => {
                if let Some(tm) = type_meta {
                    for (key, value) in [("kind", tm.kind), ("apiVersion", tm.api_version)] {
                        if !value.is_empty() {
                            self.key(&mut first, key);
                            self.string(value.as_bytes());
                        }
                    }
                }
                msg.json_order
            }
            Form::Sorted => {
                if let Some(tm) = type_meta {
                    type_meta_keys = [("apiVersion", tm.api_version), ("kind", tm.kind)];
                    type_keys = &type_meta_keys;
                }
                sorted::key_order(msg)
                    .ok_or(DecodeError::NotSorted("a message without a key order"))?
            }
        };
        for &i in order {
            let Some(field) = msg.fields.get(usize::from(i)) else {
                continue;
            };
            while let Some(((key, value), rest)) = type_keys.split_first() {
                if key.as_bytes() > field.json.as_bytes() {
                    break;
                }
                type_keys = rest;
                if !value.is_empty() {
                    self.key(&mut first, key);
                    self.string(value.as_bytes());
                }
            }
            self.path.push(Seg::Key(field.json));
            self.next = self.keep.field(field.json).unwrap_or(&Keep::All);
            let r = self.field(field, usize::from(i), met, &mut first);
            self.path.pop();
            r?;
        }
        for (key, value) in type_keys {
            if !value.is_empty() {
                self.key(&mut first, key);
                self.string(value.as_bytes());
            }
        }
        self.out.push(b'}');
        Ok(())
    }

    /// Writes `,"key":` (no comma before the first key).
    fn key(&mut self, first: &mut bool, key: &str) {
        if !*first {
            self.out.push(b',');
        }
        *first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn field(
        &mut self,
        field: &'static Field,
        index: usize,
        met: &[(usize, Wire<'a>)],
        first: &mut bool,
    ) -> Result<(), DecodeError> {
        let values = || met.iter().filter(move |(i, _)| *i == index).map(|(_, v)| v);
        match field.card {
            Card::Value | Card::Pointer => {
                let present = values().next().is_some();
                if !present && field.card == Card::Pointer {
                    if field.omit == Omit::No {
                        self.key(first, field.json);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                let one = self.single(&field.kind, values())?;
                // A value field is left out when Go would find it empty (never a struct: a
                // struct is only left out by omitzero, for metav1.Time when zero).
                if field.card == Card::Value && field.omit != Omit::No && one.is_empty(field.omit) {
                    return Ok(());
                }
                self.key(first, field.json);
                self.write_single(one)
            }
            Card::Repeated => {
                if values().next().is_none() {
                    if field.omit == Omit::No {
                        self.key(first, field.json);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                self.key(first, field.json);
                self.out.push(b'[');
                self.path.push(Seg::Elem);
                let r = self.elements(&field.kind, values());
                self.path.pop();
                r?;
                self.out.push(b']');
                Ok(())
            }
            Card::Map => {
                if values().next().is_none() {
                    if field.omit == Omit::No {
                        self.key(first, field.json);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                self.key(first, field.json);
                self.path.push(Seg::Entry);
                let r = self.map(&field.kind, values());
                self.path.pop();
                r
            }
        }
    }

    /// The value of a non-repeated field from its occurrences (none: the Go zero value).
    fn single<'v>(
        &mut self,
        kind: &'static Kind,
        values: impl Iterator<Item = &'v Wire<'a>>,
    ) -> Result<One<'a>, DecodeError>
    where
        'a: 'v,
    {
        Ok(match kind {
            Kind::String => {
                let mut s: &'a [u8] = b"";
                for v in values {
                    s = self.bytes_of(v)?;
                }
                One::Str(s)
            }
            Kind::Bool => {
                let mut b = false;
                for v in values {
                    b = self.varint_of(v)? != 0;
                }
                One::Bool(b)
            }
            Kind::Int32 => {
                let mut n = 0i64;
                for v in values {
                    n = i64::from(self.varint_of(v)? as u32 as i32);
                }
                One::Int(n)
            }
            Kind::Int64 => {
                let mut n = 0i64;
                for v in values {
                    n = self.varint_of(v)? as i64;
                }
                One::Int(n)
            }
            Kind::Time | Kind::MicroTime | Kind::Quantity => {
                // Their Unmarshal replaces the value: the last occurrence counts.
                let mut last: Option<&'a [u8]> = None;
                for v in values {
                    last = Some(self.bytes_of(v)?);
                }
                match kind {
                    Kind::Quantity => One::Quantity(match last {
                        Some(b) => Some(self.quantity(b)?),
                        None => None,
                    }),
                    _ => {
                        let micro = matches!(kind, Kind::MicroTime);
                        One::Time(
                            match last {
                                Some(b) => self.timestamp(b, micro)?,
                                None => None,
                            },
                            micro,
                        )
                    }
                }
            }
            Kind::Message(_) | Kind::IntOrString | Kind::FieldsV1 => {
                let mut parts = Vec::new();
                for v in values {
                    parts.push(self.bytes_of(v)?);
                }
                One::Parts(kind, parts)
            }
        })
    }

    fn write_single(&mut self, one: One<'a>) -> Result<(), DecodeError> {
        match one {
            One::Str(s) => self.string(s),
            One::Bool(b) => self
                .out
                .extend_from_slice(if b { b"true" } else { b"false" }),
            One::Int(n) => write_int(&mut self.out, n),
            One::Time(None, _) => self.out.extend_from_slice(b"null"),
            One::Time(Some((secs, nanos)), micro) => {
                self.out.push(b'"');
                write_rfc3339(&mut self.out, secs, micro.then_some(nanos / 1000));
                self.out.push(b'"');
            }
            // The zero Quantity is "0".
            One::Quantity(q) => self.string(q.unwrap_or(b"0")),
            One::Parts(kind, parts) => match kind {
                Kind::Message(msg) => self.message(msg, &parts, None)?,
                Kind::IntOrString => self.int_or_string(&parts)?,
                _ => self.fields_v1(&parts)?,
            },
        }
        Ok(())
    }

    fn elements<'v>(
        &mut self,
        kind: &'static Kind,
        values: impl Iterator<Item = &'v Wire<'a>>,
    ) -> Result<(), DecodeError>
    where
        'a: 'v,
    {
        let mut first = true;
        for v in values {
            match (kind, v) {
                // A packed run of varints (gogo reads both forms of a repeated scalar).
                (Kind::Bool | Kind::Int32 | Kind::Int64, Wire::Bytes(b)) => {
                    let mut pos = 0;
                    while pos < b.len() {
                        let n = read::varint(b, &mut pos)?;
                        comma(&mut self.out, &mut first);
                        self.write_single(scalar(kind, n))?;
                    }
                }
                (Kind::Bool | Kind::Int32 | Kind::Int64, Wire::Varint(n)) => {
                    comma(&mut self.out, &mut first);
                    self.write_single(scalar(kind, *n))?;
                }
                _ => {
                    let one = self.single(kind, std::iter::once(v))?;
                    comma(&mut self.out, &mut first);
                    self.write_single(one)?;
                }
            }
        }
        Ok(())
    }

    /// A map field: its entries {key=1, value=2}, sorted by key, the last of a repeated key.
    fn map<'v>(
        &mut self,
        kind: &'static Kind,
        values: impl Iterator<Item = &'v Wire<'a>>,
    ) -> Result<(), DecodeError>
    where
        'a: 'v,
    {
        let mut entries: Vec<(&'a [u8], One<'a>)> = Vec::new();
        for v in values {
            let entry = self.bytes_of(v)?;
            let mut key: &'a [u8] = b"";
            let mut value: Option<Wire<'a>> = None;
            for f in read::fields(entry) {
                match f? {
                    (1, k) => key = self.bytes_of(&k)?,
                    (2, val) => value = Some(val),
                    (n, _) => self.unknown_field(n),
                }
            }
            let one = self.single(kind, value.iter())?;
            // Sorted, keys are ordered as the strings serde_json reads from Go's JSON: as the
            // bytes only when they are UTF-8 (Go writes each invalid byte as U+FFFD).
            if self.form == Form::Sorted
                && (std::str::from_utf8(key).is_err() || key == RAW_VALUE_TOKEN)
            {
                return Err(DecodeError::NotSorted(
                    "a map key serde_json reads otherwise",
                ));
            }
            entries.push((key, one));
        }
        // A stable sort keeps a repeated key's occurrences in wire order: the last one wins.
        entries.sort_by(|a, b| a.0.cmp(b.0));
        self.out.push(b'{');
        let mut first = true;
        let mut iter = entries.into_iter().peekable();
        while let Some((key, one)) = iter.next() {
            if iter.peek().is_some_and(|(next, _)| *next == key) {
                continue;
            }
            comma(&mut self.out, &mut first);
            self.string(key);
            self.out.push(b':');
            self.write_single(one)?;
        }
        self.out.push(b'}');
        Ok(())
    }

    /// A `metav1.Timestamp` {seconds=1, nanos=2}: `None` for the zero time. A Time keeps whole
    /// seconds; a MicroTime's nanoseconds are truncated to microseconds, then normalized as Go's
    /// `time.Unix` does.
    fn timestamp(&mut self, b: &'a [u8], micro: bool) -> Result<Option<(i64, u32)>, DecodeError> {
        if b.is_empty() {
            return Ok(None);
        }
        let (mut secs, mut nanos) = (0i64, 0i64);
        for f in read::fields(b) {
            match f? {
                (1, v) => secs = self.varint_of(&v)? as i64,
                (2, v) => nanos = i64::from(self.varint_of(&v)? as u32 as i32),
                (n, _) => {
                    self.path.push(Seg::Key("(timestamp)"));
                    self.unknown_field(n);
                    self.path.pop();
                }
            }
        }
        if !micro {
            nanos = 0;
        }
        nanos -= nanos % 1000;
        secs = secs.wrapping_add(nanos.div_euclid(1_000_000_000));
        let nanos = nanos.rem_euclid(1_000_000_000) as u32;
        if secs == GO_ZERO_SECONDS && nanos == 0 {
            return Ok(None);
        }
        Ok(Some((secs, nanos)))
    }

    /// A `resource.Quantity` {string=1}: its text (`None`: the zero Quantity).
    fn quantity(&mut self, b: &'a [u8]) -> Result<&'a [u8], DecodeError> {
        let mut text: Option<&'a [u8]> = None;
        for f in read::fields(b) {
            match f? {
                (1, v) => text = Some(self.bytes_of(&v)?),
                (n, _) => self.unknown_field(n),
            }
        }
        match text {
            // ParseQuantity refuses an empty string; no text at all is the zero Quantity.
            Some([]) => Err(self.invalid("empty quantity")),
            Some(t) => Ok(t),
            None => Ok(b"0"),
        }
    }

    /// An `intstr.IntOrString` {type=1, intVal=2, strVal=3}: a number or a string.
    fn int_or_string(&mut self, parts: &[&'a [u8]]) -> Result<(), DecodeError> {
        let (mut ty, mut int, mut s) = (0u64, 0i64, &b""[..]);
        for part in parts {
            for f in read::fields(part) {
                match f? {
                    (1, v) => ty = self.varint_of(&v)?,
                    (2, v) => int = i64::from(self.varint_of(&v)? as u32 as i32),
                    (3, v) => s = self.bytes_of(&v)?,
                    (n, _) => self.unknown_field(n),
                }
            }
        }
        match ty {
            0 => write_int(&mut self.out, int),
            1 => self.string(s),
            _ => return Err(self.invalid("IntOrString of an unknown type")),
        }
        Ok(())
    }

    /// A `metav1.FieldsV1` {raw=1}: the raw JSON, compacted as Go's encoder does; `null` when
    /// empty.
    fn fields_v1(&mut self, parts: &[&'a [u8]]) -> Result<(), DecodeError> {
        if self.form == Form::Sorted {
            return Err(DecodeError::NotSorted("a FieldsV1"));
        }
        let mut raw: &'a [u8] = b"";
        for part in parts {
            for f in read::fields(part) {
                match f? {
                    (1, v) => raw = self.bytes_of(&v)?,
                    (n, _) => self.unknown_field(n),
                }
            }
        }
        let Some(&lead) = raw.first() else {
            self.out.extend_from_slice(b"null");
            return Ok(());
        };
        // helpers.go getContentType: these first bytes are CBOR, converted by Go (not here).
        if lead == 0xf6 || (0xa0..=0xbf).contains(&lead) || (0xc6..=0xdb).contains(&lead) {
            return Err(self.invalid("FieldsV1 in CBOR is not supported"));
        }
        if serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_err() {
            return Err(self.invalid("FieldsV1 is not JSON"));
        }
        // serde_json does not check the UTF-8 of what it ignores; Go would pass invalid UTF-8
        // through into its JSON, which is refused here instead.
        if std::str::from_utf8(raw).is_err() {
            return Err(self.invalid("FieldsV1 is not UTF-8"));
        }
        compact_json(&mut self.out, raw);
        Ok(())
    }
}

/// A decoded non-repeated value, before it is written (so that emptiness can be decided).
enum One<'a> {
    Str(&'a [u8]),
    Bool(bool),
    Int(i64),
    /// Seconds and nanoseconds, `None` for the zero time; whether it is a MicroTime.
    Time(Option<(i64, u32)>, bool),
    /// The text, `None` for the zero Quantity.
    Quantity(Option<&'a [u8]>),
    /// A message's occurrences (merged).
    Parts(&'static Kind, Vec<&'a [u8]>),
}

impl One<'_> {
    /// Whether Go's `omitempty` (or, for `omit` Zero, `omitzero`) leaves this value out.
    fn is_empty(&self, omit: Omit) -> bool {
        match self {
            One::Str(s) => s.is_empty(),
            One::Bool(b) => !b,
            One::Int(n) => *n == 0,
            // A struct: omitzero only (metav1.Time's IsZero).
            One::Time(t, _) => omit == Omit::Zero && t.is_none(),
            One::Quantity(_) | One::Parts(..) => false,
        }
    }
}

fn scalar<'a>(kind: &Kind, n: u64) -> One<'a> {
    match kind {
        Kind::Bool => One::Bool(n != 0),
        Kind::Int32 => One::Int(i64::from(n as u32 as i32)),
        _ => One::Int(n as i64),
    }
}

fn comma(out: &mut Vec<u8>, first: &mut bool) {
    if !*first {
        out.push(b',');
    }
    *first = false;
}

/// Go's zero `time.Time`, 0001-01-01T00:00:00Z, in Unix seconds.
const GO_ZERO_SECONDS: i64 = -62_135_596_800;

fn write_int(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut u = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends `n` with at least `width` digits (Go's `appendInt`, as its time formatting uses).
fn write_padded(out: &mut Vec<u8>, n: i64, width: usize) {
    if n < 0 {
        out.push(b'-');
    }
    let digits = n.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push(b'0');
    }
    out.extend_from_slice(digits.as_bytes());
}

/// Appends Unix time `secs` as Go's `Format(time.RFC3339)` in UTC, or with `micros`,
/// `RFC3339Micro` (`2006-01-02T15:04:05.000000Z`).
pub fn write_rfc3339(out: &mut Vec<u8>, secs: i64, micros: Option<u32>) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days to a proleptic Gregorian civil date (H. Hinnant's days_from_civil inverse).
    let z = i128::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    let year = i64::try_from(year).unwrap_or(i64::MAX);
    write_padded(out, year, 4);
    out.push(b'-');
    write_padded(out, month as i64, 2);
    out.push(b'-');
    write_padded(out, day as i64, 2);
    out.push(b'T');
    write_padded(out, rem / 3600, 2);
    out.push(b':');
    write_padded(out, rem / 60 % 60, 2);
    out.push(b':');
    write_padded(out, rem % 60, 2);
    if let Some(us) = micros {
        out.push(b'.');
        write_padded(out, i64::from(us), 6);
    }
    out.push(b'Z');
}

/// Appends `s` as a JSON string the way Go's `encoding/json` writes a Go string (HTML escaping
/// on, as the apiserver's encoder has it; invalid UTF-8 as `\ufffd`, one per byte).
pub fn go_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b < 0x80 {
            if b >= 0x20 && !matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&') {
                i += 1;
                continue;
            }
            out.extend_from_slice(&s[start..i]);
            sorted::escape_ascii(out, b);
            i += 1;
            start = i;
            continue;
        }
        let chunk = &s[i..s.len().min(i + 4)];
        let valid = match std::str::from_utf8(chunk) {
            Ok(v) => v,
            Err(e) => std::str::from_utf8(&chunk[..e.valid_up_to()]).unwrap_or(""),
        };
        match valid.chars().next() {
            Some(c @ ('\u{2028}' | '\u{2029}')) => {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(if c == '\u{2028}' {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += c.len_utf8();
                start = i;
            }
            Some(c) => i += c.len_utf8(),
            None => {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(b"\\ufffd");
                i += 1;
                start = i;
            }
        }
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// Appends valid JSON `raw` without its insignificant whitespace, with `<`, `>`, `&`, U+2028 and
/// U+2029 inside strings escaped: Go's `appendCompact(.., escapeHTML)`, which its encoder runs
/// over a `MarshalJSON` result.
fn compact_json(out: &mut Vec<u8>, raw: &[u8]) {
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        i += 1;
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            } else if matches!(b, b'<' | b'>' | b'&') {
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', sorted::HEX[usize::from(b >> 4)]]);
                out.push(sorted::HEX[usize::from(b & 0xf)]);
                continue;
            } else if b == 0xe2 && raw.get(i) == Some(&0x80) {
                if let Some(&last @ (0xa8 | 0xa9)) = raw.get(i + 1) {
                    out.extend_from_slice(if last == 0xa8 { b"\\u2028" } else { b"\\u2029" });
                    i += 2;
                    continue;
                }
            }
            out.push(b);
        } else {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'"' => {
                    in_string = true;
                    out.push(b);
                }
                _ => out.push(b),
            }
        }
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
