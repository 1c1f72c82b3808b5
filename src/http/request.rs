//! The incremental HTTP/1.1 request reader: bytes from the socket in, complete [`Request`]s out.
//! Pure: no I/O, no clock.
//!
//! It owns request framing and its limits: the head (parsed by httparse once its blank line has
//! arrived, capped at [`Limits::max_head`]), the body (`Content-Length` or chunked, capped at
//! [`Limits::max_body`] before anything is allocated), request-smuggling guards, and the HTTP
//! status every kind of bad input is answered with ([`ReadError::status`], decided here only).
//! It also decides when an interim `100 Continue` is due ([`RequestReader::take_continue`]).
//! It does not route, authenticate or interpret headers beyond framing, `Connection` and
//! `Expect`.
//!
//! The outcome depends only on the bytes, never on how they were split across [`push`] calls:
//! the head is scanned byte by byte (method token checked as it arrives, so a TLS hello on the
//! plain port fails at once) and handed to httparse exactly when its terminating empty line is
//! seen; the body decoders are incremental.
//!
//! [`push`]: RequestReader::push

use super::chunked::{ChunkError, ChunkedDecoder};
use super::token::is_tchar;
use crate::k8s::status::ApiError;

/// Default cap on the request head (request line + headers + blank line): 16 KiB.
pub const DEFAULT_MAX_HEAD: usize = 16 * 1024;
/// Default cap on the number of header fields.
pub const DEFAULT_MAX_HEADERS: usize = 64;
/// Default cap on a (decoded) request body: 4 MiB.
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;
/// An empty read buffer holding more capacity than this is released (idle keep-alive connections
/// should not pin the memory of their largest request).
const KEEP_CAPACITY: usize = 64 * 1024;

/// Request size limits, as httparse's `ParserConfig`: a plain struct with a `Default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes in the request head, blank line included; beyond it: 431.
    pub max_head: usize,
    /// Most header fields; beyond it: 431.
    pub max_headers: usize,
    /// Most bytes in the decoded body; beyond it: 413.
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: DEFAULT_MAX_HEAD,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

impl Limits {
    /// Most unparsed bytes [`RequestReader::push`] accepts: one head, one body, plus one head's
    /// worth of slack for chunk framing and a pipelined head.
    pub fn max_buffered(&self) -> usize {
        self.max_head
            .saturating_mul(2)
            .saturating_add(self.max_body)
    }
}

/// One complete request. Header names keep their case; values are raw bytes, OWS-trimmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The method token, e.g. `GET`.
    pub method: String,
    /// Request-target path, still percent-encoded, without the query (`/` for an absolute-form
    /// target without a path).
    pub path: String,
    /// Raw query after `?`, `""` if none.
    pub query: String,
    /// HTTP/1.x minor version: 0 or 1.
    pub minor_version: u8,
    /// Header fields in arrival order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// [`Request::header`] as UTF-8; `None` if absent or not UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        std::str::from_utf8(self.header(name)?).ok()
    }

    /// Whether the connection may carry another request: HTTP/1.1 unless a `Connection` header
    /// lists `close`; HTTP/1.0 only if one lists `keep-alive` (and none lists `close`).
    pub fn keep_alive(&self) -> bool {
        let tokens = || {
            self.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
                .flat_map(|(_, v)| v.split(|&b| b == b','))
                .map(trim_ows)
        };
        if tokens().any(|t| t.eq_ignore_ascii_case(b"close")) {
            return false;
        }
        self.minor_version >= 1 || tokens().any(|t| t.eq_ignore_ascii_case(b"keep-alive"))
    }
}

