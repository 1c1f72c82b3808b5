//! Pure decoding of what the apiserver sends: watch-stream lines into [`WatchEvent`]s, list bodies
//! into [`ListResult`]s, `Status` bodies into [`StatusInfo`]; for an object or a watch line too
//! long to be decoded, who it is from its first bytes ([`object_ref_from_prefix`],
//! [`event_ref_from_prefix`]). No I/O beyond reading (or skipping, [`skip_line`]) lines from a
//! caller-supplied `BufRead` with a hard length cap; garbage yields a [`DecodeError`], never a
//! panic.

use crate::handoff::refused::{self, Reason};
use crate::k8s::Resource;
use serde_json::Value;
use std::fmt;
use std::io::{self, BufRead};

/// Most `details.causes[].reason` values kept from one `Status` (the rest are ignored).
pub const MAX_STATUS_CAUSES: usize = 16;
/// The `details.causes[].reason` the apiserver sets when asked for a resourceVersion newer than
/// any it has (`metav1.CauseTypeResourceVersionTooLarge`).
pub const CAUSE_RV_TOO_LARGE: &str = "ResourceVersionTooLarge";

/// Longest watch line accepted (one JSON event). etcd caps objects at ~1.5 MiB; JSON is larger
/// than protobuf but far below this.
pub const MAX_WATCH_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Room for a watch event's envelope (`{"type":"MODIFIED","object":…}`) around its object: a
/// watch line may be this much longer than the largest object taken.
pub const WATCH_EVENT_ENVELOPE_BYTES: usize = 4096;

/// A decoding failure. The payload is a short human-readable detail.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not JSON (serde_json's message).
    Json(String),
    /// JSON, but not an object where one was required (names the field).
    NotAnObject(&'static str),
    /// A required field is missing or has the wrong type.
    Missing(&'static str),
    /// A watch event `type` this decoder does not know.
    UnknownType(String),
    /// A line exceeded the cap.
    LineTooLong {
        /// The cap that was exceeded.
        limit: usize,
    },
    /// A body in a content coding that is not supported, or not valid in its coding (a corrupt
    /// gzip stream).
    Encoding(String),
    /// A protobuf body or watch frame that is not the apiserver's (truncated, a length past its
    /// end, an undecodable object; the detail says which).
    Protobuf(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(e) => write!(f, "invalid JSON: {e}"),
            DecodeError::NotAnObject(what) => write!(f, "{what} is not a JSON object"),
            DecodeError::Missing(what) => write!(f, "missing or mistyped field {what}"),
            DecodeError::UnknownType(t) => write!(f, "unknown watch event type {t:?}"),
            DecodeError::LineTooLong { limit } => write!(f, "watch line longer than {limit} bytes"),
            DecodeError::Encoding(e) => write!(f, "content encoding: {e}"),
            DecodeError::Protobuf(e) => write!(f, "invalid protobuf: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The interesting fields of a Kubernetes `Status` (error) object.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StatusInfo {
    /// `code` (the HTTP status it stands for); 0 when absent.
    pub code: u16,
    /// `reason`, e.g. `Expired`; empty when absent.
    pub reason: String,
    /// `message`; empty when absent.
    pub message: String,
    /// `details.causes[].reason`, in order (at most [`MAX_STATUS_CAUSES`]; causes without a
    /// string reason are skipped).
    pub causes: Vec<String>,
}

impl StatusInfo {
    /// Whether this is the apiserver's "Too large resource version" refusal (see
    /// [`is_rv_too_large`]).
    pub fn is_rv_too_large(&self) -> bool {
        is_rv_too_large(&self.message, &self.causes)
    }
}

/// Whether a `Status` (its message and cause reasons) says the requested resourceVersion is
/// newer than anything the upstream has: a cause reason [`CAUSE_RV_TOO_LARGE`], or (servers
/// before 1.18.6 set no cause) a message containing "too large resource version", in any case.
/// client-go's `isTooLargeResourceVersionError` checks the same.
pub fn is_rv_too_large(message: &str, causes: &[String]) -> bool {
    causes.iter().any(|c| c == CAUSE_RV_TOO_LARGE)
        || message
            .to_ascii_lowercase()
            .contains("too large resource version")
}

/// One decoded watch event.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    /// `ADDED` with the object.
    Added(Value),
    /// `MODIFIED` with the object.
    Modified(Value),
    /// `DELETED` with the object's last state.
    Deleted(Value),
    /// `BOOKMARK`: only the resourceVersion matters.
    Bookmark {
        /// `object.metadata.resourceVersion`.
        resource_version: String,
    },
    /// `ERROR` with a Status object.
    Error(StatusInfo),
}

/// A decoded LIST response.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ListResult {
    /// `items`, each as its JSON text (`null` decodes as empty). Not decoded into `Value`s
    /// here: a whole list of `Value`s costs many times its JSON size and set the process's peak
    /// memory (see BENCHMARKS.md); the cache parses one item at a time.
    pub items: Vec<Box<str>>,
    /// `metadata.resourceVersion`, empty when absent.
    pub resource_version: String,
    /// `metadata.continue`, when the apiserver paginated the answer.
    pub continue_token: Option<String>,
    /// The server that answered, and so the resourceVersion domain of `resource_version` and
    /// `continue_token` (set by the client; `None` when unknown).
    pub origin: Option<crate::upstream::domain::RvOrigin>,
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line is in the buffer (newline stripped).
    Complete,
    /// The stream ended cleanly between lines.
    Eof,
    /// The stream ended in the middle of a line; the buffer holds the fragment.
    Truncated,
    /// The line exceeded the cap; the buffer holds its first `max` bytes.
    TooLong,
}

/// Reads one `\n`-terminated line into `buf` (cleared first), never buffering more than `max`
/// bytes. I/O errors (including read timeouts) are passed through.
pub fn read_line<R: BufRead + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if buf.is_empty() {
                Line::Eof
            } else {
                Line::Truncated
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        if take > room {
            buf.extend_from_slice(chunk.get(..room).unwrap_or_default());
            r.consume(room);
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(chunk.get(..take).unwrap_or_default());
        r.consume(if done { take + 1 } else { take });
        if done {
            return Ok(Line::Complete);
        }
    }
}

/// Discards the rest of a line after [`read_line`] answered [`Line::TooLong`]: reads through
/// its `\n` without buffering any of it. Answers how many bytes of the line it skipped (the
/// `\n` not counted: the whole line is `max` plus that) and whether the `\n` was found (false:
/// the stream ended first). I/O errors are passed through (what was skipped before one is lost
/// with the stream).
pub fn skip_line<R: BufRead + ?Sized>(r: &mut R) -> io::Result<(u64, bool)> {
    let mut skipped: u64 = 0;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((skipped, false));
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok((skipped.saturating_add(i as u64), true));
            }
            None => {
                let n = chunk.len();
                r.consume(n);
                skipped = skipped.saturating_add(n as u64);
            }
        }
    }
}

