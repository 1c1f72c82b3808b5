//! HTTP/1.1 framing for the simulator: an incremental request parser over a byte buffer
//! (httparse head, `Content-Length` or chunked body, named bounds) and response writers (fixed
//! length, Status errors, chunked streams). The parser is pure; the writers take any `Write`.

use grid_wrapper::k8s::status::ApiError;
use std::io::{self, Read, Write};

/// Largest request head accepted (431 past it).
pub const MAX_HEAD: usize = 64 * 1024;
/// Most headers accepted in one request.
pub const MAX_HEADERS: usize = 100;
/// Largest request body accepted (413 past it).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// A fully read request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Method, e.g. `GET`.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Raw query string without `?` (`""` when absent).
    pub query: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Decoded body.
    pub body: Vec<u8>,
    /// HTTP/1.0 or `Connection: close`.
    pub close: bool,
}

impl Request {
    /// First header with this name (case-insensitive), if it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Not HTTP/1.x, or a bad body framing.
    Malformed,
    /// Head exceeds [`MAX_HEAD`] or [`MAX_HEADERS`].
    HeadTooLarge,
    /// Body exceeds [`MAX_BODY`].
    BodyTooLarge,
    /// Socket error or EOF inside a request.
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Malformed => f.write_str("malformed request"),
            ReadError::HeadTooLarge => f.write_str("request head too large"),
            ReadError::BodyTooLarge => f.write_str("request body too large"),
            ReadError::Io(e) => write!(f, "read: {e}"),
        }
    }
}

impl ReadError {
    /// The Status to answer with, if the connection can still take one.
    pub fn status(&self) -> Option<ApiError> {
        match self {
            ReadError::Malformed => Some(ApiError::bad_request("malformed HTTP request")),
            ReadError::HeadTooLarge => Some(ApiError::new(
                431,
                "RequestHeaderFieldsTooLarge",
                "request head too large",
            )),
            ReadError::BodyTooLarge => Some(ApiError::new(
                413,
                "RequestEntityTooLarge",
                "request body too large",
            )),
            ReadError::Io(_) => None,
        }
    }
}

/// Result of one parse attempt over the buffered bytes.
#[derive(Debug)]
pub enum Parsed {
    /// More bytes needed.
    Partial,
    /// A request and how many buffered bytes it used.
    Complete(Request, usize),
}

/// Parses one request from the start of `buf`.
pub fn parse(buf: &[u8]) -> Result<Parsed, ReadError> {
    let mut hdrs = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut hdrs);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(ReadError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err(ReadError::HeadTooLarge),
        Err(_) => return Err(ReadError::Malformed),
    };
    if head_len > MAX_HEAD {
        return Err(ReadError::HeadTooLarge);
    }
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers: Vec<(String, Vec<u8>)> = req
        .headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).trim().to_ascii_lowercase())
    };
    let conn = get("connection").unwrap_or_default();
    let close = req.version == Some(0) && !conn.contains("keep-alive") || conn.contains("close");
    let rest = buf.get(head_len..).unwrap_or(&[]);
    let (body, body_len) = match (get("transfer-encoding"), get("content-length")) {
        (Some(te), None) if te == "chunked" => match parse_chunked(rest)? {
            Some(x) => x,
            None => return Ok(Parsed::Partial),
        },
        (Some(_), _) => return Err(ReadError::Malformed),
        (None, Some(cl)) => {
            let n: usize = cl.parse().map_err(|_| ReadError::Malformed)?;
            if n > MAX_BODY {
                return Err(ReadError::BodyTooLarge);
            }
            match rest.get(..n) {
                Some(b) => (b.to_vec(), n),
                None => return Ok(Parsed::Partial),
            }
        }
        (None, None) => (Vec::new(), 0),
    };
    let request = Request {
        method,
        path: path.to_string(),
        query: query.to_string(),
        headers,
        body,
        close,
    };
    Ok(Parsed::Complete(request, head_len + body_len))
}

/// Decodes a chunked body; `None` = incomplete. Trailers are skipped.
fn parse_chunked(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, ReadError> {
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        let rest = buf.get(pos..).unwrap_or(&[]);
        let (n, size) = match httparse::parse_chunk_size(rest) {
            Ok(httparse::Status::Complete(x)) => x,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(ReadError::Malformed),
        };
        let size = usize::try_from(size).map_err(|_| ReadError::BodyTooLarge)?;
        if size > MAX_BODY.saturating_sub(body.len()) {
            return Err(ReadError::BodyTooLarge);
        }
        pos += n;
        if size == 0 {
            // Trailer section: lines until an empty line.
            loop {
                let rest = buf.get(pos..).unwrap_or(&[]);
                let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                    return if rest.len() > MAX_HEAD {
                        Err(ReadError::HeadTooLarge)
                    } else {
                        Ok(None)
                    };
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, pos)));
                }
            }
        }
        let Some(data) = buf.get(pos..pos + size) else {
            return Ok(None);
        };
        body.extend_from_slice(data);
        pos += size;
        match buf.get(pos..pos + 2) {
            None => return Ok(None),
            Some(b"\r\n") => pos += 2,
            Some(_) => return Err(ReadError::Malformed),
        }
    }
}

/// Size of each socket read.
const READ_CHUNK: usize = 16 * 1024;