/// Why input was refused. After one, the reader keeps returning it: answer and close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The head is not HTTP/1.x syntax (bad token, bad header line, bare CR, ...).
    Malformed,
    /// The request target is neither origin-form (`/…`) nor an http(s) absolute-form URI.
    BadTarget,
    /// The head exceeds [`Limits::max_head`].
    HeadTooLarge,
    /// More header fields than [`Limits::max_headers`].
    TooManyHeaders,
    /// The body (declared or decoded) exceeds [`Limits::max_body`].
    BodyTooLarge,
    /// A `Content-Length` that is not a decimal number, or several differing ones.
    BadContentLength,
    /// Both `Content-Length` and `Transfer-Encoding` (request smuggling guard).
    ConflictingLength,
    /// Bad chunked framing: hex, CRLF, line length, trailer syntax.
    BadChunk,
    /// A chunked body's trailer section exceeds [`Limits::max_head`].
    TrailersTooLarge,
    /// `Transfer-Encoding` other than exactly `chunked`.
    UnsupportedTransferEncoding,
    /// `Transfer-Encoding` in an HTTP/1.0 request (faulty framing, RFC 9112 §6.1).
    TransferEncodingInHttp10,
    /// An HTTP version other than 1.0 / 1.1 (including the HTTP/2 preface).
    UnsupportedVersion,
    /// More unparsed input than [`Limits::max_buffered`] (a client pipelining too far ahead).
    BufferFull,
}

impl ReadError {
    /// The HTTP status that answers this error.
    pub fn status(self) -> u16 {
        match self {
            ReadError::Malformed
            | ReadError::BadTarget
            | ReadError::BadContentLength
            | ReadError::ConflictingLength
            | ReadError::BadChunk
            | ReadError::TransferEncodingInHttp10 => 400,
            ReadError::BodyTooLarge | ReadError::BufferFull => 413,
            ReadError::HeadTooLarge | ReadError::TooManyHeaders | ReadError::TrailersTooLarge => {
                431
            }
            ReadError::UnsupportedTransferEncoding => 501,
            ReadError::UnsupportedVersion => 505,
        }
    }