/// `metadata.resourceVersion` of an object, if it is a string.
pub fn resource_version_of(obj: &Value) -> Option<&str> {
    obj.get("metadata")?.get("resourceVersion")?.as_str()
}

/// Decodes one watch line (`{"type":…,"object":…}`).
pub fn decode_event(line: &[u8]) -> Result<WatchEvent, DecodeError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| DecodeError::Json(e.to_string()))?;
    let Value::Object(mut map) = v else {
        return Err(DecodeError::NotAnObject("watch event"));
    };
    let kind = match map.get("type") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(DecodeError::Missing("type")),
    };
    let object = match map.remove("object") {
        Some(o @ Value::Object(_)) => o,
        Some(_) => return Err(DecodeError::NotAnObject("object")),
        None => return Err(DecodeError::Missing("object")),
    };
    match kind.as_str() {
        "ADDED" => Ok(WatchEvent::Added(object)),
        "MODIFIED" => Ok(WatchEvent::Modified(object)),
        "DELETED" => Ok(WatchEvent::Deleted(object)),
        "BOOKMARK" => match resource_version_of(&object) {
            Some(rv) => Ok(WatchEvent::Bookmark {
                resource_version: rv.to_string(),
            }),
            None => Err(DecodeError::Missing("object.metadata.resourceVersion")),
        },
        "ERROR" => Ok(WatchEvent::Error(status_of(&object))),
        _ => Err(DecodeError::UnknownType(kind)),
    }
}

