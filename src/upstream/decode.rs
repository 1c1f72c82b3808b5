//! Pure decoding of what the apiserver sends: watch-stream lines into [`WatchEvent`]s, list bodies
//! into [`ListResult`]s, `Status` bodies into [`StatusInfo`]. No I/O beyond reading lines from a
//! caller-supplied `BufRead` with a hard length cap; garbage yields a [`DecodeError`], never a
//! panic.

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
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(e) => write!(f, "invalid JSON: {e}"),
            DecodeError::NotAnObject(what) => write!(f, "{what} is not a JSON object"),
            DecodeError::Missing(what) => write!(f, "missing or mistyped field {what}"),
            DecodeError::UnknownType(t) => write!(f, "unknown watch event type {t:?}"),
            DecodeError::LineTooLong { limit } => write!(f, "watch line longer than {limit} bytes"),
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
    /// here: a whole list of `Value`s costs ~15× its JSON size and set the process's peak
    /// memory; the cache parses one item at a time.
    pub items: Vec<Box<str>>,
    /// `metadata.resourceVersion`, empty when absent.
    pub resource_version: String,
    /// `metadata.continue`, when the apiserver paginated the answer.
    pub continue_token: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Cursor;

    #[test]
    fn events_decode_table() {
        let obj = json!({"metadata": {"name": "a", "resourceVersion": "7"}});
        let cases: Vec<(&str, Result<WatchEvent, DecodeError>)> = vec![
            (
                r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
                Ok(WatchEvent::Added(obj.clone())),
            ),
            (
                r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
                Ok(WatchEvent::Modified(obj.clone())),
            ),
            (
                r#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
                Ok(WatchEvent::Deleted(obj)),
            ),
            (
                r#"{"type":"BOOKMARK","object":{"kind":"Service","metadata":{"resourceVersion":"12"}}}"#,
                Ok(WatchEvent::Bookmark {
                    resource_version: "12".into(),
                }),
            ),
            (
                r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#,
                Ok(WatchEvent::Error(StatusInfo {
                    code: 410,
                    reason: "Expired".into(),
                    message: "too old".into(),
                    causes: vec![],
                })),
            ),
            (
                r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#,
                Err(DecodeError::Missing("object.metadata.resourceVersion")),
            ),
            (
                r#"{"type":"WHAT","object":{}}"#,
                Err(DecodeError::UnknownType("WHAT".into())),
            ),
            (r#"{"object":{}}"#, Err(DecodeError::Missing("type"))),
            (
                r#"{"type":7,"object":{}}"#,
                Err(DecodeError::Missing("type")),
            ),
            (r#"{"type":"ADDED"}"#, Err(DecodeError::Missing("object"))),
            (
                r#"{"type":"ADDED","object":[1]}"#,
                Err(DecodeError::NotAnObject("object")),
            ),
            (r#"[1,2]"#, Err(DecodeError::NotAnObject("watch event"))),
        ];
        for (line, want) in cases {
            assert_eq!(decode_event(line.as_bytes()), want, "{line}");
        }
    }

    #[test]
    fn garbage_and_truncated_events_are_errors() {
        for line in [
            &b"{\"type\":\"ADDED\",\"object\":{\"metadata\""[..],
            b"",
            b"\xff\xfe",
            b"null",
            b"}{",
            b"{\"type\":\"ADDED\",\"object\":{}}x",
        ] {
            assert!(
                matches!(
                    decode_event(line),
                    Err(DecodeError::Json(_) | DecodeError::NotAnObject(_))
                ),
                "{line:?}"
            );
        }
    }

    #[test]
    fn lists_decode() {
        let l = decode_list(br#"{"kind":"ServiceList","metadata":{"resourceVersion":"42","continue":"abc"},"items":[{"metadata":{"name":"a"}}]}"#).unwrap();
        assert_eq!(l.resource_version, "42");
        assert_eq!(l.items.len(), 1);
        assert_eq!(l.continue_token.as_deref(), Some("abc"));
        let l = decode_list(br#"{"metadata":{"resourceVersion":"5","continue":""},"items":null}"#)
            .unwrap();
        assert!(l.items.is_empty());
        assert_eq!(l.continue_token, None);
        assert_eq!(
            decode_list(br#"{"metadata":{}}"#),
            Err(DecodeError::Missing("items"))
        );
        assert_eq!(
            decode_list(br#"{"items":[1]}"#),
            Err(DecodeError::NotAnObject("list item"))
        );
        assert_eq!(decode_list(b"[]"), Err(DecodeError::NotAnObject("list")));
        assert!(matches!(
            decode_list(br#"{"items":["#),
            Err(DecodeError::Json(_))
        ));
    }

    #[test]
    fn status_bodies() {
        let s = decode_status_body(br#"{"kind":"Status","status":"Failure","reason":"Forbidden","message":"no","code":403}"#, 403);
        assert_eq!(
            s,
            StatusInfo {
                code: 403,
                reason: "Forbidden".into(),
                message: "no".into(),
                causes: vec![],
            }
        );
        let s = decode_status_body(b"<html>bad gateway</html>\n", 502);
        assert_eq!(
            s,
            StatusInfo {
                code: 502,
                reason: String::new(),
                message: "<html>bad gateway</html>".into(),
                causes: vec![],
            }
        );
        let long = vec![b'x'; 10_000];
        assert_eq!(decode_status_body(&long, 500).message.len(), 512);
        assert_eq!(decode_status_body(br#"{"kind":"Status"}"#, 504).code, 504);
    }

    #[test]
    fn status_cause_reasons_and_too_large_resource_version() {
        // The apiserver's answer (HTTP 504 or a watch ERROR) to an RV newer than it has.
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 159128021, current: 159127032","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#;
        let s = decode_status_body(body, 504);
        assert_eq!(s.causes, ["ResourceVersionTooLarge"]);
        assert!(s.is_rv_too_large());
        let line = format!(
            r#"{{"type":"ERROR","object":{}}}"#,
            std::str::from_utf8(body).unwrap()
        );
        let Ok(WatchEvent::Error(ev)) = decode_event(line.as_bytes()) else {
            panic!("not an ERROR event");
        };
        assert_eq!(ev, s);
        // (causes, message, too large?)
        let table: [(&str, &str, bool); 7] = [
            (r#"[{"reason":"ResourceVersionTooLarge"}]"#, "", true),
            (
                r#"[{"message":"x"},{"reason":"FieldValueInvalid"},{"reason":"ResourceVersionTooLarge"}]"#,
                "",
                true,
            ),
            ("[]", "too large resource version: 5, current: 3", true),
            ("[]", "Timeout: TOO LARGE RESOURCE VERSION", true),
            (
                r#"[{"reason":"FieldValueInvalid"}]"#,
                "too old resource version",
                false,
            ),
            (r#"{"reason":"ResourceVersionTooLarge"}"#, "", false),
            (r#"[{"reason":7}]"#, "", false),
        ];
        for (causes, message, want) in table {
            let v: Value = serde_json::from_str(&format!(
                r#"{{"kind":"Status","code":504,"message":{},"details":{{"causes":{causes}}}}}"#,
                Value::from(message)
            ))
            .unwrap();
            assert_eq!(status_of(&v).is_rv_too_large(), want, "{causes} {message}");
        }
        // Causes are capped; absent details mean none.
        let many = format!(
            r#"{{"kind":"Status","details":{{"causes":[{}]}}}}"#,
            vec![r#"{"reason":"A"}"#; 100].join(",")
        );
        assert_eq!(
            decode_status_body(many.as_bytes(), 500).causes.len(),
            MAX_STATUS_CAUSES
        );
        assert!(status_of(&json!({"kind": "Status"})).causes.is_empty());
    }

    #[test]
    fn line_reader_handles_complete_truncated_and_long_lines() {
        // A tiny BufReader capacity forces lines across several fill_buf calls.
        let data = b"one\n\ntwo-long-line\nthree";
        let mut r = io::BufReader::with_capacity(3, Cursor::new(&data[..]));
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Complete);
        assert_eq!(buf, b"one");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Complete);
        assert_eq!(buf, b"");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Complete);
        assert_eq!(buf, b"two-long-line");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Truncated);
        assert_eq!(buf, b"three");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Eof);

        let mut r = io::BufReader::with_capacity(4, Cursor::new(&b"0123456789\nab\n"[..]));
        assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::TooLong);
        assert_eq!(buf, b"01234");
        // Exactly at the cap is fine.
        let mut r = Cursor::new(&b"01234\n"[..]);
        assert_eq!(read_line(&mut r, &mut buf, 5).unwrap(), Line::Complete);
    }
}