    /// A fixed human-readable message.
    pub fn message(self) -> &'static str {
        match self {
            ReadError::Malformed => "malformed HTTP request",
            ReadError::BadTarget => "request target must be an absolute path",
            ReadError::HeadTooLarge => "request header section too large",
            ReadError::TooManyHeaders => "too many request header fields",
            ReadError::BodyTooLarge => "request body too large",
            ReadError::BadContentLength => "invalid Content-Length",
            ReadError::ConflictingLength => "both Content-Length and Transfer-Encoding present",
            ReadError::BadChunk => "invalid chunked request body",
            ReadError::TrailersTooLarge => "request trailer section too large",
            ReadError::UnsupportedTransferEncoding => {
                "only Transfer-Encoding: chunked is supported"
            }
            ReadError::TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
            ReadError::UnsupportedVersion => "HTTP version not supported",
            ReadError::BufferFull => "too much unread request data",
        }
    }

    /// The Kubernetes `Status` answering this error (reason per apimachinery where one exists).
    pub fn to_api_error(self) -> ApiError {
        let reason = match self.status() {
            400 => "BadRequest",
            413 => "RequestEntityTooLarge",
            431 => "RequestHeaderFieldsTooLarge",
            501 => "NotImplemented",
            505 => "HTTPVersionNotSupported",
            _ => "BadRequest",
        };
        ApiError::new(self.status(), reason, self.message())
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ReadError {}

/// How the body of the request being read is framed.
#[derive(Debug)]
enum Framing {
    /// `Content-Length` bytes still to come.
    Length(usize),
    Chunked(ChunkedDecoder),
}

/// Progress through the head of the next request (all positions relative to the buffer start).
#[derive(Clone, Debug, Default)]
struct HeadScan {
    /// Next byte to look at.
    pos: usize,
    /// The method token has ended (its SP was seen).
    method_done: bool,
}

#[derive(Debug)]
enum State {
    Head(HeadScan),
    Body { req: Request, framing: Framing },
}

/// Incremental request reader for one connection: [`push`](Self::push) what the socket gave,
/// then call [`next_request`](Self::next_request) until it returns `Ok(None)`.
#[derive(Debug)]
pub struct RequestReader {
    limits: Limits,
    /// Received bytes; `buf[start..]` is not consumed yet.
    buf: Vec<u8>,
    start: usize,
    state: State,
    /// Sticky: once input was refused, every later call returns the same error.
    failed: Option<ReadError>,
    /// The request in the body state expects `100-continue` and its body has not fully
    /// arrived: an interim answer is due (cleared by [`RequestReader::take_continue`], by the
    /// request's completion and by an error).
    continue_due: bool,
}

impl RequestReader {
    /// An empty reader.
    pub fn new(limits: Limits) -> Self {
        RequestReader {
            limits,
            buf: Vec::new(),
            start: 0,
            state: State::Head(HeadScan::default()),
            failed: None,
            continue_due: false,
        }
    }

    /// Appends bytes read from the socket. Err once the buffered, unparsed input would exceed
    /// [`Limits::max_buffered`] (nothing is appended then), or if input was refused before.
    pub fn push(&mut self, data: &[u8]) -> Result<(), ReadError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        self.compact();
        if self.buffered().saturating_add(data.len()) > self.limits.max_buffered() {
            let e = self.overflow(data);
            self.failed = Some(e);
            return Err(e);
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Returns the next complete request, `Ok(None)` if more bytes are needed. Leftover bytes stay
    /// buffered for the next call (pipelining).
    pub fn next_request(&mut self) -> Result<Option<Request>, ReadError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let result = self.advance();
        if let Err(e) = result {
            self.failed = Some(e);
            self.continue_due = false;
        }
        result
    }

    /// Whether an interim `100 Continue` is due now, at most once per request: true after a
    /// [`next_request`](Self::next_request) that returned `Ok(None)` while waiting for the body
    /// of an HTTP/1.1 request with `Expect: 100-continue` (RFC 9110 §10.1.1). Never for HTTP/1.0
    /// (which must ignore the expectation), a request without a body, a head refused by its
    /// checks (a `Content-Length` over [`Limits::max_body`] gets its final status instead), or a
    /// body that arrived complete with the head (the client is evidently not waiting).
    /// An `Expect` without a `100-continue` member is ignored.
    pub fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    /// Whether part of a request head has arrived and its end has not (the connection's head
    /// deadline runs).
    pub fn reading_head(&self) -> bool {
        matches!(self.state, State::Head(_)) && self.buffered() > 0
    }

    /// Why input that would take the buffer past [`Limits::max_buffered`] is refused: what the
    /// head being read fails with once `data` is appended, if it fails (an oversized head is
    /// 431 however fast it arrived, as when [`RequestReader::next_request`] sees it first);
    /// otherwise (a body, or requests pipelined too far ahead) [`ReadError::BufferFull`].
    fn overflow(&self, data: &[u8]) -> ReadError {
        let State::Head(scan) = &self.state else {
            return ReadError::BufferFull;
        };
        // RFC 9112 §2.2: empty lines before the request line are skipped, as `advance` does.
        let skip = scan.pos == 0;
        let head: Vec<u8> = self
            .buf
            .get(self.start..)
            .unwrap_or_default()
            .iter()
            .chain(data)
            .copied()
            .skip_while(|&b| skip && (b == b'\r' || b == b'\n'))
            .take(self.limits.max_head.saturating_add(1))
            .collect();
        match scan.clone().scan(&head, self.limits.max_head) {
            Err(e) => e,
            Ok(_) => ReadError::BufferFull,
        }
    }

    /// Bytes received and not yet consumed by a returned request.
    pub fn buffered(&self) -> usize {
        self.buf.len().saturating_sub(self.start)
    }

    /// Drops consumed bytes once they are at least half the buffer (amortized O(1) per byte even
    /// with many pipelined requests), and releases a large, empty buffer.
    fn compact(&mut self) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start.min(self.buf.len()));
            self.start = 0;
        }
        if self.buf.is_empty() && self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
        }
    }

    fn advance(&mut self) -> Result<Option<Request>, ReadError> {
        let limits = self.limits;
        loop {
            let input = self.buf.get(self.start..).unwrap_or_default();
            match &mut self.state {
                State::Head(scan) => {
                    if scan.pos == 0 {
                        // RFC 9112 §2.2: ignore empty lines before the request line.
                        match input {
                            [b'\r', b'\n', ..] => {
                                self.start += 2;
                                continue;
                            }
                            [b'\n', ..] => {
                                self.start += 1;
                                continue;
                            }
                            [] | [b'\r'] => return Ok(None),
                            _ => {}
                        }
                    }
                    let Some(end) = scan.scan(input, limits.max_head)? else {
                        return Ok(None);
                    };
                    let head = input.get(..end).unwrap_or_default();
                    let Some((req, used, framing)) = parse_head(head, &limits)? else {
                        // httparse wants more although the blank line is here; keep scanning.
                        continue;
                    };
                    self.start += used;
                    match framing {
                        Framing::Length(0) => {
                            self.state = State::Head(HeadScan::default());
                            return Ok(Some(req));
                        }
                        framing => {
                            // Due until the body is complete: if it already came with the head,
                            // the Body arm below clears it before the request is returned.
                            self.continue_due = expects_continue(&req);
                            self.state = State::Body { req, framing };
                        }
                    }
                }
                State::Body { req, framing } => {
                    let done = match framing {
                        Framing::Length(left) => {
                            let take = (*left).min(input.len());
                            req.body
                                .extend_from_slice(input.get(..take).unwrap_or_default());
                            self.start += take;
                            *left -= take;
                            *left == 0
                        }
                        Framing::Chunked(dec) => {
                            let d = dec
                                .feed(input, &mut req.body, limits.max_body, limits.max_head)
                                .map_err(|e| match e {
                                    ChunkError::Bad => ReadError::BadChunk,
                                    ChunkError::BodyTooLarge => ReadError::BodyTooLarge,
                                    ChunkError::TrailersTooLarge => ReadError::TrailersTooLarge,
                                })?;
                            self.start += d.consumed;
                            d.done
                        }
                    };
                    if !done {
                        return Ok(None);
                    }
                    self.continue_due = false;
                    let state =
                        std::mem::replace(&mut self.state, State::Head(HeadScan::default()));
                    if let State::Body { req, .. } = state {
                        return Ok(Some(req));
                    }
                }
            }
        }
    }
}