/// Decodes a LIST body (`{"metadata":{"resourceVersion":…},"items":[…]}`).
pub fn decode_list(body: &[u8]) -> Result<ListResult, DecodeError> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default, rename = "resourceVersion")]
        resource_version: Option<String>,
        #[serde(default, rename = "continue")]
        continue_token: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct List<'a> {
        #[serde(borrow, default)]
        items: Option<Vec<&'a serde_json::value::RawValue>>,
        #[serde(default)]
        metadata: Option<Meta>,
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return match serde_json::from_slice::<Value>(body) {
            Err(e) => Err(DecodeError::Json(e.to_string())),
            Ok(_) => Err(DecodeError::NotAnObject("list")),
        };
    }
    let list: List<'_> = serde_json::from_slice(body).map_err(|e| {
        // A list whose `items` is not an array, or metadata of the wrong shape.
        if e.is_data() {
            DecodeError::Missing("items")
        } else {
            DecodeError::Json(e.to_string())
        }
    })?;
    let items = match list.items {
        Some(items) => items,
        None => {
            // `items` absent (not `null`): not a list.
            let v: Value =
                serde_json::from_slice(body).map_err(|e| DecodeError::Json(e.to_string()))?;
            if v.get("items").is_some_and(Value::is_null) {
                Vec::new()
            } else {
                return Err(DecodeError::Missing("items"));
            }
        }
    };
    if items.iter().any(|i| !i.get().starts_with('{')) {
        return Err(DecodeError::NotAnObject("list item"));
    }
    let meta = list.metadata;
    Ok(ListResult {
        items: items.into_iter().map(|i| Box::from(i.get())).collect(),
        resource_version: meta
            .as_ref()
            .and_then(|m| m.resource_version.clone())
            .unwrap_or_default(),
        continue_token: meta
            .and_then(|m| m.continue_token)
            .filter(|c| !c.is_empty()),
        origin: None,
    })
}

