//! A served object's JSON into its protobuf message, following the tables of [`super::schema`].
//!
//! Never panics, whatever the JSON. Keys the schema does not know are dropped and reported in
//! [`Encoded::unknown`] by path (`spec.someNewField`, `subsets[].newField`). A value of the
//! wrong JSON type for its field (a string where an int32 is expected, an int32 out of range, a
//! time that is not RFC 3339...) is treated as absent, as `null` is: a value field is written
//! as its Go zero value, a pointer field is not written, a list element or map value is written
//! as its zero value; and it is reported too, e.g. `spec.ports[].port (not an int32)`.
//!
//! The input is either the served JSON text itself ([`encode_json`]: what the cache encodes,
//! read without a `serde_json::Value`) or a `Value` ([`encode_object`]); one encoder, generic
//! over [`Json`], reads both, so both give the same bytes and reports for the same JSON.

use std::cell::Cell;

use super::json::{self, Json, Tree};
use super::schema;
use super::wire::{put_bytes, put_nested, put_varint_field};
use super::{Card, Field, Kind, Message};
use crate::k8s::Resource;
use serde_json::Value;

/// One object's message, ready to be shared by a List and a GET body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The message preceded by tag `0x12` (field 2, length-delimited) and its varint length:
    /// both a List's `items` field and `runtime.Unknown.raw`.
    pub bytes: Vec<u8>,
    /// Paths of what was dropped or zeroed (see the module documentation), each once.
    pub unknown: Vec<String>,
}

/// The message of a resource's objects.
pub fn message_of(res: Resource) -> &'static Message {
    match res {
        Resource::Nodes => &schema::CORE_V1_NODE,
        Resource::Services => &schema::CORE_V1_SERVICE,
        Resource::Endpoints => &schema::CORE_V1_ENDPOINTS,
        Resource::SlicesV1 => &schema::DISCOVERY_V1_ENDPOINT_SLICE,
        Resource::SlicesV1beta1 => &schema::DISCOVERY_V1BETA1_ENDPOINT_SLICE,
        Resource::CidrsV1 => &schema::NETWORKING_V1_SERVICE_CIDR,
        Resource::CidrsV1beta1 => &schema::NETWORKING_V1BETA1_SERVICE_CIDR,
    }
}

/// Encodes `obj` as a `res` object (see [`Encoded`]).
pub fn encode_object(res: Resource, obj: &Value) -> Encoded {
    encode(res, obj, 256)
}

/// Encodes the JSON text `json` (a served object's bytes) as a `res` object: the same bytes and
/// reports as [`encode_object`] of `serde_json::from_slice(json)`, without building that
/// `Value`. A text that does not parse as JSON is encoded as `null` is (not an object: every
/// field its zero value, reported `(not an object)`), as `Value::default()` would be.
pub fn encode_json(res: Resource, json: &[u8]) -> Encoded {
    // A message is most often smaller than its JSON: room for it at once.
    let capacity = json.len() * 3 / 4 + 64;
    let mut tree = SPARE.with(Cell::take).unwrap_or_default().recycle();
    let encoded = match tree.read(json) {
        Ok(root) => encode(res, tree.at(&root), capacity),
        Err(_) => encode(res, tree.at(&json::NULL), 64),
    };
    if tree.bytes() <= SPARE_MAX {
        SPARE.with(|spare| spare.set(Some(tree.recycle())));
    }
    encoded
}

thread_local! {
    /// The tree [`encode_json`] read its last text into, emptied: reading the next one allocates
    /// nothing once its buffers have grown (musl's allocator is slow at many small allocations).
    static SPARE: Cell<Option<Tree<'static>>> = const { Cell::new(None) };
}

/// The most a thread's spare tree keeps (bytes of buffers): an unusually large object's tree is
/// freed rather than kept.
const SPARE_MAX: usize = 256 * 1024;

fn encode<'t>(res: Resource, obj: impl Json<'t>, capacity: usize) -> Encoded {
    let mut enc = Encoder::default();
    let mut bytes = Vec::with_capacity(capacity);
    put_nested(&mut bytes, 2, |b| enc.top(message_of(res), obj, b));
    Encoded {
        bytes,
        unknown: enc.unknown,
    }
}

/// The meta/v1 `Status` message of `status` (no prefix, no envelope); unknown keys are dropped.
pub fn encode_status(status: &Value) -> Vec<u8> {
    let mut enc = Encoder::default();
    let mut bytes = Vec::with_capacity(128);
    enc.top(&schema::META_V1_STATUS, status, &mut bytes);
    bytes
}