impl HeadScan {
    /// Scans newly arrived head bytes in order; returns the head length once its terminating
    /// empty line (`\n\n` or `\n\r\n`) is seen. Checks, per byte: the head limit, then the method
    /// token. The first failing byte decides, however the input was split.
    fn scan(&mut self, input: &[u8], max_head: usize) -> Result<Option<usize>, ReadError> {
        while let Some(&b) = input.get(self.pos) {
            let i = self.pos;
            if i >= max_head {
                return Err(ReadError::HeadTooLarge);
            }
            self.pos += 1;
            if !self.method_done {
                match b {
                    b' ' if i > 0 => self.method_done = true,
                    _ if is_tchar(b) => {}
                    _ => return Err(ReadError::Malformed),
                }
            } else if b == b'\n' {
                let before = input.get(..i).unwrap_or_default();
                if before.ends_with(b"\n") || before.ends_with(b"\n\r") {
                    return Ok(Some(i + 1));
                }
            }
        }
        Ok(None)
    }
}

/// Parses a complete head. `Ok(None)` if httparse still finds it partial.
fn parse_head(
    head: &[u8],
    limits: &Limits,
) -> Result<Option<(Request, usize, Framing)>, ReadError> {
    // A field line takes at least 3 bytes (`a:\n`), so a head within `max_head` never holds more
    // than max_head / 3 fields: the clamp only keeps an outlandish `max_headers` from allocating.
    let slots_len = limits.max_headers.min(limits.max_head / 3 + 1);
    let mut slots = vec![httparse::EMPTY_HEADER; slots_len];
    let mut parsed = httparse::Request::new(&mut slots);
    let used = match parsed.parse(head) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(ReadError::TooManyHeaders),
        Err(httparse::Error::Version) => return Err(version_error(head)),
        Err(_) => return Err(ReadError::Malformed),
    };
    let (Some(method), Some(target), Some(minor_version)) =
        (parsed.method, parsed.path, parsed.version)
    else {
        return Err(ReadError::Malformed);
    };
    let (path, query) = split_target(target)?;
    let headers: Vec<(String, Vec<u8>)> = parsed
        .headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect();
    let framing = framing(&headers, minor_version, limits.max_body)?;
    let req = Request {
        method: method.to_string(),
        path,
        query,
        minor_version,
        headers,
        body: Vec::new(),
    };
    Ok(Some((req, used, framing)))
}