/// Reads code/reason/message and the cause reasons from a `Status` object; absent fields are
/// zero/empty.
pub fn status_of(obj: &Value) -> StatusInfo {
    let text = |name: &str| {
        obj.get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    StatusInfo {
        code: obj
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(0),
        reason: text("reason"),
        message: text("message"),
        causes: obj
            .get("details")
            .and_then(|d| d.get("causes"))
            .and_then(Value::as_array)
            .map(|causes| {
                causes
                    .iter()
                    .filter_map(|c| c.get("reason").and_then(Value::as_str))
                    .take(MAX_STATUS_CAUSES)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Decodes an error response body: a `Status` when it is one, otherwise the (lossy, shortened)
/// body text as message. `http_code` fills in a missing `code`.
pub fn decode_status_body(body: &[u8], http_code: u16) -> StatusInfo {
    /// Longest body excerpt quoted in a message.
    const MAX_QUOTE: usize = 512;
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => {
            let mut s = status_of(&v);
            if s.code == 0 {
                s.code = http_code;
            }
            s
        }
        _ => {
            let quote = body.get(..MAX_QUOTE).unwrap_or(body);
            StatusInfo {
                code: http_code,
                reason: String::new(),
                message: String::from_utf8_lossy(quote).trim().to_string(),
                causes: Vec::new(),
            }
        }
    }
}

/// Who an object is, as read by [`object_ref_from_prefix`] from its first bytes: the
/// `metadata` members that are complete strings there (`None`: absent, not a string, cut off by
/// the end of the bytes, or not read because they come later).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectRef {
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
}

impl ObjectRef {
    /// Sets the member `field` of `metadata` to the string `token` (a complete JSON string
    /// token; `None` for any other value).
    fn set(&mut self, field: Key, token: Option<&[u8]>) {
        let slot = match field {
            Key::Namespace => &mut self.namespace,
            Key::Name => &mut self.name,
            Key::ResourceVersion => &mut self.resource_version,
            _ => return,
        };
        *slot = token.and_then(|t| serde_json::from_slice(t).ok());
    }
}

/// Why a watch event's object is refused, if it is: it does not fit `res` (its `kind`,
/// `apiVersion` or scope, [`refused::misfit`]), or its resourceVersion is older than
/// `position`, the one the stream has reached ([`refused::older`]: on one stream the upstream's
/// events only move forward, so an older version would replace a newer one). A nameless object
/// is not judged here: it is dropped as such.
pub fn refusal(res: Resource, obj: &Value, position: &str) -> Option<Reason> {
    crate::k8s::ObjectKey::of(obj)?;
    refused::misfit_value(res, obj).or_else(|| {
        resource_version_of(obj)
            .filter(|rv| refused::older(rv, position))
            .map(|_| Reason::OlderVersion)
    })
}

/// Reads `metadata.namespace`, `metadata.name` and `metadata.resourceVersion` from the first
/// bytes of a JSON object that may be cut off anywhere (an object too large to be read whole:
/// it is named from what was kept of it). Lenient: the bytes are not checked to be JSON; a
/// member is read when it is a complete string in the top-level object's `metadata` object,
/// decoded as serde decodes it (escapes included); a key spelled with escapes is recognised.
/// As for a `serde_json::Value`, the last of repeated keys wins. Anything that does not start
/// with `{` reads as nothing. Pure, never panics, linear in the prefix, no recursion.
pub fn object_ref_from_prefix(prefix: &[u8]) -> ObjectRef {
    let mut r = ObjectRef::default();
    walk_prefix(prefix, |path, token| match path {
        [Key::Metadata] => r = ObjectRef::default(),
        [Key::Metadata, field] => r.set(*field, token),
        _ => {}
    });
    r
}

/// Who a whole object is and what it says it is, read from its JSON text without decoding it
/// ([`object_head`]): what [`refusal`] and the key of a watch event need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectHead {
    /// `metadata.namespace`, `metadata.name`, `metadata.resourceVersion`.
    pub meta: ObjectRef,
    /// `kind`: `None` when absent, `Some(None)` when not a string (as [`refused::misfit`]
    /// takes it).
    pub kind: Option<Option<String>>,
    /// `apiVersion`, the same way.
    pub api_version: Option<Option<String>>,
}

impl ObjectHead {
    /// Its key, `None` without a name (or with an empty one), as [`crate::k8s::ObjectKey::of`]
    /// reads it from a `Value`.
    pub fn key(&self) -> Option<crate::k8s::ObjectKey> {
        let name = self.meta.name.as_deref().filter(|n| !n.is_empty())?;
        let namespace = self.meta.namespace.as_deref().unwrap_or("");
        Some(crate::k8s::ObjectKey::new(namespace, name))
    }
}

/// [`object_ref_from_prefix`] of a whole object, with its `kind` and `apiVersion`: for valid
/// JSON the members a `serde_json::Value` of it gives (the last of repeated keys).
pub fn object_head(text: &[u8]) -> ObjectHead {
    let mut head = ObjectHead::default();
    walk_prefix(text, |path, token| {
        let text = || token.and_then(|t| serde_json::from_slice::<String>(t).ok());
        match path {
            [Key::Metadata] => head.meta = ObjectRef::default(),
            [Key::Metadata, field] => head.meta.set(*field, token),
            [Key::Kind] => head.kind = Some(text()),
            [Key::ApiVersion] => head.api_version = Some(text()),
            _ => {}
        }
    });
    head
}

/// [`refusal`] of an object read by [`object_head`], without a `Value`.
pub fn refusal_of(res: Resource, head: &ObjectHead, position: &str) -> Option<Reason> {
    let key = head.key()?;
    let (kind, api) = (head.kind.as_ref(), head.api_version.as_ref());
    refused::misfit(
        res,
        kind.map(Option::as_deref),
        api.map(Option::as_deref),
        &key.namespace,
    )
    .or_else(|| {
        head.meta
            .resource_version
            .as_deref()
            .filter(|rv| refused::older(rv, position))
            .map(|_| Reason::OlderVersion)
    })
}

/// A watch event's object, not decoded into a `Value`: its JSON text as it came and what
/// [`object_head`] read from it.
#[derive(Clone, Debug, PartialEq)]
pub struct EventObject {
    /// The object's JSON text.
    pub text: Box<str>,
    /// Who it is.
    pub head: ObjectHead,
}

/// One watch event as the reflector takes it ([`decode_event_text`]): an object's event carries
/// the object's text, not a `Value`.
#[derive(Clone, Debug, PartialEq)]
pub enum TextEvent {
    /// `ADDED` with the object.
    Added(EventObject),
    /// `MODIFIED` with the object.
    Modified(EventObject),
    /// `DELETED` with the object's last state.
    Deleted(EventObject),
    /// `BOOKMARK`: only the resourceVersion matters.
    Bookmark {
        /// `object.metadata.resourceVersion`.
        resource_version: String,
    },
    /// `ERROR` with a Status object.
    Error(StatusInfo),
}

/// A JSON text read as strictly as a `serde_json::Value` reads it (UTF-8 and escapes in every
/// string and key, numbers in range, nesting depth), keeping nothing.
struct Strict;

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_str<E>(self, _: &str) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Strict)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        while map.next_entry::<Strict, Strict>()?.is_some() {}
        Ok(Strict)
    }
}