#[derive(Default)]
struct Encoder {
    /// The JSON path of the value being encoded, a segment a level (`spec`, `ports`, `[]`),
    /// joined only for a report.
    path: Vec<&'static str>,
    unknown: Vec<String>,
}

impl Encoder {
    fn top<'t, J: Json<'t>>(&mut self, msg: &Message, obj: J, buf: &mut Vec<u8>) {
        if obj.is_object() {
            self.message(msg, Some(obj), buf);
        } else {
            self.report("(not an object)");
            self.message::<J>(msg, None, buf);
        }
    }

    /// Records the current path, followed by `why` (e.g. `(not a string)`) when non-empty.
    fn report(&mut self, why: &str) {
        self.report_in(None, why);
    }

    /// Records the current path, then `last` when there is one, then `why` when non-empty:
    /// `spec.ports[].port (not an int32)`, `spec.someNewField`.
    fn report_in(&mut self, last: Option<&str>, why: &str) {
        let mut entry = String::new();
        for segment in self.path.iter().copied().chain(last) {
            if !entry.is_empty() && !segment.starts_with(['[', '{']) {
                entry.push('.');
            }
            entry.push_str(segment);
        }
        if !why.is_empty() {
            if !entry.is_empty() {
                entry.push(' ');
            }
            entry.push_str(why);
        }
        if !self.unknown.contains(&entry) {
            self.unknown.push(entry);
        }
    }

    /// Runs `f` with `segment` appended to the path (`name`, `[]`, `{}`).
    fn at<R>(&mut self, segment: &'static str, f: impl FnOnce(&mut Self) -> R) -> R {
        self.path.push(segment);
        let r = f(self);
        self.path.pop();
        r
    }

    /// The fields of `msg` from the object `obj`; `None` is the Go zero value of the struct.
    fn message<'t, J: Json<'t>>(&mut self, msg: &Message, obj: Option<J>, buf: &mut Vec<u8>) {
        if let Some(entries) = obj.and_then(J::entries) {
            for (key, _) in entries {
                let known = msg.fields.iter().any(|f| f.json == key) || msg.known.contains(&key);
                if !known {
                    self.report_in(Some(key), "");
                }
            }
        }
        for field in msg.fields {
            let value = obj.and_then(|o| o.get(field.json)).filter(|v| !v.is_null());
            self.at(field.json, |e| e.field(field, value, buf));
        }
    }

    fn field<'t, J: Json<'t>>(&mut self, field: &Field, value: Option<J>, buf: &mut Vec<u8>) {
        match field.card {
            Card::Value => self.value(field.number, &field.kind, value, true, buf),
            Card::Pointer => self.value(field.number, &field.kind, value, false, buf),
            Card::Repeated => match value.map(J::items) {
                None => {}
                Some(Some(items)) => self.at("[]", |e| {
                    for item in items {
                        let item = Some(item).filter(|v| !v.is_null());
                        e.value(field.number, &field.kind, item, true, buf);
                    }
                }),
                Some(None) => self.report("(not an array)"),
            },
            Card::Map => match value.map(J::entries) {
                None => {}
                Some(Some(entries)) => self.at("{}", |e| {
                    // Go sorts the keys (sort.Strings: byte order); the entries come in that
                    // order, whatever order the JSON text has them in.
                    for (key, v) in entries {
                        let v = Some(v).filter(|v| !v.is_null());
                        put_nested(buf, field.number, |b| {
                            put_bytes(b, 1, key.as_bytes());
                            e.value(2, &field.kind, v, true, b);
                        });
                    }
                }),
                Some(None) => self.report("(not an object)"),
            },
        }
    }