/// httparse refused the version: 505 if the request line ends in a well-formed `HTTP/d.d`
/// (HTTP/2 preface, HTTP/1.2, ...), 400 otherwise.
fn version_error(head: &[u8]) -> ReadError {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or_default();
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            ReadError::UnsupportedVersion
        }
        _ => ReadError::Malformed,
    }
}

/// Splits a request target into (path, query). Origin-form `/p?q`, or absolute-form
/// `http(s)://authority/p?q` reduced to its path; anything else (`*`, authority-form, a
/// fragment) is [`ReadError::BadTarget`].
fn split_target(target: &str) -> Result<(String, String), ReadError> {
    if target.contains('#') {
        return Err(ReadError::BadTarget);
    }
    let rest = if target.starts_with('/') {
        target
    } else {
        let (scheme, after) = target.split_once("://").ok_or(ReadError::BadTarget)?;
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(ReadError::BadTarget);
        }
        let authority_end = after.find(['/', '?']).unwrap_or(after.len());
        if authority_end == 0 {
            return Err(ReadError::BadTarget);
        }
        after.get(authority_end..).unwrap_or_default()
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let path = if path.is_empty() { "/" } else { path };
    Ok((path.to_string(), query.to_string()))
}

/// Body framing from the headers (RFC 9112 §6.3), with the smuggling guards.
fn framing(
    headers: &[(String, Vec<u8>)],
    minor_version: u8,
    max_body: usize,
) -> Result<Framing, ReadError> {
    let mut length: Option<u64> = None;
    let mut transfer_encodings = Vec::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("content-length") {
            // RFC 9110 §8.6: a list of identical values may be taken as one value.
            for part in value.split(|&b| b == b',') {
                let n = parse_decimal(trim_ows(part)).ok_or(ReadError::BadContentLength)?;
                if length.is_some_and(|l| l != n) {
                    return Err(ReadError::BadContentLength);
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encodings.push(value.as_slice());
        }
    }
    match (length, transfer_encodings.as_slice()) {
        (Some(_), [_, ..]) => Err(ReadError::ConflictingLength),
        (None, [_, ..]) if minor_version == 0 => Err(ReadError::TransferEncodingInHttp10),
        (None, [te]) if trim_ows(te).eq_ignore_ascii_case(b"chunked") => {
            Ok(Framing::Chunked(ChunkedDecoder::new()))
        }
        (None, [_, ..]) => Err(ReadError::UnsupportedTransferEncoding),
        (Some(n), []) => match usize::try_from(n) {
            Ok(n) if n <= max_body => Ok(Framing::Length(n)),
            _ => Err(ReadError::BodyTooLarge),
        },
        (None, []) => Ok(Framing::Length(0)),
    }
}

/// Whether `req` is an HTTP/1.1 request whose `Expect` fields (a comma-separated list, possibly
/// over several lines) hold the member `100-continue`, case-insensitively (RFC 9110 §10.1.1).
/// An HTTP/1.0 request's expectation is ignored.
fn expects_continue(req: &Request) -> bool {
    req.minor_version >= 1
        && req
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("expect"))
            .flat_map(|(_, v)| v.split(|&b| b == b','))
            .any(|m| trim_ows(m).eq_ignore_ascii_case(b"100-continue"))
}

/// `1*DIGIT` as a u64; `None` if empty, not all digits, or overflowing.
fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Strips optional whitespace (SP / HTAB) from both ends.
fn trim_ows(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or_default()
}

/// Feeds `chunks` the way the server does — push, then take requests until `Ok(None)` or an
/// error — and returns every outcome in order. For tests and fuzzing (split invariance).
pub fn read_all<'a>(
    limits: Limits,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<Result<Request, ReadError>> {
    let mut reader = RequestReader::new(limits);
    let mut out = Vec::new();
    for chunk in chunks {
        if let Err(e) = reader.push(chunk) {
            out.push(Err(e));
            return out;
        }
        loop {
            match reader.next_request() {
                Ok(Some(req)) => out.push(Ok(req)),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(e));
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