/// Decodes one watch line as [`decode_event`] does (the same events and the same errors), but
/// an object's event keeps the object as its text: the line is split into `type` and `object`
/// (a `RawValue`), and the object read only for who it is ([`object_head`]). A line of another
/// shape than `{"type":"<string>","object":{…}}` (repeated members, another order of
/// unusual types) goes through [`decode_event`], so that it means what it means there; a
/// BOOKMARK or ERROR event's object is decoded as there.
pub fn decode_event_text(line: &[u8]) -> Result<TextEvent, DecodeError> {
    #[derive(serde::Deserialize)]
    struct Parts<'a> {
        #[serde(borrow, rename = "type")]
        kind: Option<&'a str>,
        #[serde(borrow)]
        object: Option<&'a serde_json::value::RawValue>,
    }
    let first = line.iter().find(|b| !b.is_ascii_whitespace());
    // Only a line a `Value` would take: serde_json skips what it ignores (other members, and
    // the raw object) without checking its UTF-8, escapes or number ranges.
    let parts = match first {
        Some(b'{') if serde_json::from_slice::<Strict>(line).is_ok() => {
            serde_json::from_slice::<Parts<'_>>(line).ok()
        }
        _ => None,
    };
    let (Some(kind), Some(object)) = parts.map(|p| (p.kind, p.object)).unwrap_or_default() else {
        return decode_event(line).map(TextEvent::from);
    };
    if !object.get().starts_with('{') {
        return decode_event(line).map(TextEvent::from);
    }
    let take = || EventObject {
        text: Box::from(object.get()),
        head: object_head(object.get().as_bytes()),
    };
    match kind {
        "ADDED" => Ok(TextEvent::Added(take())),
        "MODIFIED" => Ok(TextEvent::Modified(take())),
        "DELETED" => Ok(TextEvent::Deleted(take())),
        _ => decode_event(line).map(TextEvent::from),
    }
}

impl From<WatchEvent> for TextEvent {
    fn from(event: WatchEvent) -> TextEvent {
        let text = |o: Value| {
            let text: Box<str> = o.to_string().into();
            let head = object_head(text.as_bytes());
            EventObject { text, head }
        };
        match event {
            WatchEvent::Added(o) => TextEvent::Added(text(o)),
            WatchEvent::Modified(o) => TextEvent::Modified(text(o)),
            WatchEvent::Deleted(o) => TextEvent::Deleted(text(o)),
            WatchEvent::Bookmark { resource_version } => TextEvent::Bookmark { resource_version },
            WatchEvent::Error(s) => TextEvent::Error(s),
        }
    }
}

/// [`object_ref_from_prefix`] for the first bytes of a watch event line
/// (`{"type":"MODIFIED","object":{…}}`, the members in any order): the event's `type` when it
/// is a complete string there, and the ref of the object under the top-level `object` key.
pub fn event_ref_from_prefix(prefix: &[u8]) -> (Option<String>, ObjectRef) {
    let mut kind = None;
    let mut r = ObjectRef::default();
    walk_prefix(prefix, |path, token| match path {
        [Key::Type] => kind = token.and_then(|t| serde_json::from_slice(t).ok()),
        [Key::Object] | [Key::Object, Key::Metadata] => r = ObjectRef::default(),
        [Key::Object, Key::Metadata, field] => r.set(*field, token),
        _ => {}
    });
    (kind, r)
}

/// A key on the path to a value, as far as the prefix readers care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Metadata,
    Namespace,
    Name,
    ResourceVersion,
    Type,
    Object,
    Kind,
    ApiVersion,
    /// Any other key, or an array element.
    Other,
}

/// Longest key token (quotes included) that can be a wanted key: `resourceVersion` spelled
/// entirely in `\u` escapes is 92 bytes.
const MAX_KEY_TOKEN: usize = 128;