/// Reads the next request from `r`, keeping extra bytes in `buf` for the next call.
/// `Ok(None)` on a clean EOF between requests.
pub fn read_request<R: Read>(r: &mut R, buf: &mut Vec<u8>) -> Result<Option<Request>, ReadError> {
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        if !buf.is_empty() {
            if let Parsed::Complete(req, used) = parse(buf)? {
                buf.drain(..used.min(buf.len()));
                return Ok(Some(req));
            }
        }
        match r.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => {
                return Err(ReadError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "EOF inside a request",
                )))
            }
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or(&[])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
}

/// Reason phrase of the codes the simulator sends.
pub fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// Writes a complete response with `Content-Length`, then flushes.
pub fn write_response<W: Write>(
    w: &mut W,
    code: u16,
    content_type: &str,
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
        reason(code),
        body.len()
    );
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    w.write_all(&out)?;
    w.flush()
}

/// Writes an `ApiError` as a JSON Status response.
pub fn write_status<W: Write>(w: &mut W, err: &ApiError, close: bool) -> io::Result<()> {
    write_response(w, err.code, "application/json", &err.to_json(), close)
}

/// Writes a JSON value as a 200/201 response.
pub fn write_json<W: Write>(
    w: &mut W,
    code: u16,
    v: &serde_json::Value,
    close: bool,
) -> io::Result<()> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    write_response(w, code, "application/json", &body, close)
}

/// Starts a chunked 200 `application/json` response and flushes the head.
pub fn start_chunked<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    w.flush()
}

/// Writes one chunk (no flush; empty data writes nothing).
pub fn write_chunk<W: Write>(w: &mut W, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    w.write_all(&out)
}

/// Writes the terminating chunk and flushes.
pub fn end_chunked<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(raw: &[u8]) -> (Request, usize) {
        match parse(raw) {
            Ok(Parsed::Complete(r, n)) => (r, n),
            other => panic!("not complete: {other:?}"),
        }
    }

    #[test]
    fn parses_get_with_query() {
        let raw = b"GET /api/v1/nodes?watch=true&x=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /next";
        let (r, n) = complete(raw);
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/v1/nodes");
        assert_eq!(r.query, "watch=true&x=1");
        assert_eq!(r.header("host"), Some("a"));
        assert!(!r.close);
        assert_eq!(raw.get(n..), Some(&b"GET /next"[..]));
    }

    #[test]
    fn bodies_content_length_and_chunked() {
        let raw = b"POST /e HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc";
        let (r, n) = complete(raw);
        assert_eq!(r.body, b"abc");
        assert!(r.close);
        assert_eq!(n, raw.len());
        let raw = b"PATCH /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n";
        let (r, n) = complete(raw);
        assert_eq!(r.body, b"abcde");
        assert_eq!(n, raw.len());
    }

    #[test]
    fn every_prefix_is_partial_never_an_error() {
        let raw: &[u8] =
            b"POST /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        for cut in 0..raw.len() {
            let prefix = raw.get(..cut).unwrap_or_default();
            assert!(matches!(parse(prefix), Ok(Parsed::Partial)), "cut {cut}");
        }
        assert!(matches!(parse(raw), Ok(Parsed::Complete(..))));
    }

    #[test]
    fn bad_input_is_an_error() {
        let cases: &[(&[u8], u16)] = &[
            (b"\x00\x01garbage\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
                413,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
                400,
            ),
        ];
        for (raw, code) in cases {
            let e = parse(raw).expect_err("error");
            assert_eq!(e.status().map(|s| s.code), Some(*code), "{raw:?}");
        }
        let big = vec![b'a'; MAX_HEAD + 10];
        let mut raw = b"GET / HTTP/1.1\r\nX: ".to_vec();
        raw.extend_from_slice(&big);
        assert!(matches!(parse(&raw), Err(ReadError::HeadTooLarge)));
    }

    #[test]
    fn read_request_handles_pipelining_and_eof() {
        let raw = b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n".to_vec();
        let mut cur = std::io::Cursor::new(raw);
        let mut buf = Vec::new();
        let a = read_request(&mut cur, &mut buf).expect("a").expect("some");
        let b = read_request(&mut cur, &mut buf).expect("b").expect("some");
        assert_eq!((a.path.as_str(), b.path.as_str()), ("/a", "/b"));
        assert!(read_request(&mut cur, &mut buf).expect("eof").is_none());
    }

    #[test]
    fn random_bytes_never_panic() {
        // Deterministic xorshift noise, spliced after valid request prefixes.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let prefixes: [&[u8]; 3] = [
            b"",
            b"GET / HTTP/1.1\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ];
        for i in 0..3000 {
            let mut buf = prefixes[i % 3].to_vec();
            for _ in 0..(i % 97) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let alphabet = b"0123456789abcdefXYZ:; \r\n";
                buf.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            let _ = parse(&buf);
        }
    }

    #[test]
    fn chunk_framing() {
        let mut out = Vec::new();
        write_chunk(&mut out, b"hello\n").expect("write");
        write_chunk(&mut out, b"").expect("write");
        end_chunked(&mut out).expect("end");
        assert_eq!(out, b"6\r\nhello\n\r\n0\r\n\r\n");
    }
}