    /// Writes one value of `kind` as field `number`. `None` (absent, `null` or wrong-typed) is
    /// written as the zero value when `always`, else not at all.
    fn value<'t, J: Json<'t>>(
        &mut self,
        number: u32,
        kind: &Kind,
        value: Option<J>,
        always: bool,
        buf: &mut Vec<u8>,
    ) {
        let value = match value {
            Some(v) if accepts(kind, v) => Some(v),
            Some(_) => {
                self.report(expected(kind));
                None
            }
            None => None,
        };
        if value.is_none() && !always {
            return;
        }
        match kind {
            Kind::String => {
                let s = value.and_then(J::as_str).unwrap_or("");
                put_bytes(buf, number, s.as_bytes());
            }
            Kind::Bool => {
                let b = value.and_then(J::as_bool).unwrap_or(false);
                put_varint_field(buf, number, u64::from(b));
            }
            Kind::Int32 | Kind::Int64 => {
                // accepts() checked the range: an int32 is sign-extended like Go's uint64(int32).
                let n = value.and_then(J::as_i64).unwrap_or(0);
                put_varint_field(buf, number, n as u64);
            }
            Kind::Message(msg) => {
                let obj = value.filter(|v| v.is_object());
                put_nested(buf, number, |b| self.message(msg, obj, b));
            }
            Kind::Time | Kind::MicroTime => {
                let micro = matches!(kind, Kind::MicroTime);
                let ts = value.and_then(J::as_str).and_then(parse_rfc3339);
                put_nested(buf, number, |b| {
                    // time_proto.go: the zero time (and an absent one) writes nothing inside.
                    if let Some(ts) = ts.filter(|ts| !ts.is_go_zero()) {
                        put_varint_field(b, 1, ts.seconds as u64);
                        // Time keeps seconds only; MicroTime truncates to microseconds.
                        let nanos = if micro { ts.nanos - ts.nanos % 1000 } else { 0 };
                        put_varint_field(b, 2, u64::from(nanos));
                    }
                });
            }
            Kind::Quantity => {
                // quantity_proto.go writes String(): the canonical form, which is what an
                // apiserver's JSON already holds; a JSON number is written as its JSON text.
                // The zero Quantity's String() is "0".
                let s = value.and_then(J::as_str);
                let n = value.and_then(J::number_text);
                let text = s.or(n.as_deref()).unwrap_or("0");
                put_nested(buf, number, |b| put_bytes(b, 1, text.as_bytes()));
            }
            Kind::IntOrString => {
                let (ty, int, s) = match value {
                    Some(v) if v.is_string() => (1, 0, v.as_str().unwrap_or("")),
                    Some(v) => (0, v.as_i64().unwrap_or(0), ""),
                    None => (0, 0, ""),
                };
                put_nested(buf, number, |b| {
                    put_varint_field(b, 1, ty);
                    put_varint_field(b, 2, int as u64);
                    put_bytes(b, 3, s.as_bytes());
                });
            }
            Kind::FieldsV1 => {
                // fieldsv1.go: raw is the JSON as received; serde_json's compact form of it.
                let raw = value.map(J::compact).unwrap_or_default();
                put_nested(buf, number, |b| {
                    if !raw.is_empty() {
                        put_bytes(b, 1, raw.as_bytes());
                    }
                });
            }
        }
    }
}

/// Whether `v` (not null) is a value of `kind` Go's JSON decoding accepts.
fn accepts<'t>(kind: &Kind, v: impl Json<'t>) -> bool {
    match kind {
        Kind::String => v.is_string(),
        Kind::Bool => v.as_bool().is_some(),
        Kind::Int32 => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        Kind::Int64 => v.as_i64().is_some(),
        Kind::Message(_) => v.is_object(),
        Kind::Time | Kind::MicroTime => v.as_str().and_then(parse_rfc3339).is_some(),
        Kind::Quantity => v.is_string() || v.is_number(),
        Kind::IntOrString => v.is_string() || v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        Kind::FieldsV1 => true,
    }
}

/// The report for a value of the wrong type.
fn expected(kind: &Kind) -> &'static str {
    match kind {
        Kind::String => "(not a string)",
        Kind::Bool => "(not a bool)",
        Kind::Int32 => "(not an int32)",
        Kind::Int64 => "(not an int64)",
        Kind::Message(_) => "(not an object)",
        Kind::Time | Kind::MicroTime => "(not an RFC 3339 time)",
        Kind::Quantity => "(not a quantity)",
        Kind::IntOrString => "(not an int32 or a string)",
        Kind::FieldsV1 => "(not JSON)",
    }
}

/// An instant: Unix seconds and the nanoseconds within the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z (negative before).
    pub seconds: i64,
    /// 0..=999_999_999.
    pub nanos: u32,
}

/// Go's zero `time.Time`, 0001-01-01T00:00:00Z, in Unix seconds.
const GO_ZERO_SECONDS: i64 = -62_135_596_800;

impl Timestamp {
    /// Whether Go's `Time.IsZero` holds (the instant 0001-01-01T00:00:00Z, whatever the offset).
    pub fn is_go_zero(&self) -> bool {
        self.seconds == GO_ZERO_SECONDS && self.nanos == 0
    }
}

/// Parses an RFC 3339 date-time as Go's `time.Parse(time.RFC3339, s)` does:
/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0i64, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let sep = |at: usize, c: u8| b.get(at) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, min, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if sep(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i) {
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if i + 6 == b.len() && sep(i + 3, b':') => {
            let (h, m) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if c == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + min * 60 + sec - offset;
    Some(Timestamp { seconds, nanos })
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "encode_json_tests.rs"]
mod json_tests;