impl Key {
    /// The key a complete string token spells.
    fn of(token: &[u8]) -> Key {
        if token.len() > MAX_KEY_TOKEN {
            return Key::Other;
        }
        let decoded: String;
        let text = if token.contains(&b'\\') {
            match serde_json::from_slice::<String>(token) {
                Ok(s) => {
                    decoded = s;
                    decoded.as_bytes()
                }
                Err(_) => return Key::Other,
            }
        } else {
            token
                .get(1..token.len().saturating_sub(1))
                .unwrap_or_default()
        };
        match text {
            b"metadata" => Key::Metadata,
            b"namespace" => Key::Namespace,
            b"name" => Key::Name,
            b"resourceVersion" => Key::ResourceVersion,
            b"type" => Key::Type,
            b"object" => Key::Object,
            b"kind" => Key::Kind,
            b"apiVersion" => Key::ApiVersion,
            _ => Key::Other,
        }
    }
}

/// Containers whose keys [`walk_prefix`] follows: a watch event's `object.metadata.name` is a
/// member of the third.
const KEY_LEVELS: usize = 3;

/// One open container among the first [`KEY_LEVELS`].
#[derive(Clone, Copy, Debug)]
struct Level {
    object: bool,
    /// The current member's key (objects).
    key: Key,
    /// A key is expected next (objects: after `{` and `,`, until `:`).
    want_key: bool,
}

/// Where a string token that starts at `from` (just past its opening quote) ends: the index
/// just past its closing quote; `None` when the bytes end first.
fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let rest = bytes.get(from..)?;
        from += rest.iter().position(|&c| c == b'"' || c == b'\\')?;
        if bytes.get(from) == Some(&b'\\') {
            from += 2; // the escaped byte, whatever it is
        } else {
            return Some(from + 1);
        }
    }
}

/// Walks the first bytes of a JSON object (cut off anywhere, or not JSON at all), calling
/// `on_value(path, token)` at each value that is a member of an object among the first
/// [`KEY_LEVELS`] containers: `path` is the keys leading to it from the top ([`Key::Other`]
/// for an array element on the way), `token` the value's text when it is a complete string
/// (quotes included), `None` when it is anything else or is cut off. Stops at the end of the
/// top-level object. Each byte is looked at once; deeper containers are only counted.
fn walk_prefix(prefix: &[u8], mut on_value: impl FnMut(&[Key], Option<&[u8]>)) {
    let Some(start) = prefix.iter().position(|b| !b.is_ascii_whitespace()) else {
        return;
    };
    if prefix.get(start) != Some(&b'{') {
        return;
    }
    let mut levels = [Level {
        object: false,
        key: Key::Other,
        want_key: false,
    }; KEY_LEVELS];
    let mut depth = 0usize;
    let mut value = |levels: &[Level; KEY_LEVELS], depth: usize, token: Option<&[u8]>| {
        let Some(open) = levels.get(..depth) else {
            return; // deeper than followed
        };
        if open.last().is_some_and(|l| l.object && !l.want_key) {
            let mut path = [Key::Other; KEY_LEVELS];
            for (p, l) in path.iter_mut().zip(open) {
                *p = l.key;
            }
            on_value(path.get(..depth).unwrap_or_default(), token);
        }
    };
    let mut i = start;
    while let Some(&b) = prefix.get(i) {
        let current = depth.checked_sub(1).and_then(|d| levels.get_mut(d));
        match b {
            b'"' => {
                let end = string_end(prefix, i + 1);
                let token = end.and_then(|e| prefix.get(i..e));
                match current {
                    Some(l) if l.object && l.want_key => {
                        l.key = token.map_or(Key::Other, Key::of);
                    }
                    _ => value(&levels, depth, token),
                }
                match end {
                    Some(e) => i = e,
                    None => return,
                }
                continue;
            }
            b'{' | b'[' => {
                value(&levels, depth, None);
                if let Some(l) = levels.get_mut(depth) {
                    *l = Level {
                        object: b == b'{',
                        key: Key::Other,
                        want_key: b == b'{',
                    };
                }
                depth = depth.saturating_add(1);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return;
                }
            }
            b':' => {
                if let Some(l) = current {
                    l.want_key = false;
                }
            }
            b',' => {
                if let Some(l) = current {
                    l.want_key = l.object;
                    l.key = Key::Other;
                }
            }
            _ if b.is_ascii_whitespace() => {}
            _ => {
                // A number or literal (or a stray byte): up to the next delimiter.
                value(&levels, depth, None);
                let rest = prefix.get(i..).unwrap_or_default();
                i += rest
                    .iter()
                    .position(|&c| {
                        matches!(c, b'"' | b'{' | b'}' | b'[' | b']' | b',' | b':')
                            || c.is_ascii_whitespace()
                    })
                    .unwrap_or(rest.len());
                continue;
            }
        }
        i += 1;
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
